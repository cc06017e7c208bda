"""Craft constants both directions share: event and group types, flag bits, the value kind of
each MySQL type code (the reference's EncodeTiDBType / DecodeTiDBType switch), int64 wrapping.

The layout itself is described in `replicator/codec/craft/__init__.py`.
"""

from __future__ import annotations

import struct
from typing import Final

VERSION: Final = 1

# Header event types (model.MqMessageType) and column group types.
_ROW: Final = 1
_DDL: Final = 2
_RESOLVED: Final = 3
_GROUP_NEW: Final = 1
_GROUP_OLD: Final = 2

_U64: Final = (1 << 64) - 1
_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_BINARY: Final = 0x01
_UNSIGNED: Final = 0x80

# --------------------------------------------------------------------------------------------
# Value kinds: one small int per MySQL type code, so the hot loop branches on a list lookup.

_K_NULL: Final = 0  # NULL, GEOMETRY, unspecified and unknown codes: always None
_K_STR: Final = 1  # CHAR/VARCHAR/BINARY/VARBINARY and the BLOB/TEXT family: bytes if BINARY flag else str
_K_INT: Final = 2  # TINY/SHORT/LONG/LONGLONG/INT24: uvarint if UNSIGNED flag else zigzag varint
_K_YEAR: Final = 3  # always zigzag varint (reference ignores UNSIGNED for YEAR)
_K_FLOAT: Final = 4  # 8-byte little-endian float64
_K_UVAR: Final = 5  # BIT/ENUM/SET: uvarint
_K_DATE: Final = 6
_K_DATETIME: Final = 7
_K_TIMESTAMP: Final = 8
_K_TIME: Final = 9
_K_DECIMAL: Final = 10
_K_TEXT: Final = 11  # JSON, VECTOR: their text as str

_KIND: Final[list[int]] = [_K_NULL] * 256
for _codes, _kind in (
    ((15, 253, 254, 249, 250, 251, 252), _K_STR),
    ((1, 2, 3, 8, 9), _K_INT),
    ((13,), _K_YEAR),
    ((4, 5), _K_FLOAT),
    ((16, 247, 248), _K_UVAR),
    ((10, 14), _K_DATE),
    ((12,), _K_DATETIME),
    ((7,), _K_TIMESTAMP),
    ((11,), _K_TIME),
    # 0 is both MySQL DECIMAL and "unspecified"; TiDB sends NEWDECIMAL (246). A value under 0 is
    # read (and written) as decimal text so it is never lost.
    ((0, 246), _K_DECIMAL),
    ((245, 0xE1), _K_TEXT),
):
    for _code in _codes:
        _KIND[_code] = _kind
del _codes, _kind, _code

_F64: Final = struct.Struct("<d")
_unpack_f64 = _F64.unpack_from
_pack_f64 = _F64.pack


def _wrap_i64(x: int) -> int:
    """x as Go's int64 arithmetic leaves it (two's complement wraparound)."""
    return ((x - _I64_MIN) & _U64) + _I64_MIN
