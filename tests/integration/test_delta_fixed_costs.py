"""Fixed costs a follower pays on every step stay paid once: generated code is compiled once per
table shape, not once per MERGE, and a new table's Delta log checkpoints every 100 commits, not
every 10 (replicator/runtime/spark.py SIZING, replicator/delta/writer.py LOG_PROPERTIES)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.changes import Change
from replicator.delta.writer import CHECKPOINT_INTERVAL, TableWriter
from replicator.tables import ColumnSpec, TableSpec

pytestmark = pytest.mark.integration

TYPES = ("INT", "STRING", "DOUBLE", "DATE", "DECIMAL(12,3)", "BIGINT", "SMALLINT", "TIMESTAMP")


def _spec(i: int) -> TableSpec:
    """Table i: a key and i + 2 columns, so no two tables share generated code."""
    cols = [ColumnSpec("id", "BIGINT", nullable=False)]
    cols += [ColumnSpec(f"c{j}", TYPES[(i + j) % len(TYPES)]) for j in range(i + 2)]
    return TableSpec("db", f"t{i}", tuple(cols), ("id",))


def _changes(spec: TableSpec, keys: range, round_: int) -> list[Change]:
    import datetime as dt
    from decimal import Decimal

    def value(t: str, k: int) -> Any:
        return {"INT": k + round_, "STRING": f"v{k}.{round_}", "DOUBLE": k / 3 + round_,
                "DATE": dt.date(2024, 1, 1 + k % 28), "DECIMAL(12,3)": Decimal(k) / 8, "BIGINT": k * 1000 + round_,
                "SMALLINT": (k + round_) % 100, "TIMESTAMP": dt.datetime(2024, 1, 1, k % 24, tzinfo=dt.UTC)}[t]

    out = [Change((k,), False, {c.name: k if c.name == "id" else value(c.spark_type, k) for c in spec.columns})
           for k in keys]
    if round_ > 1:
        out.append(Change((keys.start - 1,), True, None))  # a delete of a key of the round before
    return out


def test_a_step_over_many_tables_recompiles_nothing(spark: Any, tmp_path: Path) -> None:
    """Eight tables of different shapes, MERGEd round by round as a follower's steps do: the
    third round (same shapes as the second) compiles no class; with Spark's default cache of 100
    classes every MERGE recompiled its 20-30."""
    codegen = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    applier = TableWriter(spark)
    specs = [_spec(i) for i in range(8)]
    for i, spec in enumerate(specs):
        applier.create_table(str(tmp_path / f"t{i}"), spec)
    compiled: list[int] = []
    for round_ in (1, 2, 3):  # 1 inserts into the empty tables; 2 and 3 MERGE
        before = codegen.METRIC_COMPILATION_TIME().getCount()
        for i, spec in enumerate(specs):
            keys = range(round_ * 10, round_ * 10 + 20)
            applier.merge(str(tmp_path / f"t{i}"), f"t{i}", spec, _changes(spec, keys, round_), round_, {"r": round_})
        compiled.append(codegen.METRIC_COMPILATION_TIME().getCount() - before)
    # the MERGEs' classes, compiled once (fewer when earlier tests compiled some of the same)
    assert compiled[1] > 0, compiled
    assert compiled[2] == 0, compiled
    # and the MERGEs did what three steps do: t7's c2 is a STRING of the key and the round
    rows = spark.read.format("delta").load(str(tmp_path / "t7")).collect()
    last_round = {**{k: 1 for k in range(10, 19)}, **{k: 2 for k in range(20, 29)}, **{k: 3 for k in range(30, 50)}}
    assert specs[7].columns[3].spark_type == "STRING"
    assert {r["id"]: r["c2"] for r in rows} == {k: f"v{k}.{r}" for k, r in last_round.items()}


def test_a_new_table_checkpoints_every_hundred_commits(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    spec = _spec(0)
    applier = TableWriter(spark)
    applier.create_table(str(path), spec)
    first = (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    meta = next(json.loads(line)["metaData"] for line in first if '"metaData"' in line)
    assert meta["configuration"]["delta.checkpointInterval"] == str(CHECKPOINT_INTERVAL) == "100"
    assert meta["configuration"]["delta.enableChangeDataFeed"] == "true"  # the profile's stay
    for v in range(1, 12):  # versions 1..11: Delta's default interval would checkpoint at 10
        applier.merge(str(path), "t", spec, _changes(spec, range(v, v + 1), 1), v, {"v": v})
    assert not list((path / "_delta_log").glob("*.checkpoint*")), "checkpointed before 100 commits"
    assert sorted(r["id"] for r in spark.read.format("delta").load(str(path)).collect()) == list(range(1, 12))
