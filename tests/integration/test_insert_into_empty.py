"""Into a table without data files the applier inserts instead of MERGEing (replicator.delta.writer):
the result, the change data feed and the re-run skip must be the MERGE's."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from replicator.changes import Change
from replicator.delta.writer import TableWriter, delta_ref
from replicator.tables import ColumnSpec, TableSpec

pytestmark = pytest.mark.integration

SPEC = TableSpec("db", "empty", (
    ColumnSpec("id", "BIGINT", nullable=False), ColumnSpec("d", "DATE"), ColumnSpec("m", "DECIMAL(10,2)"),
    ColumnSpec("ts", "TIMESTAMP"), ColumnSpec("weird name", "STRING"),
), ("id",))
WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)


def _up(k: int, v: str) -> Change:
    return Change((k,), False, {"id": k, "d": dt.date(2024, 2, k % 28 + 1), "m": Decimal(k) / 4, "ts": WHEN,
                                "weird name": v})


def _rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def _ops(history: list[Any]) -> list[str]:
    return [h["operation"] for h in sorted(history, key=lambda h: h["version"])]


def test_a_first_window_is_inserted_and_ends_as_a_merge_would(spark: Any, tmp_path: Path) -> None:
    step1 = [_up(1, "a"), _up(2, "b"), Change((3,), True, None), _up(4, "d")]
    step2 = [_up(2, "b2"), Change((4,), True, None), _up(5, "e")]
    fast, plain = TableWriter(spark), TableWriter(spark)
    plain.insert_into_empty = False
    paths = {"fast": str(tmp_path / "fast"), "plain": str(tmp_path / "plain")}
    for applier, path in ((fast, paths["fast"]), (plain, paths["plain"])):
        applier.create_table(path, SPEC)
        first = applier.merge(path, "t", SPEC, step1, 10, {"step": 1})
        again = applier.merge(path, "t", SPEC, step1, 10, {"step": 1})  # a re-run of the same step
        assert not first.skipped and again.skipped
        assert (first.upserts, first.deletes) == (3, 1)
        applier.merge(path, "t", SPEC, step2, 20, {"step": 2})
    assert _rows(spark, paths["fast"]) == _rows(spark, paths["plain"])
    assert [r[0] for r in _rows(spark, paths["fast"])] == [1, 2, 5]
    history = spark.sql(f"DESCRIBE HISTORY {delta_ref(paths['fast'])}").collect()
    assert _ops(history) == ["CREATE TABLE", "WRITE", "MERGE"]
    # the change data feed says the same, change by change, as after two MERGEs
    def cdf(path: str) -> list[tuple[Any, ...]]:
        df = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(path)
        return sorted((r["id"], r["weird name"], r["_change_type"]) for r in df.collect())
    assert cdf(paths["fast"]) == cdf(paths["plain"])


def test_a_table_with_rows_is_merged(spark: Any, tmp_path: Path) -> None:
    applier = TableWriter(spark)
    path = str(tmp_path / "t")
    applier.create_table(path, SPEC)
    applier.merge(path, "t", SPEC, [_up(1, "a")], 1, {})
    assert applier.empty_version(path) is None
    applier.merge(path, "t", SPEC, [_up(1, "a2")], 2, {})
    history = spark.sql(f"DESCRIBE HISTORY {delta_ref(path)}").collect()
    assert _ops(history) == ["CREATE TABLE", "WRITE", "MERGE"]
    assert [(r[0], r[4]) for r in _rows(spark, path)] == [(1, "a2")]


def _meta(ts: int) -> dict[str, Any]:
    return {"replicator": {"step": 1, "applied_ts": ts, "kind": "window"}}


def test_only_deletes_into_an_empty_table_change_nothing_even_when_run_again(spark: Any, tmp_path: Path) -> None:
    # Delta commits nothing for a MERGE that changes nothing, so a restarted run reads back an
    # older applied ts and runs it again: still nothing to change.
    applier = TableWriter(spark)
    path = str(tmp_path / "t")
    applier.create_table(path, SPEC)
    res = applier.merge(path, "t", SPEC, [Change((1,), True, None)], 7, _meta(7))
    assert not res.skipped and res.kind == "merge"
    rerun = TableWriter(spark)
    assert rerun.applied_ts(path, "t") == -1
    assert not rerun.merge(path, "t", SPEC, [Change((1,), True, None)], 7, _meta(7)).skipped
    assert _rows(spark, path) == []


def test_an_insert_already_committed_is_skipped_on_a_rerun_into_an_emptied_table(spark: Any,
                                                                                  tmp_path: Path) -> None:
    # Applied, then a TRUNCATE of the same step emptied the table, then a crash before progress:
    # the rerun (a new process) finds the table empty again and must skip the insert by the
    # applied ts its commit recorded.
    applier = TableWriter(spark)
    path = str(tmp_path / "t")
    applier.create_table(path, SPEC)
    assert not applier.merge(path, "t", SPEC, [_up(1, "a"), _up(2, "b")], 5, _meta(5)).skipped
    spark.sql(f"DELETE FROM {delta_ref(path)}")
    assert applier.empty_version(path) is not None
    applier = TableWriter(spark)
    rerun = applier.merge(path, "t", SPEC, [_up(1, "a"), _up(2, "b")], 5, _meta(5))
    assert rerun.skipped
    assert _rows(spark, path) == []
    assert not applier.merge(path, "t", SPEC, [_up(3, "c")], 6, {}).skipped
    assert [r[0] for r in _rows(spark, path)] == [3]
