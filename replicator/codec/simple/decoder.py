"""Simple protocol (JSON encoding) decoder: one Kafka message value -> its events, exact to the wire.

See the package docstring for the format and the schema handling. Every malformed input raises
`DecodeError` (what, field, Kafka position), never anything else and never a partial result; a DML
whose schema has not arrived raises `SchemaNotArrivedError`, a row whose CRC32 differs from the
one sent with it `ChecksumError` (both `DecodeError`s).
"""

from __future__ import annotations

import datetime as dt
import re
import struct
import zoneinfo
from typing import Any, Final

from replicator.codec import values
from replicator.codec.canal_json.decoder import text_value
from replicator.codec.checksum import ChecksumError, row_checksum
from replicator.codec.jsontext import json_kind, load_object, str_field, uint64_field
from replicator.codec.large import decompress_value
from replicator.codec.simple.common import (
    BOOTSTRAP,
    DDL_TYPES,
    DML_TYPES,
    VERSION,
    WATERMARK,
    TableSchema,
    b64decode,
    checksum_cell,
    parse_table_schema,
    short,
)
from replicator.codec.state import CodecState
from replicator.codec.values import DEFAULT_DECODE_OPTIONS, DecodeOptions
from replicator.errors import DecodeError
from replicator.events import Column, DdlEvent, Event, Op, Position, Resolved, RowChange, TypeCode, Value
from replicator.mysql.classify import classify_ddl

__all__ = ["SchemaNotArrivedError", "decode", "restore_schemas"]

_INTERNAL_ERRORS: Final = (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError,
                           OverflowError, struct.error, zoneinfo.ZoneInfoNotFoundError)
_LOCATION_RE: Final = re.compile(r"[A-Za-z0-9_+\-/]{1,64}\Z", re.ASCII)


class SchemaNotArrivedError(DecodeError):
    """A DML message names a (database, table, schema version) no BOOTSTRAP or DDL of this run carried."""


def decode(
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    *,
    options: DecodeOptions | None = None,
    position: Position | None = None,
) -> list[Event]:
    """Decode one Simple message (JSON encoding; the key is not used) into its events.

    BOOTSTRAP gives no event (it fills `options.state`'s schema cache); DDL gives a `DdlEvent`
    and caches the schemas it carries; WATERMARK a `Resolved`; INSERT / UPDATE / DELETE a
    `RowChange` typed by its cached schema.
    """
    opts = options or DEFAULT_DECODE_OPTIONS
    state = opts.state if opts.state is not None else CodecState()
    try:
        data = b"" if value is None else bytes(value)
        if not data:
            raise DecodeError("Simple message value is empty, not a JSON object", offset=0, where="value")
        if opts.compression != "none":  # TiCDC compresses every value (large-message-handle-compression)
            data = decompress_value(opts.compression, data)
        try:
            return _decode(load_object(data, 0, len(data), "value"), opts, state, position)
        except DecodeError:
            raise
        except _INTERNAL_ERRORS as exc:
            raise DecodeError(f"malformed Simple message ({type(exc).__name__}: {exc})", where="value") from None
    except DecodeError as exc:
        if position is not None:
            exc.at(str(position))
        raise


def _decode(obj: dict[str, Any], opts: DecodeOptions, state: CodecState, position: Position | None) -> list[Event]:
    version = obj.get("version")
    if version != VERSION or type(version) is not int:
        raise DecodeError(f"Simple message version is {version!r}; this decoder reads version {VERSION}",
                          where="field 'version'")
    kind = str_field(obj, "type")
    if kind == WATERMARK:
        return [Resolved(uint64_field(obj, "commitTs", required=True), position=position)]
    if kind == BOOTSTRAP:
        schema = parse_table_schema(obj.get("tableSchema"), "field 'tableSchema'")
        _remember(state, schema, obj["tableSchema"])
        return []
    if kind in DDL_TYPES:
        return [_ddl(obj, state, position)]
    if kind in DML_TYPES:
        return [_dml(obj, Op(kind.lower()), opts, state, position)]
    raise DecodeError(f"message type {short(kind)} is not a Simple type "
                      f"({', '.join((WATERMARK, BOOTSTRAP, *DML_TYPES, *DDL_TYPES))})", where="field 'type'")


