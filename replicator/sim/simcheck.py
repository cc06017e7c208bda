"""Compare a warehouse's tables with a simulator's expected state (``replicator.sim.simulate``).

Why: a simulated run is only useful if anyone can check it against the truth. The expected file
holds rows in the JSON conventions of ``replicator.codec.render``; the warehouse holds Delta
values. Both sides are brought to one canonical form per Delta column type (numbers as exact
Decimals so 1.5 == 1.50 and an unsigned BIGINT's int equals its DECIMAL(20,0); FLOAT compared as
float32; TIMESTAMP as an instant; bytes as bytes), then compared row by row by handle key.

``compare_tables`` is pure (unit-tested); ``check_warehouse`` reads the tables with Spark.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicator.codec.render import value_to_json
from replicator.sim.expected import ExpectedState

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.warehouse import TableEntry

MAX_DIFFS_PER_TABLE = 20
_F32 = struct.Struct("<f")
_NUMERIC = ("TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL")
_EXACT = Context(prec=200)  # normalize() must never round a DECIMAL(38,s) or BIGINT UNSIGNED value


@dataclass(frozen=True)
class ActualTable:
    """A replicated table as read back: rows in render.py JSON conventions, key, Delta types."""

    rows: list[dict[str, Any]]
    key: list[str]
    types: dict[str, str]  # column -> Delta (Spark SQL) type


def _timestamp(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def canonical(value: Any, spark_type: str) -> Any:
    """A hashable, comparable form of a JSON-convention cell for a column of ``spark_type``."""
    if value is None:
        return None
    st = spark_type.upper()
    try:
        if st.startswith(_NUMERIC) and isinstance(value, int | str | float):
            return _EXACT.normalize(Decimal(value) if isinstance(value, float) else Decimal(str(value)))
        if st == "FLOAT" and isinstance(value, int | float):
            return _F32.unpack(_F32.pack(float(value)))[0]
        if st == "DOUBLE" and isinstance(value, int | float):
            return float(value)
        if st == "TIMESTAMP" and isinstance(value, str):
            return _timestamp(value)
        if st == "TIMESTAMP_NTZ" and isinstance(value, str):
            return dt.datetime.fromisoformat(value)
    except (InvalidOperation, ValueError, OverflowError, struct.error):
        return ("unparsable", repr(value))
    if isinstance(value, dict) and set(value) == {"base64"}:
        return ("bytes", base64.b64decode(value["base64"]))
    if isinstance(value, list | dict):
        return ("json", repr(value))
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def compare_tables(expected: ExpectedState, actual: Mapping[str, ActualTable], *,
                   max_diffs: int = MAX_DIFFS_PER_TABLE) -> list[str]:
    """Every difference between the expected tables and the actual ones, as readable lines."""
    diffs: list[str] = []
    for name in sorted(set(actual) - set(expected.tables)):
        diffs.append(f"{name}: table exists in the warehouse ({len(actual[name].rows)} rows) but not upstream")
    for name in sorted(expected.tables):
        table = actual.get(name)
        if table is None:
            diffs.append(f"{name}: table missing from the warehouse ({len(expected.tables[name])} rows expected)")
            continue
        diffs.extend(_compare_table(name, expected, table, max_diffs))
    return diffs


def _compare_table(name: str, expected: ExpectedState, table: ActualTable, max_diffs: int) -> list[str]:
    out: list[str] = []
    schema = expected.schemas.get(name, {})
    want_cols = [c[0] for c in schema["columns"]] if schema else sorted(table.types)
    key = list(schema.get("key", table.key))
    if set(want_cols) != set(table.types):
        missing = sorted(set(want_cols) - set(table.types))
        extra = sorted(set(table.types) - set(want_cols))
        out.append(f"{name}: columns differ: missing {missing}, unexpected {extra}")
    if key != list(table.key):
        out.append(f"{name}: key differs: expected {key}, warehouse {list(table.key)}")
    types = table.types

    def row_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(canonical(row.get(k), types.get(k, "STRING")) for k in key)

    want = {row_key(r): r for r in expected.tables[name]}
    have: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in table.rows:
        k = row_key(r)
        if k in have:
            out.append(f"{name}: duplicate key {dict(zip(key, k, strict=True))} in the warehouse")
        have[k] = r
    problems: list[str] = []
    for k in want.keys() - have.keys():
        problems.append(f"{name}: missing row {_key_text(key, want[k])}")
    for k in have.keys() - want.keys():
        problems.append(f"{name}: unexpected row {_key_text(key, have[k])}")
    common = [c for c in want_cols if c in types]
    for k in want.keys() & have.keys():
        w, h = want[k], have[k]
        for c in common:
            if canonical(w.get(c), types[c]) != canonical(h.get(c), types[c]):
                problems.append(f"{name}: row {_key_text(key, w)} column {c}: expected {_show(w.get(c))}, "
                                f"warehouse {_show(h.get(c))}")
    problems.sort()
    if len(problems) > max_diffs:
        problems = [*problems[:max_diffs], f"{name}: ... and {len(problems) - max_diffs} more differences"]
    return out + problems


def _key_text(key: Sequence[str], row: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_show(row.get(k))}" for k in key)


# ---------------------------------------------------------------------------------------------
# Reading a warehouse with Spark


def spark_value_to_json(value: Any, spark_type: str) -> Any:
    """A collected Spark value -> render.py JSON conventions (TIMESTAMP arrives as epoch micros)."""
    if value is None:
        return None
    if spark_type.upper() == "TIMESTAMP" and isinstance(value, int):
        value = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=value)
    if isinstance(value, bytearray | memoryview):
        value = bytes(value)
    if isinstance(value, bool):
        value = int(value)
    return value_to_json(value)


def read_delta_table(spark: SparkSession, path: str | Path, key: Sequence[str], *,
                     version: int | None = None) -> ActualTable:
    """One Delta table (any writer's) as an `ActualTable` keyed by ``key`` (at a Delta `version`)."""
    from replicator.mysql.tokens import quote_ident

    reader = spark.read.format("delta")
    df = (reader.option("versionAsOf", version) if version is not None else reader).load(str(path))
    types = {f.name: f.dataType.simpleString().upper() for f in df.schema.fields}
    exprs = [f"unix_micros({quote_ident(c)}) AS {quote_ident(c)}" if t == "TIMESTAMP" else quote_ident(c)
             for c, t in types.items()]
    rows = [{c: spark_value_to_json(r[c], types[c]) for c in types} for r in df.selectExpr(*exprs).collect()]
    return ActualTable(rows, list(key), types)


def read_warehouse(spark: SparkSession, warehouse: str | Path) -> dict[str, ActualTable]:
    """Every live table of a warehouse (a sharded one's: every shard's), keyed ``schema.table``."""
    return {f"{entry.schema_name}.{entry.table}": read_delta_table(spark, entry.path, entry.table_spec.key)
            for entry in live_tables(warehouse)}


def live_tables(warehouse: str | Path) -> list[TableEntry]:
    """The live tables of a warehouse, of every shard when it is sharded."""
    from replicator.delta.shardview import ShardedView
    from replicator.warehouse import Warehouse

    wh = Warehouse(warehouse)
    view = None if wh.state_path.exists() else ShardedView.read(wh)
    if view is not None:
        return [entry for _shard, entry in view.tables()]
    return wh.load_state().live_tables()


def applied_watermark(warehouse: str | Path) -> int:
    """The warehouse's applied watermark; a sharded one's: the smallest of its shards' (the
    point every shard has reached)."""
    from replicator.delta.shardview import ShardedView
    from replicator.warehouse import Warehouse

    wh = Warehouse(warehouse)
    view = None if wh.state_path.exists() else ShardedView.read(wh)
    return view.applied_ts if view is not None else wh.load_state().applied_ts


def read_snapshot(spark: SparkSession, warehouse: str | Path, watermark: int) -> dict[str, ActualTable]:
    """Every table of a sharded warehouse as of one consistent point (`ShardedView.watermarks()`),
    keyed ``schema.table`` (ValueError when the shards' tables never held that point together)."""
    from replicator.delta.shardview import ShardedView, table_versions_at
    from replicator.warehouse import Warehouse

    view = ShardedView.read(Warehouse(warehouse))
    if view is None:
        raise ValueError(f"{warehouse} is not sharded")
    return {f"{e.schema_name}.{e.table}": read_delta_table(spark, e.path, e.table_spec.key, version=v)
            for e, v in table_versions_at(view, watermark)}


def check_warehouse(spark: SparkSession, warehouse: str | Path, expected: ExpectedState | str | Path) -> list[str]:
    """Differences between a warehouse and an expected state (an ExpectedState or its JSON file);
    empty when they agree. The warehouse must also have applied the stream's final watermark."""

    exp = expected if isinstance(expected, ExpectedState) else ExpectedState.load(expected)
    diffs: list[str] = []
    applied = applied_watermark(warehouse)
    if applied < exp.watermark:
        diffs.append(f"warehouse applied watermark {applied} is behind the stream's final resolved ts "
                     f"{exp.watermark}: not caught up")
    return diffs + compare_tables(exp, read_warehouse(spark, warehouse))
