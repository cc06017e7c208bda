"""TiCDC storage-sink schema files: a table version's columns and the DDL that made it.

`{schema}/{table}/meta/schema_{table-version}_{checksum}.json` (a database's:
`{schema}/meta/schema_{version}_{checksum}.json`, `Table` empty) holds `Table`, `Schema`,
`Version` (the file format, 1), `TableVersion`, `Query` (the DDL text, empty when the version
was started without one: a rescheduled table, a resumed changefeed), `Type` (TiDB's DDL type
code, 0 without a DDL), `TableColumns` and `TableColumnsTotal`. Column fields are strings, and
`ColumnNullable` / `ColumnIsPk` appear only as "false" / "true". Tell DDLs by `Query`/`Type`,
never by the checksum (a DROP TABLE keeps the columns and so the checksum).
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from replicator.codec.canal_json.common import BINARY_BASE_NAMES, BINARY_CHARSET_CODES, CODES
from replicator.errors import DecodeError
from replicator.events import Flag, TypeCode

__all__ = ["SchemaFile", "TableColumn", "parse_schema_file", "parse_schema_name", "render_schema_file",
           "schema_file_name"]

_NAME_RE: Final = re.compile(r"schema_(?P<version>[0-9]{1,20})_(?P<checksum>[0-9]{1,10})\.json\Z")
FORMAT_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class TableColumn:
    """One column as the schema file gives it (`type_text` upper case, e.g. "BIGINT UNSIGNED")."""

    name: str
    type_text: str
    precision: str = ""
    scale: str = ""
    nullable: bool = True
    is_pk: bool = False

    def shape(self) -> tuple[int, int]:
        """(TiDB type code, TiCDC column flags) of the column."""
        words = self.type_text.strip().lower().split()
        if not words:
            raise DecodeError(f"column {self.name!r} has an empty ColumnType")
        base = words[0].split("(")[0]
        code = CODES.get(base)
        if code is None:
            raise DecodeError(f"column {self.name!r} has the unsupported ColumnType {self.type_text!r}")
        flags = 0
        if self.is_pk:
            flags |= Flag.HANDLE_KEY | Flag.PRIMARY_KEY
        if self.nullable and not self.is_pk:
            flags |= Flag.NULLABLE
        if "unsigned" in words[1:] or code == TypeCode.YEAR:
            flags |= Flag.UNSIGNED
        if code in BINARY_CHARSET_CODES or base in BINARY_BASE_NAMES:
            flags |= Flag.BINARY
        return code, int(flags)

    def sql_type(self) -> str:
        """The column's type as SQL text (precision and scale as recorded)."""
        base, *rest = self.type_text.split() or [""]
        params = ",".join(p for p in (self.precision, self.scale) if p)
        text = f"{base}({params})" if params and base.lower() not in ("json", "date") else base
        return " ".join([text, *rest])


@dataclass(frozen=True, slots=True)
class SchemaFile:
    """A schema file: a table version (or a database, `table` empty) and the DDL that made it."""

    schema: str
    table: str
    table_version: int
    query: str = ""
    ddl_type: int = 0
    columns: tuple[TableColumn, ...] = ()

    @property
    def is_database(self) -> bool:
        return not self.table

    @property
    def has_ddl(self) -> bool:
        return bool(self.query.strip())

    def checksum(self) -> int:
        """A checksum of the columns (what TiCDC puts in the file name; equal columns, equal sums)."""
        cols = [[c.name, c.type_text, c.precision, c.scale, c.nullable, c.is_pk] for c in self.columns]
        return zlib.crc32(json.dumps([self.schema, self.table, cols]).encode())


def parse_schema_name(name: str) -> tuple[int, int] | None:
    """`schema_{version}_{checksum}.json` -> (version, checksum); None for any other name."""
    m = _NAME_RE.match(name)
    return None if m is None else (int(m.group("version")), int(m.group("checksum")))


