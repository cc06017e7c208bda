"""A spilled table's span read back with Spark (sources/spill.py): rows decoded under the table's
spec as they were spilled are read as plain Parquet when the span's spec is the same, and the
events (decoded on the executors) otherwise; typed rows skip the last-change-per-key window (the
driver's index names the superseded ones) and its count. Every way gives what the window over the
events gives."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from replicator.delta.session import frame_summary
from replicator.events import Column, Flag, Op, RowChange, TypeCode
from replicator.sources.spill import SpillFiles
from replicator.tables import ColumnSpec, TableSpec

T = ("s", "t")
SPEC = TableSpec("s", "t", (ColumnSpec("id", "bigint"), ColumnSpec("name", "string")), ("id",))
COMMENTED = dataclasses.replace(SPEC, comment="from its CREATE TABLE", columns=(
    dataclasses.replace(SPEC.columns[0], tidb_type="bigint(20)", nullable=False), SPEC.columns[1]))
WIDER = dataclasses.replace(SPEC, columns=(*SPEC.columns, ColumnSpec("note", "string")))


def _insert(ts: int, key: int, name: str, *extra: Column) -> RowChange:
    return RowChange(ts, "s", "t", Op.INSERT, (Column("id", TypeCode.LONGLONG, Flag.HANDLE_KEY, key),
                                                Column("name", TypeCode.VARCHAR, 0, name), *extra))


def _read(spill: SpillFiles, spec: TableSpec) -> tuple[list[tuple[Any, ...]], str]:
    frame = spill.source(T).changes(spec, T, 99, 300)
    return sorted(tuple(r) for r in frame.collect()), frame._jdf.queryExecution().optimizedPlan().toString()


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("duplicate", [False, True])
def test_spilled_rows_read_typed_or_as_events_equal_the_window(spark: Any, tmp_path: Path, duplicate: bool,
                                                                typed: bool) -> None:
    rows = [_insert(100 + k, k, f"n{k}") for k in range(40)]
    if duplicate:  # an upsert sent as an INSERT: key 7 again, later; the window keeps the last
        rows.append(_insert(200, 7, "again"))
    spill = SpillFiles(str(tmp_path / "spill"), lambda: spark, lambda *_: SPEC if typed else None)
    spill.write(T, "topic", [(r, 0, i, 0) for i, r in enumerate(rows[:25])])
    spill.write(T, "topic", [(r, 1, i, 0) for i, r in enumerate(rows[25:])])
    try:
        got, plan = _read(spill, SPEC)
        assert ("Window" in plan) != typed  # typed: the driver's index names the superseded rows
        assert ("MapInArrow" in plan) != typed
        last = {r.columns[0].value: r.columns[1].value for r in rows}  # the last change per key wins
        # _c0, _c1, _op (0: an upsert), _fresh (the key's first change an INSERT), _pre (no pre-image);
        # typed, the last two are the driver's summary's
        assert got == sorted((k, name, 0, *(() if typed else (1, 0))) for k, name in last.items())
        source = spill.source(T)
        summary = source.summary(SPEC, T, 99, 300)
        assert (summary is not None) == typed
        if summary is not None:  # what Spark would have counted, without the job
            counted = frame_summary(source.changes(SPEC, T, 99, 300).withColumn("_fresh", F.lit(1))
                                    .withColumn("_pre", F.lit(0)), SPEC)
            assert dataclasses.replace(summary, key_hashes=None) == counted
            assert summary.key_hashes == {hash((k,)) for k in last}
        if typed:  # the catalog's spec differs from the inferred one only where decoding does not look
            assert "MapInArrow" not in _read(spill, COMMENTED)[1]
        if typed:  # a DDL added a column between the spill and the step: the events, under the new spec
            got, plan = _read(spill, WIDER)
            assert "MapInArrow" in plan
            assert got == sorted((k, name, None, 0, 1, 0) for k, name in last.items())
    finally:
        spill.close()


def test_a_row_the_spec_does_not_decode_leaves_the_table_to_its_events(spark: Any, tmp_path: Path) -> None:
    """A row with a column the spill-time spec lacks (its ADD COLUMN still in the buffer): the
    span, applied after that DDL, decodes the events under the spec it has by then."""
    spill = SpillFiles(str(tmp_path / "spill"), lambda: spark, lambda *_: SPEC)
    spill.write(T, "topic", [(_insert(100, 1, "a"), 0, 0, 0)])
    assert len(list(Path(spill.root).glob("*.parquet"))) == 2  # its events, and the rows typed
    spill.write(T, "topic", [(_insert(101, 2, "b", Column("note", TypeCode.VARCHAR, 0, "x")), 0, 1, 0)])
    try:
        got, plan = _read(spill, WIDER)
        assert "MapInArrow" in plan
        assert got == [(1, "a", None, 0, 1, 0), (2, "b", "x", 0, 1, 0)]
        assert len(list(Path(spill.root).glob("*.parquet"))) == 2  # the events; the typed file went
    finally:
        spill.close()
    assert not Path(spill.parent).exists()


def test_a_typed_span_of_at_most_driver_rows_is_read_on_the_driver(spark: Any, tmp_path: Path) -> None:
    """A span whose files hold at most `driver_rows` typed changes is read back with Arrow and handed to Spark as
    rows in memory are, without planning a Parquet read; one change more and Spark reads the files.
    Both give the same net changes (a redelivered key among them)."""
    rows = [_insert(100 + k, k, f"n{k}") for k in range(40)] + [_insert(200, 7, "again")]
    got: dict[int, tuple[list[tuple[Any, ...]], str]] = {}
    for limit in (0, len(rows) - 1, len(rows)):
        spill = SpillFiles(str(tmp_path / f"spill{limit}"), lambda: spark, lambda *_: SPEC, driver_rows=limit)
        spill.write(T, "topic", [(r, 0, i, 0) for i, r in enumerate(rows[:25])])
        spill.write(T, "topic", [(r, 1, i, 0) for i, r in enumerate(rows[25:])])
        try:
            got[limit] = _read(spill, SPEC)
        finally:
            spill.close()
    last = {r.columns[0].value: r.columns[1].value for r in rows}
    assert got[0][0] == got[len(rows) - 1][0] == got[len(rows)][0] == sorted((k, n, 0) for k, n in last.items())
    assert "parquet" in got[0][1].lower() and "parquet" in got[len(rows) - 1][1].lower()
    assert "parquet" not in got[len(rows)][1].lower(), got[len(rows)][1]
