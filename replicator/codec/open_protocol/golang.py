"""Go's text formats, byte for byte: `strconv.Quote` / `Unquote` (binary CHAR/VARCHAR),
encoding/json string escaping and float formatting (as of Go 1.19, the Go of the reference
encoder).
"""

from __future__ import annotations

import math
import re
import struct
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from typing import Final

from replicator.codec.open_protocol.common import (
    _short,
)
from replicator.errors import DecodeError

__all__ = ["go_float_text", "go_quote", "go_unquote"]


def go_unquote(text: str) -> bytes:
    """Undo Go `strconv.Quote` (without the outer quotes) to the exact bytes, as `strconv.Unquote`.

    The reference writes binary CHAR/VARCHAR this way. Invalid escapes, a raw '"' or a raw newline
    are errors, exactly where Go's Unquote fails.
    """
    if "\\" not in text:
        if '"' in text or "\n" in text:
            raise DecodeError(f"binary string {_short(text)} has an unescaped quote or newline", where="field 'v'")
        return text.encode("utf-8")
    out = bytearray()
    pos = 0
    for m in _UNQUOTE_RE.finditer(text):
        segment = text[pos : m.start()]
        if "\\" in segment or '"' in segment or "\n" in segment:
            break
        out += segment.encode("utf-8")
        hex2, octal, hex4, hex8, simple = m.groups()
        if hex2 is not None:
            out.append(int(hex2, 16))
        elif octal is not None:
            code = int(octal, 8)
            if code > 255:
                break
            out.append(code)
        elif simple is not None:
            out += _UNQUOTE_SIMPLE[simple]
        else:
            code = int(hex4 if hex4 is not None else hex8, 16)
            if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                break
            out += chr(code).encode("utf-8")
        pos = m.end()
    else:
        tail = text[pos:]
        if "\\" not in tail and '"' not in tail and "\n" not in tail:
            out += tail.encode("utf-8")
            return bytes(out)
    raise DecodeError(f"binary string {_short(text)} has an invalid Go escape sequence", where="field 'v'")


_UNQUOTE_RE: Final = re.compile(
    r"\\(?:x([0-9a-fA-F]{2})|([0-7]{3})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([abfnrtv\\\"]))"
)
_UNQUOTE_SIMPLE: Final = {
    "a": b"\a",
    "b": b"\b",
    "f": b"\f",
    "n": b"\n",
    "r": b"\r",
    "t": b"\t",
    "v": b"\v",
    "\\": b"\\",
    '"': b'"',
}


