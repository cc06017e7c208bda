"""JSON as TiCDC's Go code writes it, for the three JSON formats (Open Protocol entries, canal-json,
Simple): strict UTF-8, no NaN/Infinity, number text kept exact (DECIMAL), `-0` keeps its sign, a
lone surrogate escape becomes U+FFFD; and the typed field readers their decoders share."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from replicator.errors import DecodeError


class FloatText(str):
    """A JSON number with a fraction or exponent (or `-0`), kept as its text so DECIMAL stays exact
    and a negative zero keeps its sign."""

    __slots__ = ()


def _reject_constant(name: str) -> Any:
    raise DecodeError(f"JSON constant {name} is not allowed")


def _int_or_negative_zero(text: str) -> int | FloatText:
    """Go's encoding/json writes the float64 -0.0 as `-0`, which Python's json reads as the int 0,
    losing the sign: keep it as number text, which a DOUBLE column reads as -0.0."""
    return FloatText(text) if text == "-0" else int(text)


_JSON: Final = json.JSONDecoder(parse_float=FloatText, parse_constant=_reject_constant)
# Used only for entries that may hold a `-0` number (the common case keeps the C integer path).
_JSON_NEGATIVE_ZERO: Final = json.JSONDecoder(
    parse_float=FloatText, parse_int=_int_or_negative_zero, parse_constant=_reject_constant
)
# `-0` not followed by more of a number: a JSON number `-0` when the text before it, past JSON
# whitespace, is ':', ',' or '[' (`_has_negative_zero`); a match inside a string only costs the
# slower parse. Searched from the `-0` (dates hold many `-0`s, each rejected by its next character).
_NEGATIVE_ZERO_RE: Final = re.compile(r"-0(?![0-9.eE])")
# Python's json keeps a lone \uD800-\uDFFF escape as a lone surrogate; Go turns it into U+FFFD.
_SURROGATE_ESCAPE_RE: Final = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")


def _has_negative_zero(text: str) -> bool:
    """Whether `text` may hold the JSON number `-0` (`[:,[]` JSON-whitespace* `-0`, not followed by
    more of a number)."""
    for match in _NEGATIVE_ZERO_RE.finditer(text):
        k = match.start() - 1
        while k >= 0 and text[k] in " \t\r\n":
            k -= 1
        if k >= 0 and text[k] in ":,[":
            return True
    return False


def json_kind(value: object) -> str:
    """How a JSON value reads in an error message ("a string", "null", ...)."""
    if value is None:
        return "null"
    if type(value) is bool:
        return "a boolean"
    if type(value) is int or type(value) is FloatText:
        return "a number"
    if type(value) is str:
        return "a string"
    if type(value) is list:
        return "an array"
    return "an object"


def _fix_surrogates(obj: Any) -> Any:
    if type(obj) is str:
        return _LONE_SURROGATE_RE.sub("\ufffd", obj)
    if type(obj) is dict:
        return {_fix_surrogates(k): _fix_surrogates(v) for k, v in obj.items()}
    if type(obj) is list:
        return [_fix_surrogates(v) for v in obj]
    return obj


_JSON_START: Final = frozenset(b'{[ \t\r\n"-0123456789tfn')


def load_object(buf: bytes, start: int, end: int, where: str) -> dict[str, Any]:
    """Parse one entry as a JSON object (strict UTF-8, no NaN/Infinity)."""
    # Snappy/LZ4-compressed entries (large-message-handle-compression) do not start like JSON.
    hint = "" if start == end or buf[start] in _JSON_START else " (compressed values are not supported)"
    try:
        text = buf[start:end].decode("utf-8")
    except UnicodeDecodeError as exc:
        what = f"not valid UTF-8 ({exc.reason}){hint}"
        raise DecodeError(what, offset=start + exc.start, where=where) from None
    try:
        decoder = _JSON_NEGATIVE_ZERO if "-0" in text and _has_negative_zero(text) else _JSON
        obj = decoder.decode(text)
    except json.JSONDecodeError as exc:
        offset = start + len(text[: exc.pos].encode("utf-8"))
        raise DecodeError(f"not valid JSON: {exc.msg}{hint}", offset=offset, where=where) from None
    except DecodeError as exc:
        raise DecodeError(exc.what, offset=start, where=where) from None
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"not valid JSON: {exc}", offset=start, where=where) from None
    if type(obj) is not dict:
        raise DecodeError(f"JSON entry is {json_kind(obj)}, not an object", offset=start, where=where)
    result: dict[str, Any] = obj
    if "\\u" in text and _SURROGATE_ESCAPE_RE.search(text) is not None:
        result = _fix_surrogates(obj)
    return result


UINT64_LIMIT: Final = 1 << 64


def str_field(obj: dict[str, Any], field: str) -> str:
    """An optional string field ("" when absent or null); a DecodeError naming it otherwise."""
    value = obj.get(field)
    if value is None:
        return ""
    if type(value) is not str:
        raise DecodeError(f"'{field}' is {json_kind(value)}, not a string", where=f"field '{field}'")
    return value


def uint64_field(obj: dict[str, Any], field: str, *, required: bool, path: str | None = None,
                 what: str = "a uint64") -> int:
    """A uint64 field (a TSO); 0 when optional and absent (Go's omitempty leaves a zero out).
    `path`: the field's name in messages when it is nested (`_tidb.commitTs`)."""
    value = obj.get(field)
    if value is None and not required:
        return 0
    if type(value) is not int or not 0 <= value < UINT64_LIMIT:
        name = path or field
        shown = value if type(value) is int else json_kind(value)
        raise DecodeError(f"'{name}' is {shown}, not {what}", where=f"field '{name}'")
    return value
