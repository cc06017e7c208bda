"""Simple protocol facts both directions share: message types, the table schema, the checksum cells."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import struct
from dataclasses import dataclass
from typing import Any, Final

from replicator.codec.canal_json.common import BINARY_CHARSET_CODES, CODES, TEXT_NAMES, TEXTUAL_CODES
from replicator.codec.checksum import timestamp_utc_text
from replicator.codec.jsontext import json_kind
from replicator.errors import DecodeError
from replicator.events import Flag, TypeCode

VERSION: Final = 1
WATERMARK: Final = "WATERMARK"
BOOTSTRAP: Final = "BOOTSTRAP"
DML_TYPES: Final = ("INSERT", "UPDATE", "DELETE")
DDL_TYPES: Final = ("CREATE", "RENAME", "CINDEX", "DINDEX", "ERASE", "TRUNCATE", "ALTER", "QUERY")
UINT64_LIMIT: Final = 1 << 64

# TiDB action type code (replicator.mysql.classify's 36 codes) -> Simple's DDL message type
# (tiflow simple/message.go `getDDLType`); every other code is QUERY.
SIMPLE_DDL_TYPES: Final[dict[int, str]] = {
    3: "CREATE", 14: "RENAME", 7: "CINDEX", 9: "CINDEX", 32: "CINDEX", 8: "DINDEX", 10: "DINDEX", 33: "DINDEX",
    4: "ERASE", 11: "TRUNCATE", 5: "ALTER", 6: "ALTER", 12: "ALTER", 13: "ALTER", 15: "ALTER", 17: "ALTER",
    18: "ALTER", 19: "ALTER", 20: "ALTER", 22: "ALTER", 23: "ALTER",
}


def short(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def is_binary_type(mysql_type: str) -> bool:
    """tiflow `utils.IsBinaryMySQLType`: the column's values are bytes, sent as base64."""
    return "blob" in mysql_type or "binary" in mysql_type


def simple_type_name(code: int, flags: int) -> str:
    """TiDB's `TypeToStr` name for a column (binary-charset strings spelled binary / varbinary / *blob)."""
    base = TEXT_NAMES.get(code)
    if base is None:
        raise ValueError(f"type code {code} has no Simple mysqlType")
    if flags & Flag.BINARY and code in TEXTUAL_CODES:
        if code == TypeCode.VAR_STRING:  # not a TiDB column type: the nearest binary one (VARBINARY)
            return "varbinary"
        return base.replace("text", "blob").replace("char", "binary")
    return base


@dataclass(frozen=True, slots=True)
class ColumnSchema:
    name: str
    code: int
    flags: int
    binary: bool
    """Values are base64 (the type name holds 'blob' or 'binary')."""


@dataclass(frozen=True, slots=True)
class TableSchema:
    """A `tableSchema` object: the columns in column-ID order with their type code and flags."""

    schema: str
    table: str
    table_id: int
    version: int
    columns: tuple[ColumnSchema, ...]

    def column(self, name: str) -> ColumnSchema | None:
        for col in self.columns:
            if col.name == name:
                return col
        return None


def _field(obj: dict[str, Any], name: str, kinds: tuple[type, ...], where: str, default: Any = None) -> Any:
    value = obj.get(name, default)
    if value is None and default is not None:
        return default
    if type(value) not in kinds:
        raise DecodeError(f"'{name}' is {json_kind(value)}", where=f"{where} field '{name}'")
    return value


