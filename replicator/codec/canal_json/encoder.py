"""canal-json encoder: events -> Kafka message values as TiCDC writes them with
enable-tidb-extension=true (tiflow `canal_json_row_event_encoder.go`): one event per message, no key."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal

from replicator.codec import values
from replicator.codec.canal_json.common import (
    BLOB_CODES,
    INT64_LIMIT,
    INT64_MIN,
    INT_CODES,
    STRING_CODES,
    UINT64_LIMIT,
    UINT_CODES,
    WATERMARK_TYPE,
    java_sql_type,
    mysql_type,
)
from replicator.codec.large import ClaimCheckWriter, compress, one_message_value
from replicator.codec.limits import DEFAULT_MAX_MESSAGE_BYTES
from replicator.codec.open_protocol.golang import _digits, _json_string, _layout, go_float_text
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
from replicator.mysql.classify import canal_event_type

__all__ = ["encode_ddl", "encode_resolved", "encode_row", "encode_rows"]


def _float_text(value: float, bits: int) -> str:
    """Go `strconv.FormatFloat(v, 'f', -1, bits)`: the shortest round-trip digits, never an exponent."""
    text = go_float_text(value, bits)
    negative = text.startswith("-")
    digits, point = _digits(text.lstrip("-"))
    if digits == "0":
        return "-0" if negative else "0"
    return _layout(negative, digits, point, False)


def _int_text(value: object, low: int, limit: int, col: Column) -> str:
    if type(value) is not int or not low <= value < limit:
        raise TypeError(f"column {col.name!r} (type {col.type_code}) value {value!r} is not an integer in range")
    return str(value)


def _value_text(col: Column, tz: dt.tzinfo) -> str:
    """A column value as canal's string (tiflow `formatValue` over the mounted Go value)."""
    v, t = col.value, col.type_code
    if t in INT_CODES:
        if col.flags & Flag.UNSIGNED or t == TypeCode.YEAR:  # canal-json's YEAR reads back unsigned
            return _int_text(v, 0, UINT64_LIMIT, col)
        return _int_text(v, INT64_MIN, INT64_LIMIT, col)
    if t in UINT_CODES:
        return _int_text(v, 0, UINT64_LIMIT, col)
    if t in STRING_CODES or t in BLOB_CODES:
        raw = v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise TypeError(f"column {col.name!r} (type {t}) value {v!r} is not bytes or str")
        if col.flags & Flag.BINARY:
            return bytes(raw).decode("latin-1")  # each byte as U+0000..U+00FF
        if isinstance(v, str):
            return v
        return bytes(raw).decode("utf-8", "replace")  # Go's JSON writer turns invalid UTF-8 into U+FFFD
    if t == TypeCode.FLOAT or t == TypeCode.DOUBLE:
        if type(v) is not float and type(v) is not int:
            raise TypeError(f"column {col.name!r} (type {t}) value {v!r} is not a float")
        return _float_text(float(v), 32 if t == TypeCode.FLOAT else 64)
    if isinstance(v, str):  # dates, times, decimals, JSON, vectors as given
        return v
    if t in (TypeCode.DECIMAL, TypeCode.NEWDECIMAL):
        if isinstance(v, Decimal) and v.is_finite():
            return values.format_decimal(v)
        if type(v) is int:
            return str(v)
    if isinstance(v, dt.datetime) and t in (TypeCode.TIMESTAMP, TypeCode.DATETIME):
        return values.format_datetime(v, tz if t == TypeCode.TIMESTAMP else None)
    if isinstance(v, dt.date) and not isinstance(v, dt.datetime) and t in (TypeCode.DATE, TypeCode.NEWDATE):
        return values.format_date(v)
    raise TypeError(f"column {col.name!r}: cannot encode {type(v).__name__} value {v!r} as type code {t}")


def _image(columns: Sequence[Column], tz: dt.tzinfo, keys_only: bool) -> str:
    parts = []
    seen: set[str] = set()
    for col in columns:
        if col.name in seen:
            raise ValueError(f"duplicate column {col.name!r} in one row image")
        seen.add(col.name)
        if keys_only and not col.is_handle_key:
            continue
        text = "null" if col.value is None else _json_string(_value_text(col, tz))
        parts.append(f"{_json_string(col.name)}:{text}")
    return "[{" + ",".join(parts) + "}]"


def _head(event_type: str, ts: int, schema: str, table: str, pk_names: str, is_ddl: bool, sql: str) -> str:
    ms = ts >> 18  # es: the commit's physical time; ts (TiCDC's build time) the same, for determinism
    return (f'{{"id":0,"database":{_json_string(schema)},"table":{_json_string(table)},"pkNames":{pk_names},'
            f'"isDdl":{"true" if is_ddl else "false"},"type":"{event_type}","es":{ms},"ts":{ms},'
            f'"sql":{_json_string(sql)}')


