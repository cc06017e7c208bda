"""Simple protocol (JSON encoding) encoder: events -> Kafka message values as TiCDC writes them
(tiflow `pkg/sink/codec/simple`: message.go, encoder.go), one event per message, no key.

What the event model does not carry is derived, deterministically (so one seed is one stream):
- the table schema from a row's columns (name, type code, flags -> mysqlType, unsigned, nullable,
  a `primary` index of the primary-key columns, else a unique NOT NULL index of the handle key);
  its `version` (TiDB's table UpdateTS upstream) is a non-zero number derived from that schema;
- a BOOTSTRAP message before the first row of each table and schema in each `encode_rows` call
  (TiCDC sends one before a table's first row, then every 120 s / 10,000 messages);
- a DDL message names its table with `database` / `table` and carries no `tableSchema` (a
  `DdlEvent` does not hold the schema after the DDL; the next rows' BOOTSTRAP does);
- `buildTs` is the commit's physical time (TiCDC's wall clock, made deterministic).
With `checksum=True` each row carries `checksum.current` / `previous` computed as TiCDC computes them.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import zlib
from collections.abc import Sequence
from typing import Any
from zoneinfo import ZoneInfo

from replicator.codec.canal_json.common import CODES
from replicator.codec.canal_json.encoder import _value_text
from replicator.codec.checksum import row_checksum
from replicator.codec.large import ClaimCheckWriter, compress, one_message_value
from replicator.codec.limits import DEFAULT_MAX_MESSAGE_BYTES
from replicator.codec.simple.common import (
    BOOTSTRAP,
    SIMPLE_DDL_TYPES,
    UINT64_LIMIT,
    VERSION,
    WATERMARK,
    ColumnSchema,
    checksum_cell,
    is_binary_type,
    simple_type_name,
)
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode

__all__ = ["encode_bootstrap", "encode_ddl", "encode_resolved", "encode_row", "encode_rows", "table_schema"]


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _build_ts(ts: int) -> int:
    return ts >> 18


def _location(tz: dt.tzinfo) -> tuple[str, dt.tzinfo]:
    if isinstance(tz, ZoneInfo):
        return tz.key, tz
    return "UTC", dt.UTC  # any other zone: the same instant written in UTC


def table_schema(schema: str, table: str, columns: Sequence[Column]) -> dict[str, Any]:
    """The `tableSchema` object TiCDC would write for a table whose rows have these columns."""
    cols = []
    for c in columns:
        data_type: dict[str, Any] = {"mysqlType": simple_type_name(c.type_code, c.flags),
                                     "charset": "binary" if c.flags & Flag.BINARY else "utf8mb4",
                                     "collate": "binary" if c.flags & Flag.BINARY else "utf8mb4_bin"}
        if c.flags & Flag.UNSIGNED and c.type_code not in (TypeCode.BIT, TypeCode.YEAR):
            data_type["unsigned"] = True
        cols.append({"name": c.name, "dataType": data_type, "nullable": bool(c.flags & Flag.NULLABLE),
                     "default": None})
    indexes = []
    primary = [c.name for c in columns if c.flags & Flag.PRIMARY_KEY]
    handle = [c.name for c in columns if c.flags & Flag.HANDLE_KEY]
    if primary:
        indexes.append({"name": "primary", "unique": True, "primary": True, "nullable": False, "columns": primary})
    elif handle:
        indexes.append({"name": "handle", "unique": True, "primary": False, "nullable": False, "columns": handle})
    keyed = primary or handle
    for c in columns:  # the other key flags, one single-column index each (nullable: never the handle)
        if c.name in keyed:
            continue
        if c.flags & (Flag.UNIQUE_KEY | Flag.MULTIPLE_KEY):
            unique = bool(c.flags & Flag.UNIQUE_KEY)
            indexes.append({"name": f"idx_{c.name}", "unique": unique, "primary": False, "nullable": True,
                            "columns": [c.name]})
    body = {"schema": schema, "table": table, "tableID": _table_id(schema, table), "columns": cols,
            "indexes": indexes}
    version = zlib.crc32(_dumps(body)) | (1 << 40)  # never 0: Go's omitempty would drop it
    return {"schema": schema, "table": table, "tableID": body["tableID"], "version": version, "columns": cols,
            "indexes": indexes}


def _table_id(schema: str, table: str) -> int:
    return (zlib.crc32(f"{schema}.{table}".encode()) & 0x3FFFFFFF) + 100


def _wire(col: Column, schema_col: ColumnSchema, tz: dt.tzinfo) -> Any:
    """A value as TiCDC's `encodeValue` writes it: a string, TIMESTAMP `{location, value}`, or null."""
    if col.value is None:
        return None
    if col.type_code == TypeCode.TIMESTAMP:
        name, zone = _location(tz)
        return {"location": name, "value": _value_text(col, zone)}
    if schema_col.binary:
        raw = col.value.encode("utf-8", "surrogateescape") if isinstance(col.value, str) else col.value
        if not isinstance(raw, bytes | bytearray | memoryview):
            raise TypeError(f"column {col.name!r} value {col.value!r} is not bytes")
        return base64.b64encode(bytes(raw)).decode("ascii")
    return _value_text(col, tz)


def _schema_columns(schema: dict[str, Any]) -> dict[str, ColumnSchema]:
    out = {}
    for c in schema["columns"]:
        t = c["dataType"]["mysqlType"]
        out[c["name"]] = ColumnSchema(c["name"], CODES[t], 0, is_binary_type(t))
    return out


