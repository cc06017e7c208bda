"""Open Protocol encoder: events -> (key, value) messages as the reference writes them (tiflow
open-protocol encoder + Go encoding/json), batched as it batches."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Final

from replicator.codec import values
from replicator.codec.large import ClaimCheckWriter, compress, handle_key_columns
from replicator.codec.limits import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_MESSAGE_BYTES
from replicator.codec.open_protocol.common import (
    _BINARY,
    _BLOB_CODES,
    _DDL,
    _HANDLE_KEY,
    _INT64_LIMIT,
    _INT64_MIN,
    _RESOLVED,
    _ROW,
    _STRING_CODES,
    _U64,
    _UINT64_LIMIT,
    _UNSIGNED,
    _VERSION_HEAD,
    MAX_RECORD_OVERHEAD,
    MessageTooLargeError,
)
from replicator.codec.open_protocol.golang import (
    _json_string,
    go_float_text,
    go_quote,
)
from replicator.events import (
    Column,
    DdlEvent,
    Event,
    Op,
    Resolved,
    RowChange,
    TypeCode,
)

__all__ = ["encode_ddl", "encode_events", "encode_resolved", "encode_rows"]


def _check_int(value: object, low: int, limit: int, col: Column) -> str:
    if type(value) is not int or not low <= value < limit:
        raise TypeError(f"column {col.name!r} (type {col.type_code}) value {value!r} is not an integer in range")
    return str(value)


def _as_raw(value: object, col: Column) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    raise TypeError(f"column {col.name!r} (type {col.type_code}) value {value!r} is not bytes or str")


def _value_json(col: Column, tz: dt.tzinfo) -> str:
    """JSON text of a column value as the reference writes it (FromRowChangeColumn + encoding/json)."""
    v = col.value
    t = col.type_code
    if v is None:
        return "null"
    if t in _SIGNED_OR_UNSIGNED:
        if col.flags & _UNSIGNED:
            return _check_int(v, 0, _UINT64_LIMIT, col)
        return _check_int(v, _INT64_MIN, _INT64_LIMIT, col)
    if t in _UNSIGNED_CODES:
        return _check_int(v, 0, _UINT64_LIMIT, col)
    if t in _STRING_CODES:
        if col.flags & _BINARY:
            return _json_string(go_quote(_as_raw(v, col)))
        if isinstance(v, str):
            return _json_string(v)
        return _json_string(_as_raw(v, col).decode("utf-8", "surrogateescape"))
    if t in _BLOB_CODES:
        return '"' + base64.b64encode(_as_raw(v, col)).decode("ascii") + '"'
    if t == TypeCode.DOUBLE or t == TypeCode.FLOAT:
        if type(v) is not float and type(v) is not int:
            raise TypeError(f"column {col.name!r} (type {t}) value {v!r} is not a float")
        return go_float_text(float(v), 32 if t == TypeCode.FLOAT else 64)
    if isinstance(v, str) and t in _TEXT_CODES:  # dates, times, decimals, JSON, vectors as given
        return _json_string(v)
    if t in _DECIMAL_CODES and isinstance(v, Decimal) and v.is_finite():
        return '"' + values.format_decimal(v) + '"'
    if t in _DECIMAL_CODES and type(v) is int:
        return f'"{v}"'
    if isinstance(v, dt.datetime) and t in (TypeCode.TIMESTAMP, TypeCode.DATETIME):
        return '"' + values.format_datetime(v, tz if t == TypeCode.TIMESTAMP else None) + '"'
    if isinstance(v, dt.date) and t in _DATE_CODES:
        return '"' + values.format_date(v) + '"'
    raise TypeError(f"column {col.name!r}: cannot encode {type(v).__name__} value {v!r} as type code {t}")


_SIGNED_OR_UNSIGNED: Final = frozenset(
    int(c) for c in (TypeCode.TINY, TypeCode.SHORT, TypeCode.LONG, TypeCode.LONGLONG, TypeCode.INT24, TypeCode.YEAR)
)
_UNSIGNED_CODES: Final = frozenset(int(c) for c in (TypeCode.BIT, TypeCode.ENUM, TypeCode.SET))
_DECIMAL_CODES: Final = frozenset((int(TypeCode.DECIMAL), int(TypeCode.NEWDECIMAL)))
_DATE_CODES: Final = frozenset((int(TypeCode.DATE), int(TypeCode.NEWDATE)))
_TEXT_CODES: Final = frozenset(
    int(c)
    for c in (
        TypeCode.DECIMAL,
        TypeCode.NEWDECIMAL,
        TypeCode.TIMESTAMP,
        TypeCode.DATE,
        TypeCode.NEWDATE,
        TypeCode.DATETIME,
        TypeCode.TIME,
        TypeCode.JSON,
        TypeCode.VECTOR,
    )
)


def _image_json(columns: Sequence[Column], tz: dt.tzinfo) -> str:
    """A Go map[string]Column: names sorted byte-wise (code point order is UTF-8 byte order)."""
    by_name = {col.name: col for col in columns}
    if len(by_name) != len(columns):
        raise ValueError("duplicate column names in one row image")
    parts = []
    for name in sorted(by_name):
        col = by_name[name]
        if not 0 <= col.type_code <= 255 or not 0 <= col.flags < _UINT64_LIMIT:
            raise ValueError(f"column {name!r}: type code or flags out of range")
        handle = ',"h":true' if col.flags & _HANDLE_KEY else ""
        parts.append(f'{_json_string(name)}:{{"t":{col.type_code}{handle},"f":{col.flags},"v":{_value_json(col, tz)}}}')
    return "{" + ",".join(parts) + "}"


def _key_json(
    ts: int,
    schema: str,
    table: str,
    kind: int,
    *,
    row_id: int | None = None,
    partition: int | None = None,
    only_handle_key: bool = False,
    claim_check: str | None = None,
) -> bytes:
    if not 0 <= ts < _UINT64_LIMIT:
        raise ValueError(f"commit ts {ts} is not a uint64")
    out = f'{{"ts":{ts}'
    if schema:
        out += ',"scm":' + _json_string(schema)
    if table:
        out += ',"tbl":' + _json_string(table)
    if row_id:
        out += f',"rid":{row_id}'
    if partition is not None:
        out += f',"ptn":{partition}'
    out += f',"t":{kind}'
    if only_handle_key:
        out += ',"ohk":true'
    if claim_check:
        out += ',"ccl":' + _json_string(claim_check)
    return (out + "}").encode("utf-8")


def _row_key(row: RowChange) -> bytes:
    return _key_json(
        row.commit_ts,
        row.schema,
        row.table,
        _ROW,
        row_id=row.row_id,
        partition=row.partition_id,
        only_handle_key=row.only_handle_key,
        claim_check=row.claim_check,
    )


def _row_value(row: RowChange, tz: dt.tzinfo) -> bytes:
    if row.op is Op.DELETE:
        if not row.old_columns:
            raise ValueError("a delete needs old_columns")
        return ('{"d":' + _image_json(row.old_columns, tz) + "}").encode("utf-8")
    if not row.columns:
        raise ValueError(f"an {row.op.value} needs columns")
    text = '{"u":' + _image_json(row.columns, tz)
    if row.op is Op.UPDATE and row.old_columns:  # without old values an update reads as an insert
        text += ',"p":' + _image_json(row.old_columns, tz)
    return (text + "}").encode("utf-8")


def _frame(data: bytes) -> bytes:
    return _U64.pack(len(data)) + data


def encode_rows(
    rows: Sequence[RowChange],
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    timezone: dt.tzinfo = dt.UTC,
    compression: str = "none",
    claim_check: ClaimCheckWriter | None = None,
) -> list[tuple[bytes, bytes]]:
    """Row events of ONE Kafka partition -> (key, value) messages, batched as the reference does.

    TiCDC's large-message handling (codec/large.py): `compression` compresses every row value;
    with `claim_check`, a row too large for one message goes to `claim_check(key, value)` as a
    message of its own (which stores it and returns its location) and the batch gets a reference
    instead: `ccl` = that location in the key, only the handle-key columns in the value.

    A new message starts when there is none yet, when it already holds `max_batch_size` rows, or
    when `len(msg.key) + len(msg.value) + 36 + len(key) + len(value) + 16 > max_message_bytes`.
    A row that alone exceeds the limit raises `MessageTooLargeError`. TIMESTAMP values are
    written in `timezone` (the upstream zone).
    """
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, not {max_batch_size}")
    if max_message_bytes < 1:
        raise ValueError(f"max_message_bytes must be >= 1, not {max_message_bytes}")
    messages: list[tuple[bytearray, bytearray]] = []
    in_batch = 0
    for row in rows:
        key = _row_key(row)
        value = compress(compression, _row_value(row, timezone))
        size = len(key) + len(value)
        if size + MAX_RECORD_OVERHEAD + 16 + 8 > max_message_bytes and claim_check is not None:
            location = claim_check(_VERSION_HEAD + _frame(key), _frame(value))
            ref = dataclasses.replace(row, claim_check=location, only_handle_key=False,
                                      columns=handle_key_columns(row.columns),
                                      old_columns=handle_key_columns(row.old_columns))
            key, value = _row_key(ref), compress(compression, _row_value(ref, timezone))
            size = len(key) + len(value)
        if size + MAX_RECORD_OVERHEAD + 16 + 8 > max_message_bytes:
            raise MessageTooLargeError(
                f"row of {row.schema}.{row.table} at ts {row.commit_ts} encodes to {size} bytes, "
                f"more than max-message-bytes {max_message_bytes} allows"
            )
        if (
            not messages
            or in_batch >= max_batch_size
            or len(messages[-1][0]) + len(messages[-1][1]) + MAX_RECORD_OVERHEAD + size + 16 > max_message_bytes
        ):
            messages.append((bytearray(_VERSION_HEAD), bytearray()))
            in_batch = 0
        msg_key, msg_value = messages[-1]
        msg_key += _U64.pack(len(key))
        msg_key += key
        msg_value += _U64.pack(len(value))
        msg_value += value
        in_batch += 1
    return [(bytes(k), bytes(v)) for k, v in messages]


def encode_ddl(ddl: DdlEvent, *, compression: str = "none") -> tuple[bytes, bytes]:
    """One DDL event -> its own (key, value) message (the reference never batches DDL); its value
    compressed as TiCDC's large-message-handle-compression does."""
    if not 0 <= ddl.ddl_type <= 255:
        raise ValueError(f"DDL type {ddl.ddl_type} is not a TiDB action type 0..255")
    key = _key_json(ddl.commit_ts, ddl.schema, ddl.table, _DDL)
    value = f'{{"q":{_json_string(ddl.query)},"t":{ddl.ddl_type}}}'.encode()
    return _VERSION_HEAD + _frame(key), _frame(compress(compression, value))


def encode_resolved(ts: int | Resolved) -> tuple[bytes, bytes]:
    """A resolved ts -> its own message; the value is one empty entry (8 zero bytes)."""
    resolved_ts = ts.ts if isinstance(ts, Resolved) else ts
    return _VERSION_HEAD + _frame(_key_json(resolved_ts, "", "", _RESOLVED)), _frame(b"")


def encode_events(
    events: Iterable[Event],
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    timezone: dt.tzinfo = dt.UTC,
) -> list[tuple[bytes, bytes]]:
    """Events of one partition in order -> messages: consecutive rows batched (`encode_rows`),
    each DDL / resolved event alone. Convenience for tests and fake producers."""
    out: list[tuple[bytes, bytes]] = []
    pending: list[RowChange] = []

    def flush() -> None:
        if pending:
            out.extend(
                encode_rows(
                    pending,
                    max_batch_size=max_batch_size,
                    max_message_bytes=max_message_bytes,
                    timezone=timezone,
                )
            )
            pending.clear()

    for event in events:
        if isinstance(event, RowChange):
            pending.append(event)
            continue
        flush()
        out.append(encode_ddl(event) if isinstance(event, DdlEvent) else encode_resolved(event))
    flush()
    return out
