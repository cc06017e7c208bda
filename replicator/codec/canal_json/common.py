"""canal-json constants both directions share: the `mysqlType` names, Java SQL types, flag rules."""

from __future__ import annotations

from typing import Final

from replicator.events import Flag, TypeCode

WATERMARK_TYPE: Final = "TIDB_WATERMARK"
ROW_TYPES: Final = ("INSERT", "UPDATE", "DELETE")
UINT64_LIMIT: Final = 1 << 64
INT64_MIN: Final = -(1 << 63)
INT64_LIMIT: Final = 1 << 63

# TiDB's type names (parser `type2Str`) -> type code; the binary-charset spellings TiDB's
# `TypeToStr` writes for BINARY / VARBINARY / BLOB columns map to the same codes.
TEXT_NAMES: Final[dict[int, str]] = {
    TypeCode.DECIMAL: "decimal",
    TypeCode.TINY: "tinyint",
    TypeCode.SHORT: "smallint",
    TypeCode.LONG: "int",
    TypeCode.FLOAT: "float",
    TypeCode.DOUBLE: "double",
    TypeCode.NULL: "null",
    TypeCode.TIMESTAMP: "timestamp",
    TypeCode.LONGLONG: "bigint",
    TypeCode.INT24: "mediumint",
    TypeCode.DATE: "date",
    TypeCode.NEWDATE: "date",
    TypeCode.TIME: "time",
    TypeCode.DATETIME: "datetime",
    TypeCode.YEAR: "year",
    TypeCode.VARCHAR: "varchar",
    TypeCode.BIT: "bit",
    TypeCode.VECTOR: "vector",
    TypeCode.JSON: "json",
    TypeCode.NEWDECIMAL: "decimal",
    TypeCode.ENUM: "enum",
    TypeCode.SET: "set",
    TypeCode.TINY_BLOB: "tinytext",
    TypeCode.MEDIUM_BLOB: "mediumtext",
    TypeCode.LONG_BLOB: "longtext",
    TypeCode.BLOB: "text",
    TypeCode.VAR_STRING: "var_string",
    TypeCode.STRING: "char",
    TypeCode.GEOMETRY: "geometry",
}
BINARY_NAMES: Final[dict[int, str]] = {
    TypeCode.VARCHAR: "varbinary",
    TypeCode.STRING: "binary",
    TypeCode.TINY_BLOB: "tinyblob",
    TypeCode.MEDIUM_BLOB: "mediumblob",
    TypeCode.LONG_BLOB: "longblob",
    TypeCode.BLOB: "blob",
}
_PREFERRED: Final = {TypeCode.DECIMAL: TypeCode.NEWDECIMAL, TypeCode.NEWDATE: TypeCode.DATE}
CODES: Final[dict[str, int]] = {
    name: int(_PREFERRED.get(TypeCode(code), TypeCode(code))) for code, name in TEXT_NAMES.items()
} | {name: int(code) for code, name in BINARY_NAMES.items()} | {"integer": int(TypeCode.LONG)}
BINARY_BASE_NAMES: Final = frozenset(BINARY_NAMES.values())

STRING_CODES: Final = frozenset(int(c) for c in (TypeCode.VARCHAR, TypeCode.VAR_STRING, TypeCode.STRING))
BLOB_CODES: Final = frozenset(
    int(c) for c in (TypeCode.TINY_BLOB, TypeCode.MEDIUM_BLOB, TypeCode.LONG_BLOB, TypeCode.BLOB)
)
TEXTUAL_CODES: Final = STRING_CODES | BLOB_CODES
INT_CODES: Final = frozenset(
    int(c) for c in (TypeCode.TINY, TypeCode.SHORT, TypeCode.LONG, TypeCode.LONGLONG, TypeCode.INT24, TypeCode.YEAR)
)
UINT_CODES: Final = frozenset(int(c) for c in (TypeCode.BIT, TypeCode.ENUM, TypeCode.SET))
# Columns TiDB always gives the binary charset (flag 0x01): numbers, temporal types, BIT, JSON.
# canal-json does not carry the flag; derived from the type, rows match the other protocols' flags.
BINARY_CHARSET_CODES: Final = INT_CODES | frozenset(
    int(c)
    for c in (
        TypeCode.FLOAT,
        TypeCode.DOUBLE,
        TypeCode.DECIMAL,
        TypeCode.NEWDECIMAL,
        TypeCode.DATE,
        TypeCode.NEWDATE,
        TypeCode.DATETIME,
        TypeCode.TIMESTAMP,
        TypeCode.TIME,
        TypeCode.BIT,
        TypeCode.JSON,
    )
)

