"""TiCDC's row-level checksum (CRC32-IEEE over a row's columns), pure.

TiCDC carries it in the Simple protocol's `checksum` object (and Avro's `_tidb_row_level_checksum`):
`current` covers the new row, `previous` the old one; 0 means "no checksum" and is not verified.
The algorithm follows TiCDC's consumer-side code (tiflow `pkg/sink/codec/common/verify_checksum.go`,
`calculateChecksum` / `buildChecksumBytes`, itself following TiDB `util/rowcodec`), not the
pseudocode of the docs (ticdc-integrity-check.md leaves out the length prefix):

- start at 0; for each column of the row in column-ID order (the table schema's order), append the
  column's bytes with `crc32.Update` (Python: `zlib.crc32(buf, crc)`, the same IEEE polynomial);
- NULL adds nothing, nor do NULL-typed and GEOMETRY columns;
- TINYINT..BIGINT, MEDIUMINT, YEAR: the value as uint64 little-endian (a negative one two's complement);
- FLOAT / DOUBLE: the float64 bits little-endian (a FLOAT is its float32 widened), NaN and ±Inf as 0;
- ENUM / SET / BIT: the number as uint64 little-endian;
- CHAR / VARCHAR / TEXT / BLOB / BINARY: uint32 little-endian byte length, then the bytes (a binary
  column's raw bytes, a text column's UTF-8);
- DECIMAL, DATE, DATETIME, TIME, JSON: length + the value's text exactly as sent;
- TIMESTAMP: the text converted from its location to UTC (same fractional digits), length + text;
- VECTOR: TiDB's serialization: uint32 little-endian element count, then each float32 little-endian.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
import zlib
from collections.abc import Iterable
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from replicator.errors import DecodeError
from replicator.events import TypeCode

__all__ = ["ChecksumError", "column_bytes", "row_checksum", "timestamp_utc_text"]

_UINT64: Final = (1 << 64) - 1
_INTEGERS: Final = frozenset(int(c) for c in (TypeCode.TINY, TypeCode.SHORT, TypeCode.LONG, TypeCode.LONGLONG,
                                             TypeCode.INT24, TypeCode.YEAR))
_NUMBERS: Final = frozenset(int(c) for c in (TypeCode.ENUM, TypeCode.SET, TypeCode.BIT))
_BYTES: Final = frozenset(int(c) for c in (
    TypeCode.VARCHAR, TypeCode.VAR_STRING, TypeCode.STRING, TypeCode.TINY_BLOB, TypeCode.MEDIUM_BLOB,
    TypeCode.LONG_BLOB, TypeCode.BLOB, TypeCode.NEWDECIMAL, TypeCode.DECIMAL, TypeCode.DATE, TypeCode.NEWDATE,
    TypeCode.DATETIME, TypeCode.TIME, TypeCode.JSON, TypeCode.TIMESTAMP))
_SKIPPED: Final = frozenset(int(c) for c in (TypeCode.NULL, TypeCode.GEOMETRY))
_TS_RE: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?\Z", re.ASCII)


class ChecksumError(DecodeError):
    """A row's CRC32 differs from the checksum TiCDC sent with it: the data is corrupt."""


def _length_value(raw: bytes) -> bytes:
    return struct.pack("<I", len(raw)) + raw


def column_bytes(code: int, value: int | float | str | bytes | None) -> bytes:
    """The bytes one column adds to the checksum; `value` as the wire gives it, typed:
    int for integers / ENUM / SET / BIT, float for FLOAT (already float32) / DOUBLE, bytes for a
    binary string, str for everything else (a TIMESTAMP already in UTC: `timestamp_utc_text`)."""
    if value is None or code in _SKIPPED:
        return b""
    if code in _INTEGERS or code in _NUMBERS:
        if type(value) is not int:
            raise TypeError(f"type code {code} needs an int, not {type(value).__name__}")
        return struct.pack("<Q", value & _UINT64)
    if code == TypeCode.FLOAT or code == TypeCode.DOUBLE:
        if type(value) is not float and type(value) is not int:
            raise TypeError(f"type code {code} needs a float, not {type(value).__name__}")
        real = float(value)
        return struct.pack("<d", 0.0 if math.isnan(real) or math.isinf(real) else real)
    if code in _BYTES:
        if isinstance(value, bytes):
            return _length_value(value)
        if isinstance(value, str):
            return _length_value(value.encode("utf-8", "surrogatepass"))
        raise TypeError(f"type code {code} needs bytes or str, not {type(value).__name__}")
    if code == TypeCode.VECTOR:
        if not isinstance(value, str):
            raise TypeError("a vector needs its text")
        body = value.strip()
        if not (body.startswith("[") and body.endswith("]")):
            raise ValueError(f"vector {value!r} is not [f1,f2,...]")
        items = [float(x) for x in body[1:-1].split(",")] if body[1:-1].strip() else []
        return struct.pack("<I", len(items)) + b"".join(struct.pack("<f", x) for x in items)
    raise TypeError(f"type code {code} has no checksum encoding")


def row_checksum(cells: Iterable[tuple[int, int | float | str | bytes | None]]) -> int:
    """CRC32 of a row: `cells` are (type code, value) in column-ID order (see `column_bytes`)."""
    crc = 0
    for code, value in cells:
        crc = zlib.crc32(column_bytes(code, value), crc)
    return crc


def timestamp_utc_text(text: str, location: str, local: dt.tzinfo = dt.UTC) -> str:
    """TiCDC's `ConvertTimezone`: a TIMESTAMP's text in `location` -> the same instant's text in UTC,
    keeping its fractional digits. `Local` / `System` / empty is `local` (the upstream zone). A zero
    timestamp stays as it is."""
    m = _TS_RE.match(text)
    if m is None:
        raise ValueError(f"timestamp {text!r} is not YYYY-MM-DD HH:MM:SS[.ffffff]")
    if all(ch in "0-: ." for ch in text):
        return text
    if location.lower() in ("", "local", "system"):
        tz = local
    elif location.upper() == "UTC":
        tz = dt.UTC
    else:
        try:
            tz = ZoneInfo(location)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone location {location!r}") from exc
    frac = m.group(7) or ""
    micro = int(frac.ljust(6, "0")) if frac else 0
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    local_time = dt.datetime(y, mo, d, h, mi, s, micro, tzinfo=tz)
    utc = local_time.astimezone(dt.UTC)
    out = utc.strftime("%Y-%m-%d %H:%M:%S")
    if frac:
        out += "." + f"{utc.microsecond:06d}"[: len(frac)]
    return out
