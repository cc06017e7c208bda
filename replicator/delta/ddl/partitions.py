"""A partition's rows as a Spark predicate: rows carry only a physical partition id, so the
partition expression (`mysql.partitions.Partitioning`) is re-evaluated on the Delta side, time
functions in UTC. Pure."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from replicator.delta.ddl.widening import INTEGRAL
from replicator.delta.typemap import quote_string
from replicator.errors import DdlError
from replicator.mysql.partitions import PartitionDef, Partitioning, PExpr
from replicator.mysql.tokens import quote_ident
from replicator.tables import ColumnSpec

_TIME_FUNCS = {"YEAR": "year", "MONTH": "month", "DAY": "dayofmonth", "DAYOFMONTH": "dayofmonth"}


def _lookup(columns: Mapping[str, ColumnSpec], name: str) -> ColumnSpec:
    col = columns.get(name) or next((c for k, c in columns.items() if k.lower() == name.lower()), None)
    if col is None:
        raise DdlError(f"partition expression names column {name!r}, which the table does not have")
    return col


def _number(text: str) -> str:
    if not re.fullmatch(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", text):
        raise DdlError(f"unsupported partition expression: number {text!r}")
    return text


def spark_expr(e: PExpr, columns: Mapping[str, ColumnSpec]) -> str:
    """A partitioning expression (or RANGE/LIST bound) as Spark SQL; time functions in UTC."""
    if e.kind == "column":
        return quote_ident(_lookup(columns, e.value).name)
    if e.kind == "number":
        return _number(e.value)
    if e.kind == "string":
        return quote_string(e.value)
    if e.kind == "null":
        return "NULL"
    if e.kind == "call" and len(e.args) == 1:
        arg = spark_expr(e.args[0], columns)
        if e.value in _TIME_FUNCS:
            return f"{_TIME_FUNCS[e.value]}(CAST({arg} AS DATE))"
        if e.value == "TO_DAYS":  # MySQL day number: TO_DAYS('1970-01-01') = 719528
            return f"(datediff(CAST({arg} AS DATE), DATE'1970-01-01') + 719528)"
        if e.value == "UNIX_TIMESTAMP":
            return f"unix_timestamp(CAST({arg} AS TIMESTAMP))"
    raise DdlError(f"unsupported partition expression {e.render()} (understood: columns, literals, "
                   "YEAR/MONTH/DAY/TO_DAYS/UNIX_TIMESTAMP of a column)")


def _typed(e: PExpr, col: ColumnSpec) -> str:
    """A RANGE/LIST COLUMNS literal as a Spark value of the column's type."""
    if e.kind == "null":
        return "NULL"
    if e.kind == "number":
        return f"CAST({quote_string(_number(e.value))} AS {col.spark_type})"
    if e.kind == "string":
        return f"CAST({quote_string(e.value)} AS {col.spark_type})"
    raise DdlError(f"unsupported partition expression: {e.render()} as a COLUMNS partition value")


def _less_than(cols: Sequence[str], bounds: Sequence[str | None]) -> str:
    """Row-tuple `cols < bounds` with NULL below every value and None standing for MAXVALUE."""
    if not cols:
        return "FALSE"
    c, b = cols[0], bounds[0]
    if b is None:
        return "TRUE"
    rest = _less_than(cols[1:], bounds[1:])
    tail = f" OR ({c} = {b} AND {rest})" if rest != "FALSE" else ""
    return f"({c} IS NULL OR {c} < {b}{tail})"


