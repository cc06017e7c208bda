"""Craft encoder: events -> message values byte for byte as the reference Go encoder writes them,
batched as it batches (flush after a row once the size estimate exceeds max-message-bytes or the
batch holds max-batch-size rows)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Final

from replicator.codec import values as _values
from replicator.codec.craft.common import (
    _DDL,
    _F64,
    _GROUP_NEW,
    _GROUP_OLD,
    _I64_MAX,
    _I64_MIN,
    _K_DATE,
    _K_DATETIME,
    _K_DECIMAL,
    _K_FLOAT,
    _K_INT,
    _K_NULL,
    _K_STR,
    _K_TIMESTAMP,
    _K_UVAR,
    _K_YEAR,
    _KIND,
    _RESOLVED,
    _ROW,
    _U64,
    _UNSIGNED,
    VERSION,
    _wrap_i64,
)
from replicator.codec.limits import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_MESSAGE_BYTES
from replicator.errors import ConfigError
from replicator.events import DdlEvent, Event, Resolved, RowChange, Value

__all__ = [
    "encode",
    "encode_ddl",
    "encode_resolved",
    "encode_rows",
    "format_datetime",
    "put_delta_uvarint_chunk",
    "put_delta_varint_chunk",
    "put_nullable_bytes_chunk",
    "put_reversed_uvarint",
    "put_size_tables",
    "put_string_chunk",
    "put_uvarint",
    "put_uvarint_list",
    "zigzag",
]

_pack_f64 = _F64.pack


def put_uvarint(out: bytearray, v: int) -> None:
    """Append v as a LEB128 uvarint (Go's binary.PutUvarint)."""
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def put_uvarint_list(out: bytearray, values: list[int]) -> None:
    """A uvarint chunk; all-small chunks (the usual case) are copied in one C call."""
    if max(values) < 0x80:
        out += bytes(values)
        return
    for v in values:
        if v < 0x80:
            out.append(v)
        else:
            put_uvarint(out, v)


def put_string_chunk(out: bytearray, items: list[bytes]) -> None:
    """All lengths as uvarints, then all payloads."""
    put_uvarint_list(out, [len(b) for b in items])
    out += b"".join(items)


def put_nullable_bytes_chunk(out: bytearray, items: list[bytes | None]) -> None:
    """All lengths as zigzag varints (-1 = NULL), then the non-null payloads."""
    put_uvarint_list(out, [1 if b is None else len(b) << 1 for b in items])
    out += b"".join([b for b in items if b is not None])


_SMALL_UVARINTS: Final = [bytes((i,)) for i in range(0x80)]


def _uvarint_bytes(v: int) -> bytes:
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    put_uvarint(out, v)
    return bytes(out)


def zigzag(v: int) -> int:
    """Go's PutVarint mapping: 0, -1, 1, -2, ... -> 0, 1, 2, 3, ..."""
    return v << 1 if v >= 0 else ((-v) << 1) - 1


def put_delta_varint_chunk(out: bytearray, data: Sequence[int]) -> None:
    """First value, then differences (int64, wrapping like Go), all zigzag varints."""
    zigzags: list[int] = []
    last = 0
    for v in data:
        d = v - last
        if not _I64_MIN <= d <= _I64_MAX:
            d = _wrap_i64(d)
        zigzags.append(d << 1 if d >= 0 else ((-d) << 1) - 1)
        last = v
    if not zigzags:  # the reference indexes data[0]: an empty chunk cannot be written
        raise ValueError("empty delta chunk")
    put_uvarint_list(out, zigzags)


def put_delta_uvarint_chunk(out: bytearray, data: Sequence[int]) -> None:
    """First value, then differences (uint64, wrapping like Go), all uvarints."""
    last = data[0]
    put_uvarint(out, last)
    for v in data[1:]:
        put_uvarint(out, (v - last) & _U64)
        last = v


def put_reversed_uvarint(out: bytearray, v: int) -> None:
    """Append v as a uvarint stored back to front (the trailing size-tables length)."""
    tmp = bytearray()
    put_uvarint(tmp, v)
    tmp.reverse()
    out += tmp


def put_size_tables(out: bytearray, tables: Sequence[Sequence[int]]) -> None:
    """Each table as count + delta varint chunk, then the region's length as a reversed uvarint."""
    start = len(out)
    for table in tables:
        put_uvarint(out, len(table))
        put_delta_varint_chunk(out, table)
    put_reversed_uvarint(out, len(out) - start)


def _check_u64(v: object, what: str) -> int:
    if not isinstance(v, int):
        raise TypeError(f"{what} must be an int, not {v!r}")
    if not 0 <= v <= _U64:
        raise ValueError(f"{what} must be in 0..2**64-1, not {v}")
    return v


def _check_i64(v: object, what: str) -> int:
    if not isinstance(v, int):
        raise TypeError(f"{what} must be an int, not {v!r}")
    if not _I64_MIN <= v <= _I64_MAX:
        raise ValueError(f"{what} must be in -2**63..2**63-1, not {v}")
    return v


def format_datetime(value: dt.datetime, tz: dt.tzinfo | None) -> str:
    """`values.format_datetime` via C-level isoformat (tested equal): naive wall-clock text,
    aware values first converted to `tz`, fraction without trailing zeros."""
    if value.tzinfo is None:
        text = value.isoformat(" ")
    else:
        if tz is not None and value.tzinfo is not tz:
            value = value.astimezone(tz)
        text = value.date().isoformat() + " " + value.time().isoformat()  # time(): no offset
    if value.microsecond:
        return text[:26].rstrip("0")
    return text[:19]


def _encode_value(t: int, flags: int, value: Value, tz: dt.tzinfo) -> bytes | None:
    """The reference's EncodeTiDBType over this project's Python values; None = SQL NULL.

    Accepts the same Python values as the Open Protocol encoder: text types also take their
    TiDB text as a str, binary types bytes or str (surrogateescape), DECIMAL a finite Decimal or int.
    """
    if value is None:
        return None
    kind = _KIND[t]
    if kind == _K_STR:
        if isinstance(value, str):
            return value.encode("utf-8", "surrogateescape")
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
    elif kind == _K_INT:
        if isinstance(value, int):
            if flags & _UNSIGNED:
                if 0 <= value <= _U64:
                    return _SMALL_UVARINTS[value] if value < 0x80 else _uvarint_bytes(value)
            elif _I64_MIN <= value <= _I64_MAX:
                u = value << 1 if value >= 0 else ((-value) << 1) - 1
                return _SMALL_UVARINTS[u] if u < 0x80 else _uvarint_bytes(u)
            raise ValueError(f"integer {value} out of range for column type {t} (flags {flags})")
    elif kind == _K_YEAR:
        return _uvarint_bytes(zigzag(_check_i64(value, "YEAR")))
    elif kind == _K_UVAR:
        return _uvarint_bytes(_check_u64(value, f"BIT/ENUM/SET (type {t})"))
    elif kind == _K_FLOAT:
        if isinstance(value, float | int) and not isinstance(value, bool):
            return _pack_f64(float(value))
    elif kind == _K_NULL:  # NULL, GEOMETRY, unknown codes: the reference writes NULL whatever the value
        return None
    elif isinstance(value, str):  # dates, times, decimals, JSON, vectors as their text
        return value.encode()
    elif kind in (_K_DATETIME, _K_TIMESTAMP):
        if isinstance(value, dt.datetime):
            return format_datetime(value, tz if kind == _K_TIMESTAMP else None).encode()
    elif kind == _K_DATE:
        if isinstance(value, dt.date):
            return dt.date.isoformat(value).encode()  # = values.format_date, datetimes too
    elif kind == _K_DECIMAL:
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError(f"DECIMAL value {value} is not finite")
            return _values.format_decimal(value).encode()
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value).encode()
    raise TypeError(f"value {value!r} of type {type(value).__name__} does not fit column type {t}")