def _ddl(obj: dict[str, Any], state: CodecState, position: Position | None) -> DdlEvent:
    query = obj.get("sql")
    if type(query) is not str:
        raise DecodeError(f"DDL 'sql' is {json_kind(query)}, not a string", where="field 'sql'")
    commit_ts = uint64_field(obj, "commitTs", required=True)
    schemas: list[tuple[TableSchema, dict[str, Any]]] = []
    for field in ("tableSchema", "preTableSchema"):
        if obj.get(field) is not None:
            schemas.append((parse_table_schema(obj[field], f"field '{field}'"), obj[field]))
    try:
        code = classify_ddl(query)
    except DecodeError as exc:
        raise DecodeError(exc.what, where="field 'sql'") from None
    for schema, wire in schemas:
        if schema.columns:  # a schema-level DDL's may name the database only
            _remember(state, schema, wire)
    # The table the DDL is about: its schema after the DDL (a RENAME's new name), else before it,
    # else the message's own database / table.
    named = schemas[0][0] if schemas else None
    return DdlEvent(
        commit_ts=commit_ts,
        schema=named.schema if named else str_field(obj, "database"),
        table=named.table if named else str_field(obj, "table"),
        ddl_type=code,
        query=query,
        position=position,
    )


def _remember(state: CodecState, schema: TableSchema, wire: dict[str, Any]) -> None:
    key = (schema.schema, schema.table, schema.version)
    state.schemas[key] = schema
    state.schema_objects[key] = wire


def restore_schemas(state: CodecState, objects: list[dict[str, Any]]) -> None:
    """Fill a run's schema cache from the `tableSchema` objects an earlier run kept (state.json)."""
    for wire in objects:
        _remember(state, parse_table_schema(wire, "a table schema kept in state.json"), wire)


def _dml(obj: dict[str, Any], op: Op, opts: DecodeOptions, state: CodecState, position: Position | None) -> RowChange:
    database, table = str_field(obj, "database"), str_field(obj, "table")
    version = uint64_field(obj, "schemaVersion", required=False)
    commit_ts = uint64_field(obj, "commitTs", required=True)
    schema = state.schemas.get((database, table, version))
    if schema is None:
        raise SchemaNotArrivedError(
            f"the schema of {database}.{table} version {version} has not arrived: no BOOTSTRAP or DDL message "
            "carrying it was read before this row in this run (TiCDC sends a BOOTSTRAP before a table's first "
            "row and then periodically; see docs/protocols.md, Simple), so the row is not guessed",
            where="field 'schemaVersion'")
    table_id = obj.get("tableID", 0)
    if type(table_id) is not int:
        raise DecodeError(f"'tableID' is {json_kind(table_id)}, not an integer", where="field 'tableID'")
    claim = str_field(obj, "claimCheckLocation") or None
    key_only = obj.get("handleKeyOnly", False)
    if type(key_only) is not bool:
        raise DecodeError(f"'handleKeyOnly' is {json_kind(key_only)}, not a boolean", where="field 'handleKeyOnly'")
    new_raw = _image(obj, "data", op is not Op.DELETE)
    old_raw = _image(obj, "old", op is not Op.INSERT)
    new = _columns(new_raw, schema, opts, "data") if new_raw is not None else ()
    old = _columns(old_raw, schema, opts, "old") if old_raw is not None else ()
    if not claim and not key_only:
        # a large-message reference holds only the handle-key columns, its checksum the full row's:
        # the row is verified when its claim-check file is decoded (handle-key-only rows are refused)
        _verify(obj, schema, new_raw, old_raw, opts, state)
    return RowChange(
        commit_ts=commit_ts,
        schema=database,
        table=table,
        op=op,
        columns=new,
        old_columns=old,
        partition_id=table_id if table_id and schema.table_id and table_id != schema.table_id else None,
        only_handle_key=key_only,
        claim_check=claim,
        position=position,
    )


