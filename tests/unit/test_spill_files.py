"""The spill's files (sources/spill.py) without Spark: rows written as the Spark reader's events
(every row buffered, its position, the watermark before it, a record's rows numbered in order),
a file per table and spill, deleted once applied, and a crashed run's left behind deleted by the
next run."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from replicator.events import Position
from replicator.sources import executor as ex
from replicator.sources.spill import SpillFiles
from tests.unit.test_loop import ins


def no_spark() -> object:
    raise AssertionError("Spark is started only to read a span")


def test_rows_are_written_as_the_spark_readers_events(tmp_path: Path) -> None:
    spill = SpillFiles(str(tmp_path / "spill"), no_spark)  # type: ignore[arg-type]
    spill.write(("s", "t"), "topic", [(ins(10, 1), 0, 7, 5), (ins(10, 2), 0, 7, 5), (ins(12, 3), 1, 3, 9)])
    spill.write(("s", "u"), "topic", [(ins(11, 4), 2, 1, 0)])
    assert spill.rows == 4
    files = sorted(Path(spill.root).glob("*.parquet"))
    assert len(files) == 2
    table = pq.read_table(files[0])
    assert table.schema == ex.EVENTS_SCHEMA
    got = table.to_pylist()
    assert [(r["partition"], r["offset"], r["idx"], r["ts"], r["wm_before"]) for r in got] == [
        (0, 7, 0, 10, 5), (0, 7, 1, 10, 5), (1, 3, 0, 12, 9)]
    assert {(r["kind"], r["drop"], r["schema"], r["table"]) for r in got} == {(ex.ROW, ex.KEEP, "s", "t")}
    row = ex.row_from_payload(got[2]["payload"], commit_ts=12, schema="s", table="t",
                              position=Position("topic", 1, 3))
    assert row == ins(12, 3) and row.columns[0].value == 3


def test_applied_rows_are_deleted_and_a_crashed_runs_too(tmp_path: Path) -> None:
    root = str(tmp_path / "spill")
    crashed = SpillFiles(root, no_spark)  # type: ignore[arg-type]
    crashed.write(("s", "t"), "topic", [(ins(10, 1), 0, 0, 0)])
    run = SpillFiles(root, no_spark)  # type: ignore[arg-type]
    run.forget_crashed()
    assert not Path(crashed.root).exists()
    run.write(("s", "t"), "topic", [(ins(10, 1), 0, 0, 0)])
    run.clear()
    assert run.rows == 0 and not list(Path(root).rglob("*.parquet"))
    run.write(("s", "t"), "topic", [(ins(20, 2), 0, 1, 10)])
    run.close()
    assert not Path(root).exists()


def test_a_span_of_a_table_never_spilled_is_a_bug_not_a_guess(tmp_path: Path) -> None:
    spill = SpillFiles(str(tmp_path / "spill"), no_spark)  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        spill.source(("s", "t"))
