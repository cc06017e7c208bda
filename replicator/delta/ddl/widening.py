"""Delta type-widening rules: what `ALTER COLUMN .. TYPE` accepts in delta-spark 4.0. Pure."""

from __future__ import annotations

import re

from replicator.mysql.tokens import quote_ident

INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
"""Spark integral types, narrowest first."""


def norm_type(t: str) -> str:
    """Normalize a Spark/Delta type name ('int', 'decimal(10, 2)', 'INTEGER') for comparison."""
    u = t.upper().replace(" ", "")
    return {"INTEGER": "INT", "LONG": "BIGINT", "SHORT": "SMALLINT", "BYTE": "TINYINT"}.get(u, u)


_DEC_RE = re.compile(r"^DECIMAL\((\d+),(\d+)\)$")


def can_widen(old: str, new: str) -> bool:
    """Whether delta-spark 4.0 type widening does old -> new in place (`ALTER COLUMN .. TYPE`)."""
    o, n = norm_type(old), norm_type(new)
    if o == n:
        return False
    dn = _DEC_RE.match(n)
    if o in INTEGRAL:
        if n in INTEGRAL:
            return INTEGRAL.index(n) > INTEGRAL.index(o)
        if n == "DOUBLE":
            return o != "BIGINT"
        if dn:
            return int(dn.group(1)) - int(dn.group(2)) >= (20 if o == "BIGINT" else 10)
        return False
    if o == "FLOAT":
        return n == "DOUBLE"
    if o == "DATE":
        return n == "TIMESTAMP_NTZ"
    do = _DEC_RE.match(o)
    if do and dn:
        k1 = int(dn.group(1)) - int(do.group(1))
        k2 = int(dn.group(2)) - int(do.group(2))
        return k1 >= k2 >= 0
    return False


def cast_expr(column: str, old: str, new: str) -> str:
    """Spark expression converting a column's values old -> new like TiDB's MODIFY COLUMN does.

    Fractional -> integral rounds half away from zero (MySQL) instead of Spark's truncation.
    """
    o, n = norm_type(old), norm_type(new)
    src = quote_ident(column)
    if n in INTEGRAL and (o in ("FLOAT", "DOUBLE") or _DEC_RE.match(o)):
        src = f"round({src})"
    return f"CAST({src} AS {new})"