def encode_row(
    row: RowChange,
    *,
    timezone: dt.tzinfo = dt.UTC,
    only_output_updated_columns: bool = False,
    delete_only_handle_key_columns: bool = False,
) -> bytes:
    """One row event -> its message value (TiCDC `newJSONMessageForDML`).

    `only_output_updated_columns` / `delete_only_handle_key_columns` are TiCDC's options of those
    names: `old` with only the changed columns, a DELETE with only the handle-key columns.
    """
    if not 0 <= row.commit_ts < UINT64_LIMIT:
        raise ValueError(f"commit ts {row.commit_ts} is not a uint64")
    if row.op is Op.DELETE:
        if not row.old_columns:
            raise ValueError("a delete needs old_columns")
        image = row.old_columns
        kind = "DELETE"
    else:
        if not row.columns:
            raise ValueError(f"an {row.op.value} needs columns")
        image = row.columns
        kind = "UPDATE" if row.op is Op.UPDATE and row.old_columns else "INSERT"
    keys_only = row.op is Op.DELETE and delete_only_handle_key_columns
    pk = [c.name for c in image if c.flags & Flag.PRIMARY_KEY]
    shown = [c for c in image if not keys_only or c.is_handle_key]
    sql_types = ",".join(f"{_json_string(c.name)}:{java_sql_type(c.type_code, c.flags, c.value)}" for c in shown)
    mysql_types = ",".join(f"{_json_string(c.name)}:{_json_string(mysql_type(c.type_code, c.flags))}" for c in shown)
    out = _head(kind, row.commit_ts, row.schema, row.table, "[" + ",".join(map(_json_string, pk)) + "]", False, "")
    out += f',"sqlType":{"{" + sql_types + "}" if shown else "null"},"mysqlType":{{{mysql_types}}}'
    if kind == "UPDATE":
        old: Sequence[Column] = row.old_columns
        if only_output_updated_columns:
            new = {c.name: c for c in row.columns}
            old = [c for c in old if not (c.name in new and new[c.name].type_code == c.type_code
                                          and _same(new[c.name].value, c.value))]
        out += ',"old":' + _image(old, timezone, False)
    else:
        out += ',"old":null'
    out += ',"data":' + _image(image, timezone, keys_only)
    out += f',"_tidb":{{"commitTs":{row.commit_ts}'
    if row.only_handle_key:
        out += ',"onlyHandleKey":true'
    if row.claim_check:
        out += ',"claimCheckLocation":' + _json_string(row.claim_check)
    return (out + "}}").encode("utf-8")


def _same(a: object, b: object) -> bool:
    return type(a) is type(b) and a == b


def encode_rows(
    rows: Sequence[RowChange],
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    timezone: dt.tzinfo = dt.UTC,
    only_output_updated_columns: bool = False,
    delete_only_handle_key_columns: bool = False,
    compression: str = "none",
    claim_check: ClaimCheckWriter | None = None,
) -> list[bytes]:
    """Row events -> one message value each (canal-json never batches).

    TiCDC's large-message handling (codec/large.py): every value compressed with `compression`;
    with `claim_check`, a row whose value exceeds `max_message_bytes` is stored through it and sent
    as a reference (its handle-key columns and `_tidb.claimCheckLocation`). Without it such a row
    raises `MessageTooLargeError`, as the reference does without large-message handling."""

    def encode(row: RowChange) -> bytes:
        return encode_row(row, timezone=timezone, only_output_updated_columns=only_output_updated_columns,
                          delete_only_handle_key_columns=delete_only_handle_key_columns)

    return [one_message_value(row, encode, compression=compression, max_message_bytes=max_message_bytes,
                              claim_check=claim_check) for row in rows]


def _tail(extension: str) -> str:
    return f',"sqlType":null,"mysqlType":null,"data":null,"old":null,"_tidb":{{{extension}}}}}'


def encode_ddl(ddl: DdlEvent, *, compression: str = "none") -> bytes:
    """A DDL event -> its message value (compressed as TiCDC's large-message-handle-compression
    does); `type` is canal's event type for the DDL's code."""
    if not 0 <= ddl.commit_ts < UINT64_LIMIT:
        raise ValueError(f"commit ts {ddl.commit_ts} is not a uint64")
    head = _head(canal_event_type(ddl.ddl_type), ddl.commit_ts, ddl.schema, ddl.table, "null", True, ddl.query)
    # Always written (Go's omitempty would leave out a zero, which no real commit ts is): the decoder
    # refuses a DDL without one rather than read it as ts 0.
    return compress(compression, (head + _tail(f'"commitTs":{ddl.commit_ts}')).encode("utf-8"))


def encode_resolved(ts: int | Resolved, *, compression: str = "none") -> bytes:
    """A resolved ts -> a WATERMARK message value (compressed too, as TiCDC does)."""
    value = ts.ts if isinstance(ts, Resolved) else ts
    if not 0 <= value < UINT64_LIMIT:
        raise ValueError(f"watermark {value} is not a uint64")
    head = _head(WATERMARK_TYPE, value, "", "", "null", False, "")
    return compress(compression, (head + _tail(f'"watermarkTs":{value}' if value else "")).encode("utf-8"))