# A row ready to be written: header fields, estimated size, and its column groups
# (group type, names, type codes, flags, encoded values).
_Group = tuple[int, list[str], list[int], list[int], list[bytes | None]]
_Prepared = tuple[int, int, str, str, list[_Group]]


def _prepare_row(row: RowChange, tz: dt.tzinfo) -> tuple[_Prepared, int]:
    """Encode the values of one row and compute the reference's size estimate for it."""
    commit_ts = _check_u64(row.commit_ts, "commit_ts")
    partition = -1 if row.partition_id is None else _check_i64(row.partition_id, "partition_id")
    estimate = 32 + len(row.schema.encode()) + len(row.table.encode())
    groups: list[_Group] = []
    for gtype, columns in ((_GROUP_NEW, row.columns), (_GROUP_OLD, row.old_columns)):
        if not columns:
            continue
        names: list[str] = []
        types: list[int] = []
        flags: list[int] = []
        encoded: list[bytes | None] = []
        for col in columns:
            name, t, f = col.name, col.type_code, col.flags
            if not isinstance(t, int) or not 0 <= t <= 0xFF:
                raise ValueError(f"column {name!r}: type code {t!r} is not a MySQL type")
            if not isinstance(f, int) or not 0 <= f <= _U64:
                raise ValueError(f"column {name!r}: flags {f!r} are not a uint64")
            value = None if col.value is None else _encode_value(t, f, col.value, tz)
            names.append(name)
            types.append(t)
            flags.append(f)
            encoded.append(value)
            estimate += len(name.encode()) + (0 if value is None else len(value)) + 16
        groups.append((gtype, names, types, flags, encoded))
    if not groups:
        # The reference cannot encode a row without columns either (it panics).
        raise ValueError(f"row change on {row.schema}.{row.table} at {row.commit_ts} has no columns")
    return (commit_ts, partition, row.schema, row.table, groups), estimate