def _hash_operand(e: PExpr, columns: Mapping[str, ColumnSpec]) -> str:
    """TiDB's HASH input: a plain column's int64 value (BIGINT UNSIGNED reinterpreted), NULL as 0."""
    text = spark_expr(e, columns)
    if e.kind == "column":
        col = _lookup(columns, e.value)
        st = col.spark_type.upper().replace(" ", "")
        unsigned_bigint = st == "DECIMAL(20,0)" and "UNSIGNED" in col.tidb_type.upper()
        if unsigned_bigint:
            text = f"(CASE WHEN {text} >= 9223372036854775808 THEN {text} - 18446744073709551616 ELSE {text} END)"
        elif st not in INTEGRAL:
            raise DdlError(f"unsupported partition expression: HASH of column {col.name!r} of type {col.spark_type}")
    return f"coalesce({text}, 0)"


def _key_operand(col: ColumnSpec) -> str:
    """TiDB KEY partitioning hashes each column's value text (NULL as one 0x00 byte) with CRC32."""
    st = col.spark_type.upper().replace(" ", "")
    tidb = col.tidb_type.upper()
    integral = st in INTEGRAL or (st == "DECIMAL(20,0)" and "UNSIGNED" in tidb)
    if not integral or tidb.startswith(("BIT", "YEAR", "TINYINT(1)", "BOOL")):
        raise DdlError(f"unsupported partition expression: KEY partitioning on column {col.name!r} "
                       f"({col.tidb_type or col.spark_type}); only integer columns are understood")
    return f"coalesce(CAST(CAST({quote_ident(col.name)} AS STRING) AS BINARY), X'00')"


def partition_predicate(part: Partitioning, names: Sequence[str], columns: Sequence[ColumnSpec],
                        key: Sequence[str] = ()) -> str:
    """Spark SQL predicate true exactly for rows TiDB would place in the named partitions."""
    cols = {c.name: c for c in columns}
    preds = [_one_partition(part, part.index(n), cols, key) for n in names]
    return " OR ".join(f"({p})" for p in preds) if preds else "FALSE"


def _one_partition(part: Partitioning, i: int, cols: Mapping[str, ColumnSpec], key: Sequence[str]) -> str:
    p = part.partitions[i]
    n = len(part.partitions)
    if part.method == "HASH":
        return f"abs({_hash_operand(part.exprs[0], cols)} % {n}) = {i}"
    if part.method == "KEY":
        names = [e.value for e in part.exprs] or list(key)
        if not names:
            raise DdlError("unsupported partition expression: KEY() on a table without a primary key")
        parts = ", ".join(_key_operand(_lookup(cols, c)) for c in names)
        return f"(crc32(concat({parts})) % {n}) = {i}"
    if part.columns_form:
        targets = [_lookup(cols, e.value) for e in part.exprs]
        operands = [quote_ident(c.name) for c in targets]
    else:
        targets = []
        operands = [spark_expr(part.exprs[0], cols)]

    def bound(values: tuple[PExpr, ...]) -> list[str | None]:
        if len(values) != len(operands):
            raise DdlError(f"partition bound {[v.render() for v in values]} does not match "
                           f"{len(operands)} partitioning column(s)")
        out: list[str | None] = []
        for k, v in enumerate(values):
            if v.kind == "maxvalue":
                out.append(None)
            elif part.columns_form:
                out.append(_typed(v, targets[k]))
            else:
                out.append(spark_expr(v, cols))
        return out

    if part.method == "RANGE":
        upper = _less_than(operands, bound(p.values[0]))
        if i == 0:
            return upper
        return f"{upper} AND NOT {_less_than(operands, bound(part.partitions[i - 1].values[0]))}"

    def matches(d: PartitionDef) -> str:
        alts = []
        for v in d.values:
            pairs = zip(operands, bound(v), strict=True)
            alts.append(" AND ".join(f"{o} <=> {x if x is not None else 'NULL'}" for o, x in pairs))
        return " OR ".join(f"({a})" for a in alts) if alts else "FALSE"

    if p.is_default:
        others = [matches(d) for d in part.partitions if not d.is_default]
        own = matches(p) if p.values else "FALSE"
        return f"({own}) OR NOT ({' OR '.join(f'({o})' for o in others) or 'FALSE'})"
    return matches(p)
