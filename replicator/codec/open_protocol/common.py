"""Open Protocol constants and helpers both directions share: framing, event types, flag bits."""

from __future__ import annotations

import struct
from typing import Final, TypeAlias

from replicator.codec.limits import MAX_RECORD_OVERHEAD, MessageTooLargeError
from replicator.events import (
    Flag,
    TypeCode,
)

Buffer: TypeAlias = bytes | bytearray | memoryview

BATCH_VERSION: Final = 1
__all__ = ["BATCH_VERSION", "MAX_RECORD_OVERHEAD", "MessageTooLargeError"]

_ROW, _DDL, _RESOLVED = 1, 2, 3
_U64: Final = struct.Struct(">Q")
_VERSION_HEAD: Final = _U64.pack(BATCH_VERSION)
_INT64_MIN: Final = -(1 << 63)
_INT64_LIMIT: Final = 1 << 63
_UINT64_LIMIT: Final = 1 << 64
_BINARY: Final = int(Flag.BINARY)
_HANDLE_KEY: Final = int(Flag.HANDLE_KEY)
_UNSIGNED: Final = int(Flag.UNSIGNED)


def _short(text: str, limit: int = 60) -> str:
    """`text` quoted for an error message, cut at `limit` characters."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


_STRING_CODES: Final = frozenset(int(c) for c in (TypeCode.VARCHAR, TypeCode.VAR_STRING, TypeCode.STRING))
_BLOB_CODES: Final = frozenset(
    int(c) for c in (TypeCode.TINY_BLOB, TypeCode.MEDIUM_BLOB, TypeCode.LONG_BLOB, TypeCode.BLOB)
)