def _finish(out: bytearray, terms: dict[str, int], header_size: int, tables: list[list[int]]) -> bytes:
    """Append term dictionary and size tables; `tables` = [body sizes, group sizes...]."""
    dict_at = len(out)
    if terms:
        put_uvarint(out, len(terms))
        put_string_chunk(out, [t.encode() for t in terms])
    put_size_tables(out, [[header_size, len(out) - dict_at], *tables])
    return bytes(out)


def _encode_headers(
    out: bytearray,
    terms: dict[str, int],
    tss: list[int],
    kinds: list[int],
    partitions: list[int],
    schemas: list[str],
    tables: list[str],
) -> int:
    start = len(out)
    # Empty names are written as null (-1); ids are assigned in first-use order.
    add = terms.setdefault  # id = first-use order: len(terms) is evaluated before inserting
    schema_ids = [add(s, len(terms)) if s else -1 for s in schemas]
    table_ids = [add(s, len(terms)) if s else -1 for s in tables]
    if len(tss) == 1:  # single-element delta chunks are just the values
        put_uvarint(out, tss[0])
        put_uvarint(out, kinds[0])
        for v in (partitions[0], schema_ids[0], table_ids[0]):
            put_uvarint(out, v << 1 if v >= 0 else ((-v) << 1) - 1)
    else:
        put_delta_uvarint_chunk(out, tss)
        put_uvarint_list(out, kinds)
        put_delta_varint_chunk(out, partitions)
        put_delta_varint_chunk(out, schema_ids)
        put_delta_varint_chunk(out, table_ids)
    return len(out) - start


def _encode_batch(batch: list[_Prepared]) -> bytes:
    out = bytearray((VERSION,))
    terms: dict[str, int] = {}
    header_size = _encode_headers(
        out,
        terms,
        [r[0] for r in batch],
        [_ROW] * len(batch),
        [r[1] for r in batch],
        [r[2] for r in batch],
        [r[3] for r in batch],
    )
    body_sizes: list[int] = []
    group_tables: list[list[int]] = []
    add = terms.setdefault
    for _, _, _, _, groups in batch:
        body_at = len(out)
        sizes: list[int] = []
        for gtype, names, types, flags, encoded in groups:
            group_at = len(out)
            out.append(gtype)
            put_uvarint(out, len(names))
            put_delta_varint_chunk(out, [add(name, len(terms)) for name in names])
            put_uvarint_list(out, types)
            put_uvarint_list(out, flags)
            put_nullable_bytes_chunk(out, encoded)
            sizes.append(len(out) - group_at)
        group_tables.append(sizes)
        body_sizes.append(len(out) - body_at)
    return _finish(out, terms, header_size, [body_sizes, *group_tables])