def _image(columns: Sequence[Column], cols: dict[str, ColumnSchema], tz: dt.tzinfo) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in columns:
        if c.name in out:
            raise ValueError(f"duplicate column {c.name!r} in one row image")
        if c.name not in cols:
            raise ValueError(f"column {c.name!r} is not in the table's schema")
        out[c.name] = _wire(c, cols[c.name], tz)
    return out


def _crc(image: dict[str, Any], order: list[str], cols: dict[str, ColumnSchema]) -> int:
    return row_checksum((cols[n].code, checksum_cell(cols[n], image[n], dt.UTC)) for n in order if n in image)


def encode_row(row: RowChange, schema: dict[str, Any], *, timezone: dt.tzinfo = dt.UTC,
               checksum: bool = False, checksum_of: RowChange | None = None) -> bytes:
    """One row event -> its DML message value, against `schema` (`table_schema`). The checksum
    covers `checksum_of`'s images when given: a large-message reference (handle-key columns only)
    carries its full row's, as TiCDC's does."""
    if not 0 <= row.commit_ts < UINT64_LIMIT:
        raise ValueError(f"commit ts {row.commit_ts} is not a uint64")
    cols = _schema_columns(schema)
    order = [c["name"] for c in schema["columns"]]
    msg: dict[str, Any] = {"version": VERSION, "database": row.schema, "table": row.table,
                           "tableID": row.partition_id or schema["tableID"]}
    data = old = None
    if row.op is Op.DELETE:
        if not row.old_columns:
            raise ValueError("a delete needs old_columns")
        msg["type"] = "DELETE"
        old = _image(row.old_columns, cols, timezone)
    else:
        if not row.columns:
            raise ValueError(f"an {row.op.value} needs columns")
        data = _image(row.columns, cols, timezone)
        if row.op is Op.UPDATE and row.old_columns:
            msg["type"] = "UPDATE"
            old = _image(row.old_columns, cols, timezone)
        else:
            msg["type"] = "INSERT"
    msg |= {"commitTs": row.commit_ts, "buildTs": _build_ts(row.commit_ts), "schemaVersion": schema["version"]}
    if row.claim_check:
        msg["claimCheckLocation"] = row.claim_check
    if row.only_handle_key:
        msg["handleKeyOnly"] = True
    if checksum:
        full_new, full_old = data, old
        if checksum_of is not None and checksum_of is not row:
            full_new = _image(checksum_of.columns, cols, timezone) if data is not None else None
            full_old = _image(checksum_of.old_columns, cols, timezone) if old is not None else None
        msg["checksum"] = {"version": 0, "corrupted": False,
                           "current": _crc(full_new, order, cols) if full_new is not None else 0,
                           "previous": _crc(full_old, order, cols) if full_old is not None else 0}
    if data is not None:
        msg["data"] = data
    if old is not None:
        msg["old"] = old
    return _dumps(msg)


def encode_bootstrap(schema: dict[str, Any], *, compression: str = "none") -> bytes:
    """A BOOTSTRAP message value: the table's schema, commit ts 0 (compressed as TiCDC's
    large-message-handle-compression does)."""
    return compress(compression, _dumps({"version": VERSION, "type": BOOTSTRAP, "commitTs": 0, "buildTs": 0,
                                         "tableSchema": schema}))


def encode_rows(
    rows: Sequence[RowChange],
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    timezone: dt.tzinfo = dt.UTC,
    checksum: bool = False,
    compression: str = "none",
    claim_check: ClaimCheckWriter | None = None,
) -> list[bytes]:
    """Row events -> one message value each, a BOOTSTRAP before the first row of each table schema
    (see the module docstring).

    TiCDC's large-message handling (codec/large.py): every value compressed with `compression`;
    with `claim_check`, a row whose value exceeds `max_message_bytes` is stored through it and sent
    as a reference (its handle-key columns, `claimCheckLocation` and `handleKeyOnly`). Without it
    such a row raises `MessageTooLargeError`."""
    out = []
    sent: dict[tuple[str, str], int] = {}
    for row in rows:
        schema = table_schema(row.schema, row.table, row.image)
        if sent.get((row.schema, row.table)) != schema["version"]:
            out.append(encode_bootstrap(schema, compression=compression))
            sent[(row.schema, row.table)] = schema["version"]

        def encode(r: RowChange, full: RowChange = row, schema: dict[str, Any] = schema) -> bytes:
            return encode_row(r, schema, timezone=timezone, checksum=checksum, checksum_of=full)

        out.append(one_message_value(row, encode, compression=compression, max_message_bytes=max_message_bytes,
                                     claim_check=claim_check, reference_is_key_only=True))
    return out


def encode_ddl(ddl: DdlEvent, *, compression: str = "none") -> bytes:
    """A DDL event -> its message value (compressed as TiCDC does); `type` is Simple's for the
    DDL's code (others QUERY)."""
    if not 0 <= ddl.commit_ts < UINT64_LIMIT:
        raise ValueError(f"commit ts {ddl.commit_ts} is not a uint64")
    return compress(compression, _dumps({"version": VERSION, "database": ddl.schema, "table": ddl.table,
                                         "type": SIMPLE_DDL_TYPES.get(ddl.ddl_type, "QUERY"), "sql": ddl.query,
                                         "commitTs": ddl.commit_ts, "buildTs": _build_ts(ddl.commit_ts)}))


def encode_resolved(ts: int | Resolved, *, compression: str = "none") -> bytes:
    """A resolved ts -> a WATERMARK message value (compressed too, as TiCDC does)."""
    value = ts.ts if isinstance(ts, Resolved) else ts
    if not 0 <= value < UINT64_LIMIT:
        raise ValueError(f"watermark {value} is not a uint64")
    return compress(compression, _dumps({"version": VERSION, "type": WATERMARK, "commitTs": value,
                                         "buildTs": _build_ts(value)}))