def _image(obj: dict[str, Any], field: str, required: bool) -> dict[str, Any] | None:
    image = obj.get(field)
    if image is None:
        if required:
            raise DecodeError(f"a {obj.get('type')} message needs '{field}'", where=f"field '{field}'")
        return None
    if type(image) is not dict:
        raise DecodeError(f"'{field}' is {json_kind(image)}, not an object", where=f"field '{field}'")
    return image


def _timezone(location: str, opts: DecodeOptions) -> dt.tzinfo:
    if location.lower() in ("", "local", "system"):
        return opts.timezone
    if location.upper() == "UTC":
        return dt.UTC
    if not _LOCATION_RE.match(location) or ".." in location:
        raise DecodeError(f"TIMESTAMP location {short(location)} is not a time zone name")
    try:
        return zoneinfo.ZoneInfo(location)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise DecodeError(f"TIMESTAMP location {short(location)} is not a known time zone") from None


def _columns(image: dict[str, Any], schema: TableSchema, opts: DecodeOptions, where: str) -> tuple[Column, ...]:
    for name in image:
        if schema.column(name) is None:
            raise DecodeError(f"column {short(name)} is not in {schema.schema}.{schema.table} schema version "
                              f"{schema.version}", where=f"field '{where}'")
    out: list[Column] = []
    for col in schema.columns:
        if col.name not in image:
            continue  # a generated column: TiCDC does not send its value
        raw = image[col.name]
        try:
            out.append(Column(col.name, col.code, col.flags, _column_value(raw, col.code, col.flags, col.binary, opts)))
        except DecodeError as exc:
            raise DecodeError(exc.what, where=f"field '{where}' column {short(col.name)}") from None
    return tuple(out)


def _column_value(raw: Any, code: int, flags: int, binary: bool, opts: DecodeOptions) -> Value:
    if raw is None:
        return None
    if code == TypeCode.TIMESTAMP:
        if type(raw) is not dict or type(raw.get("value")) is not str:
            raise DecodeError(f"TIMESTAMP value is {json_kind(raw)}, not {{\"location\", \"value\"}}")
        location = raw.get("location") or ""
        if type(location) is not str:
            raise DecodeError(f"TIMESTAMP location is {json_kind(location)}, not a string")
        return values.parse_timestamp(raw["value"], _timezone(location, opts), opts.zero_dates)
    if type(raw) is not str:
        raise DecodeError(f"value is {json_kind(raw)}; Simple JSON values are strings or null")
    if binary:
        return b64decode(raw)
    return text_value(raw, code, flags, opts)


def _verify(obj: dict[str, Any], schema: TableSchema, new: dict[str, Any] | None, old: dict[str, Any] | None,
            opts: DecodeOptions, state: CodecState) -> None:
    """Check the `checksum` object, when there is one: `current` against the new row, `previous`
    against the old one (0: not computed upstream, not verified); `corrupted` set upstream counts as
    a mismatch too (TiCDC's integrity check flagged the row and sent it anyway)."""
    checksum = obj.get("checksum")
    if checksum is None:
        return
    if type(checksum) is not dict:
        raise DecodeError(f"'checksum' is {json_kind(checksum)}, not an object", where="field 'checksum'")
    corrupted = checksum.get("corrupted", False)
    if type(corrupted) is not bool:
        raise DecodeError(f"'checksum.corrupted' is {json_kind(corrupted)}", where="field 'checksum.corrupted'")
    table = f"{schema.schema}.{schema.table}"
    if corrupted:
        state.checksum_mismatches += 1
        raise ChecksumError(f"TiCDC marked this row of {table} corrupted (checksum.corrupted is true)",
                            where="field 'checksum'")
    for field, image, name in (("current", new, "new"), ("previous", old, "old")):
        expected = uint64_field(checksum, field, required=False)
        if not expected or image is None:
            continue
        cells = [(c.code, checksum_cell(c, image[c.name], opts.timezone)) for c in schema.columns if c.name in image]
        actual = row_checksum(cells)
        if actual != expected:
            state.checksum_mismatches += 1
            raise ChecksumError(
                f"{name} row of {table} has CRC32 {actual}, but the message's checksum.{field} is {expected}: "
                "the row is corrupt", where=f"field 'checksum.{field}'")
        state.checksums_verified += 1
