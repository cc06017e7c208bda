"""Column defaults -> Spark literals (backfill of ADD COLUMN) and Delta DEFAULT expressions. Pure."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

import sqlglot
from sqlglot import exp

from replicator.delta.typemap import quote_string
from replicator.errors import DdlError
from replicator.tables import ColumnSpec

_CURRENT_TS = ("CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP")
_FSP_RE = re.compile(r"\((\d)\)")
_ZERO_DATE_RE = re.compile(r"^0{4}-0{2}-0{2}")


def _fsp(col: ColumnSpec) -> int:
    m = _FSP_RE.search(col.tidb_type)
    return int(m.group(1)) if m else 0


def _base_type(col: ColumnSpec) -> str:
    return re.split(r"[\s(]", col.tidb_type.strip().upper(), maxsplit=1)[0] if col.tidb_type else ""


DefaultValue = tuple[Literal["null", "text", "bytes", "now", "today"], str | bytes | None]


def _default_value(text: str) -> DefaultValue:
    """Classify an upstream DEFAULT (MySQL text) into a literal, CURRENT_TIMESTAMP, or NULL."""
    try:
        node = sqlglot.parse_one(text, read="mysql")
    except sqlglot.errors.SqlglotError as exc:
        raise DdlError(f"cannot parse default {text!r}: {exc}") from None
    while isinstance(node, exp.Collate):
        node = node.this
    if isinstance(node, exp.Null):
        return "null", None
    if isinstance(node, exp.Literal):
        return "text", node.this if node.is_string else node.name
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "text", "-" + node.this.name
    if isinstance(node, exp.Boolean):
        return "text", "1" if node.this else "0"
    if isinstance(node, exp.HexString):
        raw = str(node.this)
        return "bytes", bytes.fromhex(raw if len(raw) % 2 == 0 else "0" + raw)
    if isinstance(node, exp.BitString):
        return "text", str(int(str(node.this) or "0", 2))
    if isinstance(node, exp.CurrentTimestamp) or (
        isinstance(node, exp.Anonymous | exp.Func) and node.sql("mysql").split("(")[0].upper() in _CURRENT_TS
    ):
        return "now", None
    if isinstance(node, exp.CurrentDate):
        return "today", None
    if isinstance(node, exp.Column) and node.name.upper() in _CURRENT_TS:
        return "now", None
    raise DdlError(f"default {text!r} is an expression whose value per existing row cannot be reproduced")


def _bytes_literal(data: bytes) -> str:
    return "X'" + data.hex().upper() + "'"


def _pad_time(text: str, fsp: int) -> str:
    head, _, frac = text.partition(".")
    return head + ("." + (frac + "0" * fsp)[:fsp] if fsp else "")


def value_literal(col: ColumnSpec, kind: str, value: str | bytes | None, when: dt.datetime) -> str | None:
    """A Spark literal of the column's Delta type for a classified upstream value (None: NULL)."""
    st = col.spark_type.upper().replace(" ", "")
    base = _base_type(col)
    if kind == "null":
        return None
    if kind in ("now", "today"):
        if st == "TIMESTAMP":
            micro = when.astimezone(dt.UTC)
            micro = micro.replace(microsecond=micro.microsecond - micro.microsecond % 10 ** (6 - _fsp(col)))
            return f"CAST({quote_string(micro.strftime('%Y-%m-%d %H:%M:%S.%f'))} AS TIMESTAMP)"
        if st == "TIMESTAMP_NTZ":
            naive = when.astimezone(dt.UTC).replace(tzinfo=None)
            naive = naive.replace(microsecond=naive.microsecond - naive.microsecond % 10 ** (6 - _fsp(col)))
            return f"CAST({quote_string(naive.strftime('%Y-%m-%d %H:%M:%S.%f'))} AS TIMESTAMP_NTZ)"
        if st == "DATE":
            return f"DATE{quote_string(when.astimezone(dt.UTC).date().isoformat())}"
        raise DdlError(f"CURRENT_TIMESTAMP default for column {col.name!r} of type {col.tidb_type or st}")
    if isinstance(value, bytes):
        if st == "BINARY":
            return _bytes_literal(_pad_binary(col, value))
        if st == "STRING":
            return quote_string(value.decode("utf-8", "replace"))
        return f"CAST({quote_string(str(int.from_bytes(value, 'big')))} AS {col.spark_type})"
    assert isinstance(value, str)
    if st == "STRING":
        if base == "TIME":
            return quote_string(_pad_time(value, _fsp(col)))
        return quote_string(value)
    if st == "BINARY":
        return _bytes_literal(_pad_binary(col, value.encode("utf-8")))
    if st in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ") and _ZERO_DATE_RE.match(value):
        return None  # a zero date has no Delta value: NULL, as --zero-dates null does for rows
    return f"CAST({quote_string(value)} AS {col.spark_type})"


def _pad_binary(col: ColumnSpec, data: bytes) -> bytes:
    m = re.fullmatch(r"BINARY\((\d+)\)", col.tidb_type.strip().upper().replace(" ", ""))
    if m and len(data) < int(m.group(1)):
        return data + b"\0" * (int(m.group(1)) - len(data))
    return data


def zero_value(col: ColumnSpec) -> tuple[str, str | bytes | None]:
    """TiDB's origin default of a NOT NULL column added without DEFAULT: the type's zero value."""
    st = col.spark_type.upper().replace(" ", "")
    base = _base_type(col)
    if col.labels and not col.is_set:
        return "text", col.labels[0]  # ENUM: its first element
    if base == "JSON":
        return "text", "null"
    if base == "TIME":
        return "text", "00:00:00"
    if st in ("STRING",):
        return "text", ""
    if st == "BINARY":
        return "bytes", b""
    if st in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ"):
        return "null", None  # zero date: see value_literal
    return "text", "0"


def backfill_literal(col: ColumnSpec, when: dt.datetime) -> str | None:
    """What existing rows hold in a column just added upstream, as a Spark literal (None: NULL)."""
    if col.default is None:
        if col.nullable:
            return None
        kind, value = zero_value(col)
        return value_literal(col, kind, value, when)
    kind, value = _default_value(col.default)
    if kind == "null":
        return None
    return value_literal(col, kind, value, when)


def delta_default(col: ColumnSpec) -> str | None:
    """A Delta column DEFAULT expression for the upstream default, or None when not expressible."""
    if col.default is None:
        return None
    try:
        kind, value = _default_value(col.default)
    except DdlError:
        return None
    st = col.spark_type.upper().replace(" ", "")
    if kind == "null":
        return "NULL"
    if kind in ("now", "today"):
        return {"TIMESTAMP": "current_timestamp()", "TIMESTAMP_NTZ": "localtimestamp()",
                "DATE": "current_date()"}.get(st)
    try:
        return value_literal(col, kind, value, dt.datetime.now(dt.UTC))
    except DdlError:
        return None