def parse_table_schema(obj: Any, where: str) -> TableSchema:
    """A `tableSchema` / `preTableSchema` object -> `TableSchema`; a `DecodeError` naming what is wrong."""
    if type(obj) is not dict:
        raise DecodeError(f"table schema is {json_kind(obj)}, not an object", where=where)
    schema = _field(obj, "schema", (str,), where)
    table = _field(obj, "table", (str,), where)
    table_id = _field(obj, "tableID", (int,), where, 0)
    version = _field(obj, "version", (int,), where, 0)
    if not 0 <= version < UINT64_LIMIT:
        raise DecodeError(f"schema version {version} is not a uint64", where=f"{where} field 'version'")
    raw_columns = _field(obj, "columns", (list,), where, [])
    raw_indexes = _field(obj, "indexes", (list,), where, [])
    key_flags: dict[str, int] = {}
    primary: list[str] = []
    unique_not_null: list[list[str]] = []
    for i, idx in enumerate(raw_indexes):
        at = f"{where} index {i}"
        if type(idx) is not dict:
            raise DecodeError(f"index is {json_kind(idx)}, not an object", where=at)
        names = _field(idx, "columns", (list,), at, [])
        if not all(type(n) is str for n in names):
            raise DecodeError("index columns are not all strings", where=at)
        is_primary = _field(idx, "primary", (bool,), at, False)
        is_unique = _field(idx, "unique", (bool,), at, False)
        nullable = _field(idx, "nullable", (bool,), at, False)
        bit = Flag.PRIMARY_KEY if is_primary else Flag.UNIQUE_KEY if is_unique else Flag.MULTIPLE_KEY
        for n in names:
            key_flags[n] = key_flags.get(n, 0) | int(bit)
        if is_primary and not primary:
            primary = list(names)
        elif is_unique and not nullable and names:
            unique_not_null.append(list(names))
    handle = set(primary or (unique_not_null[0] if unique_not_null else []))
    columns: list[ColumnSchema] = []
    seen: set[str] = set()
    for i, col in enumerate(raw_columns):
        at = f"{where} column {i}"
        if type(col) is not dict:
            raise DecodeError(f"column is {json_kind(col)}, not an object", where=at)
        name = _field(col, "name", (str,), at)
        if name in seen:
            raise DecodeError(f"column {short(name)} appears twice", where=at)
        seen.add(name)
        data_type = _field(col, "dataType", (dict,), at)
        mysql_type = _field(data_type, "mysqlType", (str,), at).strip().lower()
        base = mysql_type.split(" ", 1)[0].split("(", 1)[0]
        code = CODES.get(base)
        if code is None:
            raise DecodeError(f"unsupported mysqlType {short(mysql_type)} of column {short(name)}", where=at)
        flags = key_flags.get(name, 0)
        if name in handle:
            flags |= Flag.HANDLE_KEY
        if _field(data_type, "unsigned", (bool,), at, False) or "unsigned" in mysql_type or code == TypeCode.YEAR:
            flags |= Flag.UNSIGNED  # TiDB's YEAR is unsigned (as the other codecs type it)
        if code == TypeCode.BIT:
            flags &= ~Flag.UNSIGNED
        if _field(col, "nullable", (bool,), at, False):
            flags |= Flag.NULLABLE
        binary = is_binary_type(mysql_type)
        if binary or code in BINARY_CHARSET_CODES:
            flags |= Flag.BINARY
        columns.append(ColumnSchema(name, code, int(flags), binary))
    for n in key_flags:
        if n not in seen:
            raise DecodeError(f"an index names column {short(n)}, which the schema does not have", where=where)
    return TableSchema(schema, table, table_id, version, tuple(columns))


def checksum_cell(col: ColumnSchema, raw: Any, local: dt.tzinfo) -> int | float | str | bytes | None:
    """A wire value (already validated by the caller's decoding) -> the typed value the checksum
    reads (tiflow `decodeColumn` then `buildChecksumBytes`)."""
    if raw is None:
        return None
    code = col.code
    if code == TypeCode.TIMESTAMP:
        return timestamp_utc_text(raw["value"], raw.get("location") or "", local)
    if col.binary:
        return base64.b64decode(raw, validate=True)
    if code in (TypeCode.TINY, TypeCode.SHORT, TypeCode.LONG, TypeCode.LONGLONG, TypeCode.INT24, TypeCode.YEAR,
                TypeCode.ENUM, TypeCode.SET, TypeCode.BIT):
        return int(raw)
    if code == TypeCode.FLOAT:
        value: float = struct.unpack("<f", struct.pack("<f", float(raw)))[0]
        return value
    if code == TypeCode.DOUBLE:
        return float(raw)
    return str(raw)


def b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise DecodeError(f"binary value {short(text)} is not base64") from None
