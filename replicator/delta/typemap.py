"""TiDB column types -> Delta (Spark SQL) types, and Python values -> Arrow-ready values.

Pure logic (sqlglot only): no Spark import. A table's shape comes from its CREATE TABLE DDL when
the stream has it (precision, NOT NULL, primary key, enum labels), otherwise it is inferred from
the first row event's type codes and flags. The mapping is documented in docs/types.md.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from dataclasses import replace
from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from typing import Any, cast

import sqlglot
from sqlglot import exp

from replicator.codec.values import format_datetime, format_decimal
from replicator.errors import DdlError, SchemaError
from replicator.events import Column, Flag, RowChange, TypeCode
from replicator.tables import ColumnSpec, TableSpec

T = exp.DataType.Type


def quote_string(text: str) -> str:
    """A Spark SQL string literal (single quotes; backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ---------------------------------------------------------------------------------------------
# From DDL (sqlglot MySQL AST)

_INT_TYPES: dict[Any, tuple[str, str]] = {
    # sqlglot type: (signed spark type, unsigned spark type)
    T.TINYINT: ("TINYINT", "SMALLINT"),
    T.UTINYINT: ("SMALLINT", "SMALLINT"),
    T.SMALLINT: ("SMALLINT", "INT"),
    T.USMALLINT: ("INT", "INT"),
    T.MEDIUMINT: ("INT", "INT"),
    T.UMEDIUMINT: ("INT", "INT"),
    T.INT: ("INT", "BIGINT"),
    T.UINT: ("BIGINT", "BIGINT"),
    T.BIGINT: ("BIGINT", "DECIMAL(20,0)"),
    T.UBIGINT: ("DECIMAL(20,0)", "DECIMAL(20,0)"),
    T.BOOLEAN: ("TINYINT", "TINYINT"),
    T.YEAR: ("SMALLINT", "SMALLINT"),
}
_STRING_TYPES = {
    T.CHAR, T.NCHAR, T.VARCHAR, T.NVARCHAR, T.TEXT, T.TINYTEXT, T.MEDIUMTEXT, T.LONGTEXT, T.JSON,
    T.TIME, T.VECTOR,
}
_BINARY_TYPES = {T.BINARY, T.VARBINARY, T.BLOB, T.TINYBLOB, T.MEDIUMBLOB, T.LONGBLOB}


def _params(dtype: exp.DataType) -> list[str]:
    return [p.sql("mysql") for p in dtype.expressions]


def _int_param(dtype: exp.DataType, index: int, default: int) -> int:
    params = _params(dtype)
    if len(params) <= index:
        return default
    try:
        return int(params[index])
    except ValueError:
        return default


def _label(text: str) -> str:
    lit = sqlglot.parse_one(text, read="mysql")
    return lit.name if isinstance(lit, exp.Literal) else text.strip("'")


def spark_type_of(dtype: exp.DataType) -> tuple[str, tuple[str, ...], bool]:
    """Delta type for a MySQL column type; returns (spark type, enum/set labels, is_set)."""
    t = dtype.this
    unsigned = "UNSIGNED" in dtype.sql("mysql").upper()
    if t in _INT_TYPES:
        signed, uns = _INT_TYPES[t]
        return (uns if unsigned else signed), (), False
    if t in (T.FLOAT,):
        return "FLOAT", (), False
    if t in (T.DOUBLE,):
        return "DOUBLE", (), False
    if t in (T.DECIMAL, T.UDECIMAL, T.BIGDECIMAL):
        p = _int_param(dtype, 0, 10)
        s = _int_param(dtype, 1, 0)
        return (f"DECIMAL({p},{s})" if p <= 38 else "STRING"), (), False
    if t == T.DATE:
        return "DATE", (), False
    if t in (T.DATETIME, T.DATETIME64, T.DATETIME2):
        return "TIMESTAMP_NTZ", (), False
    if t in (T.TIMESTAMP, T.TIMESTAMPTZ, T.TIMESTAMPLTZ):
        return "TIMESTAMP", (), False
    if t == T.BIT:
        bits = _int_param(dtype, 0, 1)
        return ("BIGINT" if bits <= 63 else "DECIMAL(20,0)"), (), False
    if t == T.ENUM:
        return "STRING", tuple(_label(p) for p in _params(dtype)), False
    if t == T.SET:
        return "STRING", tuple(_label(p) for p in _params(dtype)), True
    if t in _STRING_TYPES:
        return "STRING", (), False
    if t in _BINARY_TYPES:
        return "BINARY", (), False
    raise DdlError(f"unsupported column type {dtype.sql('mysql')}")


def _constraint_kinds(col: exp.ColumnDef) -> list[exp.Expression]:
    return [c.args["kind"] for c in col.constraints if c.args.get("kind") is not None]


def column_from_def(col: exp.ColumnDef) -> tuple[ColumnSpec, bool]:
    """ColumnSpec from a sqlglot column definition; second value: column-level PRIMARY KEY."""
    dtype = col.args.get("kind")
    if not isinstance(dtype, exp.DataType):
        raise DdlError(f"column {col.name!r} has no type")
    spark_type, labels, is_set = spark_type_of(dtype)
    nullable, default, comment, pk = True, None, None, False
    for kind in _constraint_kinds(col):
        if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get("allow_null"):
            nullable = False
        elif isinstance(kind, exp.DefaultColumnConstraint):
            default = kind.this.sql("mysql") if kind.this is not None else None
        elif isinstance(kind, exp.CommentColumnConstraint):
            comment = kind.this.name if kind.this is not None else None
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            pk = True
            nullable = False
    spec = ColumnSpec(
        name=col.name,
        spark_type=spark_type,
        tidb_type=dtype.sql("mysql"),
        labels=labels,
        is_set=is_set,
        nullable=nullable,
        default=default,
        comment=comment,
    )
    return spec, pk


def _table_parts(table: exp.Table, default_schema: str) -> tuple[str, str]:
    return (table.db or default_schema), table.name


def parse_sql(query: str) -> exp.Expression:
    """Parse one MySQL statement; DdlError when sqlglot cannot. A DDL is read by its window's
    scope, the step's create-ahead pass and its handler, so the tree is parsed once and each
    caller gets a copy of its own (a copy costs a seventh of a parse; callers may edit theirs)."""
    return _parse_once(query).copy()


@functools.lru_cache(maxsize=256)
def _parse_once(query: str) -> exp.Expression:
    try:
        parsed = sqlglot.parse(query, read="mysql")
    except sqlglot.errors.SqlglotError as exc:
        raise DdlError(f"cannot parse query {query!r}: {exc}") from None
    stmts = [p for p in parsed if p is not None]
    if len(stmts) != 1:
        raise DdlError(f"expected one statement, got {len(stmts)} in {query!r}")
    return cast(exp.Expression, stmts[0])


def spec_from_create(query: str, default_schema: str, default_table: str = "") -> TableSpec:
    """TableSpec from a MySQL CREATE TABLE statement (never executed, only parsed)."""
    stmt = parse_sql(query)
    if not isinstance(stmt, exp.Create) or str(stmt.args.get("kind", "")).upper() != "TABLE":
        raise DdlError(f"not a CREATE TABLE statement: {query!r}")
    schema_node = stmt.this
    if not isinstance(schema_node, exp.Schema) or not isinstance(schema_node.this, exp.Table):
        raise DdlError(f"CREATE TABLE without a column list: {query!r}")
    schema, table = _table_parts(schema_node.this, default_schema)
    columns: list[ColumnSpec] = []
    key: list[str] = []
    unique_not_null: list[list[str]] = []
    for item in schema_node.expressions:
        if isinstance(item, exp.ColumnDef):
            spec, pk = column_from_def(item)
            columns.append(spec)
            if pk:
                key = [spec.name]
        elif isinstance(item, exp.PrimaryKey):
            key = [_key_part_name(e) for e in item.expressions]
        elif isinstance(item, exp.UniqueColumnConstraint):
            inner = item.this
            names = [_key_part_name(e) for e in inner.expressions] if isinstance(inner, exp.Schema) else []
            if names:
                unique_not_null.append(names)
    by_name = {c.name: c for c in columns}
    if key:
        columns = [replace(c, nullable=False) if c.name in key else c for c in columns]
    else:
        # TiCDC's handle key without a PK: the first UNIQUE index whose columns are all NOT NULL.
        for names in unique_not_null:
            if all(n in by_name and not by_name[n].nullable for n in names):
                key = names
                break
    comment = None
    props = stmt.args.get("properties")
    partition_def = None
    if props is not None:
        for prop in props.expressions:
            if isinstance(prop, exp.SchemaCommentProperty):
                comment = prop.this.name
            if isinstance(prop, (exp.PartitionedByProperty,)) or "PARTITION" in type(prop).__name__.upper():
                partition_def = prop.sql("mysql")
    return TableSpec(schema, table or default_table, tuple(columns), tuple(key), comment, partition_def)


def _key_part_name(e: exp.Expression) -> str:
    if isinstance(e, exp.Ordered):
        e = e.this
    if isinstance(e, (exp.Column, exp.Identifier)):
        return e.name
    if isinstance(e, (exp.Anonymous, exp.Func)):  # prefix index: col(10)
        return e.name if e.name else e.sql()
    return e.name or e.sql("mysql")


# ---------------------------------------------------------------------------------------------
# Inferred from row events (tables that existed before the stream)

def spark_type_from_code(col: Column) -> str:
    code, flags = col.type_code, col.flags
    unsigned = bool(flags & Flag.UNSIGNED)
    if code == TypeCode.TINY:
        return "SMALLINT" if unsigned else "TINYINT"
    if code == TypeCode.SHORT:
        return "INT" if unsigned else "SMALLINT"
    if code == TypeCode.INT24:
        return "INT"
    if code == TypeCode.LONG:
        return "BIGINT" if unsigned else "INT"
    if code == TypeCode.LONGLONG:
        return "DECIMAL(20,0)" if unsigned else "BIGINT"
    if code == TypeCode.YEAR:
        return "SMALLINT"
    if code == TypeCode.FLOAT:
        return "FLOAT"
    if code == TypeCode.DOUBLE:
        return "DOUBLE"
    if code in (TypeCode.DECIMAL, TypeCode.NEWDECIMAL):
        return "STRING"  # precision/scale unknown without the DDL: keep the exact text
    if code in (TypeCode.DATE, TypeCode.NEWDATE):
        return "DATE"
    if code == TypeCode.DATETIME:
        return "TIMESTAMP_NTZ"
    if code == TypeCode.TIMESTAMP:
        return "TIMESTAMP"
    if code in (TypeCode.BIT, TypeCode.SET):
        return "DECIMAL(20,0)"
    if code == TypeCode.ENUM:
        return "INT"
    if code in (TypeCode.VARCHAR, TypeCode.VAR_STRING, TypeCode.STRING,
                TypeCode.TINY_BLOB, TypeCode.MEDIUM_BLOB, TypeCode.LONG_BLOB, TypeCode.BLOB):
        if isinstance(col.value, bytes) or (col.value is None and flags & Flag.BINARY):
            return "BINARY"
        return "STRING"
    if code in (TypeCode.TIME, TypeCode.JSON, TypeCode.VECTOR):
        return "STRING"
    if code == TypeCode.NULL:
        return "STRING"
    raise SchemaError(f"column {col.name!r} has unsupported type code {code}")


def spec_from_row(row: RowChange) -> TableSpec:
    """Infer a table from a row event whose CREATE TABLE predates the stream."""
    image = row.columns or row.old_columns
    key = tuple(c.name for c in image if c.is_handle_key)
    # Checked in this order: a delete of an unknown table fails on the missing columns below.
    if not key:
        raise SchemaError(
            f"table {row.schema}.{row.table} is unknown and its row event has no handle-key column "
            "(flag 0x02): cannot infer a merge key; replicate its CREATE TABLE or give it a primary key"
        )
    if not row.columns:
        raise SchemaError(
            f"table {row.schema}.{row.table} is unknown and its first event is a delete: the columns "
            "cannot be inferred; start from a point where the table's CREATE TABLE or an insert is seen"
        )
    cols = tuple(
        ColumnSpec(name=c.name, spark_type=spark_type_from_code(c), tidb_type=f"code {c.type_code}",
                   nullable=not c.is_handle_key)
        for c in image
    )
    return TableSpec(row.schema, row.table, cols, key)


# ---------------------------------------------------------------------------------------------
# Values -> Arrow-ready Python values (one converter per column, built once per batch)

Converter = Callable[[Any], Any]
_DEC_RE = re.compile(r"^DECIMAL\((\d+),(\d+)\)$")


def _to_str(spec: ColumnSpec) -> Converter:
    labels, is_set = spec.labels, spec.is_set

    def conv(v: Any) -> Any:
        if v is None or type(v) is str:
            return v
        if isinstance(v, bytes):
            try:
                return v.decode("utf-8")
            except UnicodeDecodeError:
                raise SchemaError(f"column {spec.name!r}: bytes are not valid UTF-8 for a STRING column") from None
        if isinstance(v, int) and labels:
            if is_set:
                return ",".join(lbl for i, lbl in enumerate(labels) if v >> i & 1)
            if v == 0:
                return ""
            if 1 <= v <= len(labels):
                return labels[v - 1]
            raise SchemaError(f"column {spec.name!r}: enum index {v} outside its {len(labels)} labels")
        if isinstance(v, Decimal):
            return format_decimal(v)
        if isinstance(v, dt.datetime):
            return format_datetime(v)
        if isinstance(v, dt.date):
            return v.isoformat()
        if isinstance(v, bool):
            return str(int(v))
        return str(v)

    return conv


def _to_bytes(spec: ColumnSpec) -> Converter:
    def conv(v: Any) -> Any:
        if v is None or isinstance(v, bytes):
            return v
        if isinstance(v, str):
            return v.encode("utf-8")
        raise SchemaError(f"column {spec.name!r}: {type(v).__name__} value for a BINARY column")

    return conv


# Wide enough for DECIMAL(65,30) and anything else TiDB sends: the default context has 28 digits,
# so quantize() would raise InvalidOperation on DECIMAL(38,10) values with 29+ significant digits.
_DEC_CTX = Context(prec=200, rounding=ROUND_HALF_EVEN, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _to_decimal(spec: ColumnSpec, precision: int, scale: int) -> Converter:
    quantum = Decimal(1).scaleb(-scale, context=_DEC_CTX)
    limit = Decimal(10) ** (precision - scale)

    def conv(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, bool):
            v = int(v)
        d = v if isinstance(v, Decimal) else Decimal(v) if isinstance(v, (int, str)) else None
        if d is None:
            raise SchemaError(f"column {spec.name!r}: {type(v).__name__} value for {spec.spark_type}")
        try:
            q = d.quantize(quantum, context=_DEC_CTX)
        except InvalidOperation:
            raise SchemaError(f"column {spec.name!r}: {d} does not fit {spec.spark_type}") from None
        if q != d:
            raise SchemaError(f"column {spec.name!r}: {d} does not fit {spec.spark_type} without rounding")
        if q.copy_abs() >= limit:  # abs() would round to the 28-digit default context
            raise SchemaError(f"column {spec.name!r}: {d} exceeds the precision of {spec.spark_type}")
        return q

    return conv


def _to_int(spec: ColumnSpec) -> Converter:
    def conv(v: Any) -> Any:
        if v is None or type(v) is int:
            return v
        if isinstance(v, (Decimal, str)):
            return int(v)
        raise SchemaError(f"column {spec.name!r}: {type(v).__name__} value for {spec.spark_type}")

    return conv


def _to_float(spec: ColumnSpec) -> Converter:
    def conv(v: Any) -> Any:
        return None if v is None else float(v)

    return conv


def _to_timestamp(spec: ColumnSpec) -> Converter:
    def conv(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, dt.datetime):
            return v.astimezone(dt.UTC) if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)
        raise SchemaError(f"column {spec.name!r}: {type(v).__name__} value for TIMESTAMP")

    return conv


def _to_ntz(spec: ColumnSpec) -> Converter:
    def conv(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, dt.datetime):
            return v.replace(tzinfo=None) if v.tzinfo is None else v.astimezone(dt.UTC).replace(tzinfo=None)
        if isinstance(v, dt.date):
            return dt.datetime(v.year, v.month, v.day)
        raise SchemaError(f"column {spec.name!r}: {type(v).__name__} value for TIMESTAMP_NTZ")

    return conv


def _to_date(spec: ColumnSpec) -> Converter:
    def conv(v: Any) -> Any:
        if v is None or (isinstance(v, dt.date) and not isinstance(v, dt.datetime)):
            return v
        raise SchemaError(f"column {spec.name!r}: {type(v).__name__} value for DATE")

    return conv


def converter_for(spec: ColumnSpec) -> Converter:
    st = spec.spark_type.upper()
    if st == "STRING":
        return _to_str(spec)
    if st == "BINARY":
        return _to_bytes(spec)
    m = _DEC_RE.match(st.replace(" ", ""))
    if m:
        return _to_decimal(spec, int(m.group(1)), int(m.group(2)))
    if st in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        return _to_int(spec)
    if st in ("FLOAT", "DOUBLE"):
        return _to_float(spec)
    if st == "TIMESTAMP":
        return _to_timestamp(spec)
    if st == "TIMESTAMP_NTZ":
        return _to_ntz(spec)
    if st == "DATE":
        return _to_date(spec)
    raise SchemaError(f"column {spec.name!r}: no value conversion for Delta type {spec.spark_type}")


def arrow_type_name(spark_type: str) -> tuple[str, tuple[int, ...]]:
    """(arrow factory name, args) for a Spark type; kept as data so this module needs no pyarrow."""
    st = spark_type.upper().replace(" ", "")
    m = _DEC_RE.match(st)
    if m:
        return "decimal128", (int(m.group(1)), int(m.group(2)))
    return {
        "STRING": ("string", ()),
        "BINARY": ("binary", ()),
        "TINYINT": ("int8", ()),
        "SMALLINT": ("int16", ()),
        "INT": ("int32", ()),
        "BIGINT": ("int64", ()),
        "FLOAT": ("float32", ()),
        "DOUBLE": ("float64", ()),
        "DATE": ("date32", ()),
        "TIMESTAMP": ("timestamp_utc", ()),
        "TIMESTAMP_NTZ": ("timestamp", ()),
    }[st]