def schema_file_name(sf: SchemaFile) -> str:
    return f"schema_{sf.table_version}_{sf.checksum():010d}.json"


def _text(obj: dict[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if type(value) is not str:
        raise DecodeError(f"field {key!r} is {type(value).__name__}, not a string", where=where)
    return value


def _int(obj: dict[str, Any], key: str, where: str) -> int:
    value = obj.get(key, 0)
    if type(value) is not int or value < 0:
        raise DecodeError(f"field {key!r} is not a non-negative integer", where=where)
    return value


def parse_schema_file(data: bytes, where: str) -> SchemaFile:
    """A schema file's content; `DecodeError` naming the file (`where`) when it is malformed."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise DecodeError(f"schema file is not JSON ({exc})", where=where) from None
    if not isinstance(obj, dict):
        raise DecodeError("schema file is not a JSON object", where=where)
    cols_raw = obj.get("TableColumns") or []
    if not isinstance(cols_raw, list):
        raise DecodeError("field 'TableColumns' is not a list", where=where)
    columns = []
    for i, c in enumerate(cols_raw):
        at = f"{where} column {i}"
        if not isinstance(c, dict):
            raise DecodeError("column is not a JSON object", where=at)
        columns.append(TableColumn(
            name=_text(c, "ColumnName", at, required=True), type_text=_text(c, "ColumnType", at, required=True),
            precision=_text(c, "ColumnPrecision", at), scale=_text(c, "ColumnScale", at),
            nullable=_text(c, "ColumnNullable", at) != "false", is_pk=_text(c, "ColumnIsPk", at) == "true"))
    for col in columns:
        try:
            col.shape()
        except DecodeError as exc:
            raise DecodeError(exc.what, where=where) from None
    return SchemaFile(schema=_text(obj, "Schema", where, required=True), table=_text(obj, "Table", where),
                      table_version=_int(obj, "TableVersion", where), query=_text(obj, "Query", where),
                      ddl_type=_int(obj, "Type", where), columns=tuple(columns))


def render_schema_file(sf: SchemaFile) -> bytes:
    """A schema file as TiCDC writes it (indented JSON; empty column fields left out)."""
    cols = []
    for c in sf.columns:
        col: dict[str, str] = {"ColumnName": c.name, "ColumnType": c.type_text}
        if c.precision:
            col["ColumnPrecision"] = c.precision
        if c.scale:
            col["ColumnScale"] = c.scale
        if not c.nullable:
            col["ColumnNullable"] = "false"
        if c.is_pk:
            col["ColumnIsPk"] = "true"
        cols.append(col)
    obj = {"Table": sf.table, "Schema": sf.schema, "Version": FORMAT_VERSION, "TableVersion": sf.table_version,
           "Query": sf.query, "Type": sf.ddl_type, "TableColumns": cols, "TableColumnsTotal": len(cols)}
    return json.dumps(obj, indent=4, ensure_ascii=False).encode()


def columns_from_sql(columns: Sequence[tuple[str, str, bool, bool]]) -> tuple[TableColumn, ...]:
    """(name, SQL type such as "DECIMAL(12,2)" or "BIGINT UNSIGNED", nullable, primary key) ->
    schema-file columns, split as TiCDC records them (type name, precision, scale)."""
    out = []
    for name, sql, nullable, pk in columns:
        m = re.match(r"([A-Za-z]+)(?:\(([^)]*)\))?(.*)\Z", sql.strip())
        if m is None:
            raise ValueError(f"cannot read column type {sql!r}")
        base, params, rest = m.group(1).upper(), m.group(2) or "", m.group(3).strip().upper()
        precision = scale = ""
        if base not in ("ENUM", "SET") and params:
            nums = [p.strip() for p in params.split(",")]
            precision = nums[0]
            scale = nums[1] if len(nums) > 1 else ""
        out.append(TableColumn(name, f"{base} {rest}".strip(), precision, scale, nullable and not pk, pk))
    return tuple(out)