# java.sql.Types codes TiCDC writes in `sqlType` (tiflow internal/java.go).
JAVA_BIT, JAVA_TINYINT, JAVA_SMALLINT, JAVA_INTEGER, JAVA_BIGINT = -7, -6, 5, 4, -5
JAVA_REAL, JAVA_DOUBLE, JAVA_DECIMAL, JAVA_CHAR, JAVA_VARCHAR = 7, 8, 3, 1, 12
JAVA_DATE, JAVA_TIME, JAVA_TIMESTAMP, JAVA_BINARY, JAVA_NULL = 91, 92, 93, -2, 0
JAVA_BLOB, JAVA_CLOB = 2004, 2005
JAVA_BINARY_TYPES: Final = frozenset((JAVA_BLOB, JAVA_BINARY, -3, -4))
"""BLOB, BINARY, VARBINARY, LONGVARBINARY: a textual column with one of these holds bytes."""

_JAVA_TYPES: Final[dict[int, int]] = {
    TypeCode.TINY: JAVA_TINYINT,
    TypeCode.SHORT: JAVA_SMALLINT,
    TypeCode.LONG: JAVA_INTEGER,
    TypeCode.FLOAT: JAVA_REAL,
    TypeCode.DOUBLE: JAVA_DOUBLE,
    TypeCode.NULL: JAVA_NULL,
    TypeCode.NEWDECIMAL: JAVA_DECIMAL,
    TypeCode.TIMESTAMP: JAVA_TIMESTAMP,
    TypeCode.DATETIME: JAVA_TIMESTAMP,
    TypeCode.LONGLONG: JAVA_BIGINT,
    TypeCode.INT24: JAVA_INTEGER,
    TypeCode.DATE: JAVA_DATE,
    TypeCode.NEWDATE: JAVA_DATE,
    TypeCode.TIME: JAVA_TIME,
    TypeCode.YEAR: JAVA_VARCHAR,
    TypeCode.ENUM: JAVA_INTEGER,
    TypeCode.SET: JAVA_BIT,
    TypeCode.GEOMETRY: JAVA_BINARY,
    TypeCode.BIT: JAVA_BIT,
    TypeCode.JSON: JAVA_VARCHAR,
    TypeCode.VECTOR: JAVA_VARCHAR,
}
# Unsigned values above the signed range promote the Java type (canal's rule, as TiCDC applies it).
_PROMOTE: Final[dict[int, tuple[int, int]]] = {
    TypeCode.TINY: (127, JAVA_SMALLINT),
    TypeCode.SHORT: (32767, JAVA_INTEGER),
    TypeCode.LONG: (2147483647, JAVA_BIGINT),
    TypeCode.LONGLONG: (INT64_LIMIT - 1, JAVA_DECIMAL),
}


def java_sql_type(code: int, flags: int, value: object) -> int:
    """The `sqlType` TiCDC writes for a column (tiflow `getJavaSQLType`)."""
    binary = bool(flags & Flag.BINARY)
    if code in BLOB_CODES:
        return JAVA_BLOB if binary else JAVA_CLOB
    if code in (TypeCode.VARCHAR, TypeCode.VAR_STRING):
        return JAVA_BLOB if binary else JAVA_VARCHAR
    if code == TypeCode.STRING:
        return JAVA_BLOB if binary else JAVA_CHAR
    java = _JAVA_TYPES.get(code, JAVA_VARCHAR)
    promote = _PROMOTE.get(code)
    if promote is not None and flags & Flag.UNSIGNED and type(value) is int and value > promote[0]:
        return promote[1]
    return java


def mysql_type(code: int, flags: int) -> str:
    """The `mysqlType` TiCDC writes (TiDB `TypeToStr` plus ` unsigned`, never on BIT or YEAR)."""
    name = BINARY_NAMES.get(code) if flags & Flag.BINARY and code in TEXTUAL_CODES else None
    if name is None:
        name = TEXT_NAMES.get(code)
    if name is None:
        raise ValueError(f"type code {code} has no canal-json mysqlType")
    if flags & Flag.UNSIGNED and code not in (TypeCode.BIT, TypeCode.YEAR):
        name += " unsigned"
    return name