_QUOTE_NAMED: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_quote(data: bytes) -> str:
    """Go `strconv.Quote(string(data))` minus the outer quotes (how binary CHAR/VARCHAR is written).

    Printable UTF-8 stays, `\\a \\b \\f \\n \\r \\t \\v \\\\ \\"` are escaped, invalid bytes and
    ASCII controls become `\\xNN`, other non-printable runes `\\uNNNN` / `\\UNNNNNNNN`. Go's and
    Python's "printable" are the same definition (categories L, M, N, P, S and ASCII space).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "surrogateescape")  # each invalid byte -> U+DC80..U+DCFF
    else:
        if text.isprintable() and '"' not in text and "\\" not in text:
            return text
    parts: list[str] = []
    for ch in text:
        if ch == '"' or ch == "\\":
            parts.append("\\" + ch)
        elif "\udc80" <= ch <= "\udcff":
            parts.append(f"\\x{ord(ch) - 0xDC00:02x}")
        elif ch.isprintable():
            parts.append(ch)
        elif ch in _QUOTE_NAMED:
            parts.append(_QUOTE_NAMED[ch])
        else:
            code = ord(ch)
            if code < 0x20 or code == 0x7F:
                parts.append(f"\\x{code:02x}")
            elif code < 0x10000:
                parts.append(f"\\u{code:04x}")
            else:
                parts.append(f"\\U{code:08x}")
    return "".join(parts)


# Go encoding/json string escaping with HTML escaping on (Go 1.19: \b and \f as \u0008 / \u000c).
_JSON_ESCAPES: Final = {chr(c): f"\\u{c:04x}" for c in range(0x20)} | {
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    '"': '\\"',
    "\\": "\\\\",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_ESCAPE_RE: Final = re.compile('[\x00-\x1f"\\\\<>&\u2028\u2029\ud800-\udfff]')


def _json_escape(m: re.Match[str]) -> str:
    # A surrogate stands for an invalid UTF-8 byte (surrogateescape) or is one: Go writes \ufffd.
    return _JSON_ESCAPES.get(m.group(), "\\ufffd")


def _json_string(text: str) -> str:
    if _JSON_ESCAPE_RE.search(text) is None:
        return '"' + text + '"'
    return '"' + _JSON_ESCAPE_RE.sub(_json_escape, text) + '"'


def _digits(text: str) -> tuple[str, int]:
    """Significant digits and decimal point position of a positive decimal text ('1.5e-07')."""
    mantissa, _, exp = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = whole + frac
    point = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    return stripped.rstrip("0") or "0", point


def _layout(negative: bool, digits: str, point: int, exponent_form: bool) -> str:
    sign = "-" if negative else ""
    if exponent_form:
        exp = point - 1
        body = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{body}e{'-' if exp < 0 else '+'}{abs(exp):02d}".replace("e-0", "e-")
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


_F32: Final = struct.Struct("<f")
_U32: Final = struct.Struct("<I")
_F32_1E_6: Final = _F32.unpack(_F32.pack(1e-6))[0]
_F32_1E21: Final = _F32.unpack(_F32.pack(1e21))[0]
_EXACT: Final = Context(prec=400)


def _f32_digits(x: float) -> tuple[str, int]:
    """Shortest digits that read back (as float32) to the float32 `x` > 0, closest on a tie: Go's
    `FormatFloat(x, _, -1, 32)`. Uses exact decimal midpoints, not double rounding."""
    bits = _U32.unpack(_F32.pack(x))[0]
    below = _F32.unpack(_U32.pack(bits - 1))[0] if bits > 1 else 0.0
    above = _F32.unpack(_U32.pack(bits + 1))[0]
    if math.isinf(above):
        above = x + (x - below)
    exact = Decimal(x)
    low = _EXACT.divide(_EXACT.add(exact, Decimal(below)), 2)
    high = _EXACT.divide(_EXACT.add(exact, Decimal(above)), 2)
    inclusive = bits % 2 == 0  # ties round to even
    for precision in range(1, 10):
        found: list[Decimal] = []
        for rounding in (ROUND_FLOOR, ROUND_CEILING):
            cand = Context(prec=precision, rounding=rounding).plus(exact)
            if low < cand < high or (inclusive and cand in (low, high)):
                found.append(cand)
        if found:
            if len(found) == 2 and found[0] != found[1]:
                below_gap = _EXACT.subtract(exact, found[0])
                above_gap = _EXACT.subtract(found[1], exact)
                if above_gap < below_gap or (
                    above_gap == below_gap and found[1].as_tuple().digits[-1] % 2 == 0
                ):  # exactly halfway: the even last digit (Go 1.19's Ryu)
                    found.reverse()
            return _digits(f"{found[0]:e}")
    return _digits(repr(x))  # unreachable: 9 digits always identify a float32


def go_float_text(value: float, bits: int = 64) -> str:
    """Go encoding/json text of a float64 (bits=64, DOUBLE) or float32 (bits=32, FLOAT).

    Shortest round-trip digits; exponent form below 1e-6 and from 1e21 on ('1e+21', '1e-7').
    """
    if not math.isfinite(value):
        raise ValueError(f"{value!r} has no JSON representation")
    if bits == 32:
        try:
            value = _F32.unpack(_F32.pack(value))[0]
        except OverflowError:
            raise ValueError(f"{value!r} is outside the float32 range") from None
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    magnitude = abs(value)
    if bits == 32:
        digits, point = _f32_digits(magnitude)
        exponent_form = magnitude < _F32_1E_6 or magnitude >= _F32_1E21
    else:
        digits, point = _digits(repr(magnitude))
        exponent_form = magnitude < 1e-6 or magnitude >= 1e21
    return _layout(value < 0, digits, point, exponent_form)