def _check_limits(max_batch_size: int, max_message_bytes: int) -> None:
    if not 1 <= max_batch_size <= 65535:
        raise ConfigError(f"max-batch-size must be in 1..65535, not {max_batch_size}")
    if not 1 <= max_message_bytes <= (1 << 31) - 1:
        raise ConfigError(f"max-message-bytes must be in 1..2147483647, not {max_message_bytes}")


class _RowBatcher:
    """The reference batching: flush after a row when estimate > max bytes or rows >= max rows."""

    def __init__(self, max_batch_size: int, max_message_bytes: int, tz: dt.tzinfo) -> None:
        _check_limits(max_batch_size, max_message_bytes)
        self.max_rows = max_batch_size
        self.max_bytes = max_message_bytes
        self.tz = tz
        self.pending: list[_Prepared] = []
        self.estimate = 0

    def add(self, row: RowChange, out: list[bytes]) -> None:
        prepared, size = _prepare_row(row, self.tz)
        self.pending.append(prepared)
        self.estimate += size
        if self.estimate > self.max_bytes or len(self.pending) >= self.max_rows:
            self.flush(out)

    def flush(self, out: list[bytes]) -> None:
        if self.pending:
            out.append(_encode_batch(self.pending))
            self.pending = []
            self.estimate = 0


def encode_rows(
    rows: Iterable[RowChange],
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    timezone: dt.tzinfo = dt.UTC,
) -> list[bytes]:
    """Craft message values for the rows of ONE Kafka partition, batched as the reference does.

    `timezone` is the upstream zone TIMESTAMP text is written in (aware values are converted).
    The new image goes in group 1, the old image in group 2; an update without an old image is
    indistinguishable from an insert on the wire (as in Open Protocol).
    """
    batcher = _RowBatcher(max_batch_size, max_message_bytes, timezone)
    out: list[bytes] = []
    for row in rows:
        batcher.add(row, out)
    batcher.flush(out)
    return out


def encode_ddl(ddl: DdlEvent) -> bytes:
    """A DDL event is always a message of its own (broadcast to every partition upstream)."""
    out = bytearray((VERSION,))
    terms: dict[str, int] = {}
    header_size = _encode_headers(
        out, terms, [_check_u64(ddl.commit_ts, "commit_ts")], [_DDL], [-1], [ddl.schema], [ddl.table]
    )
    body_at = len(out)
    put_uvarint(out, _check_u64(ddl.ddl_type, "ddl_type"))
    query = ddl.query.encode()
    put_uvarint(out, len(query))
    out += query
    return _finish(out, terms, header_size, [[len(out) - body_at]])


def encode_resolved(ts: int | Resolved) -> bytes:
    """A resolved-ts message: one header, an empty body, no term dictionary."""
    resolved_ts = ts.ts if isinstance(ts, Resolved) else ts
    out = bytearray((VERSION,))
    header_size = _encode_headers(out, {}, [_check_u64(resolved_ts, "resolved ts")], [_RESOLVED], [-1], [""], [""])
    return _finish(out, {}, header_size, [[0]])


def encode(
    events: Iterable[Event],
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    timezone: dt.tzinfo = dt.UTC,
) -> list[bytes]:
    """Messages for one partition's event stream: rows batched, DDL and resolved events alone.

    Pending rows are flushed before a DDL or resolved event so message order is event order.
    """
    batcher = _RowBatcher(max_batch_size, max_message_bytes, timezone)
    out: list[bytes] = []
    for event in events:
        if isinstance(event, RowChange):
            batcher.add(event, out)
            continue
        batcher.flush(out)
        if isinstance(event, DdlEvent):
            out.append(encode_ddl(event))
        else:
            out.append(encode_resolved(event))
    batcher.flush(out)
    return out
