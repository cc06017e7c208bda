"""The spill's files (sources/spill.py) without Spark: rows written as the Spark reader's events
(every row buffered, its position, the watermark before it, a record's rows numbered in order),
a file per table and spill, deleted once applied, and a crashed run's left behind deleted by the
next run; a keyed table's rows also written typed under its spec, while every spill of it can be."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replicator.events import Column, Flag, Op, Position, RowChange, TypeCode
from replicator.sources import executor as ex
from replicator.sources.spill import SpillFiles
from replicator.sources.spill_index import ROW_COLUMN
from replicator.tables import ColumnSpec, TableSpec
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



T = ("s", "t")
SPEC = TableSpec("s", "t", (ColumnSpec("id", "int"), ColumnSpec("v", "bigint")), ("id",))
WIDER = TableSpec("s", "t", (*SPEC.columns, ColumnSpec("w", "string")), ("id",))


def _row(op: Op, key: int, *, name: str = "v") -> RowChange:
    cols = (Column("id", TypeCode.LONG, Flag.HANDLE_KEY, key), Column(name, TypeCode.LONG, 0, key * 10))
    return RowChange(10 + key, "s", "t", op, () if op is Op.DELETE else cols, cols if op is Op.DELETE else ())


@pytest.mark.parametrize(("rows", "expected"), [
    ([[_row(Op.INSERT, 1), _row(Op.INSERT, 2)], [_row(Op.INSERT, 3)]], (3, 0, True, [])),
    ([[_row(Op.INSERT, 1)], [_row(Op.INSERT, 2), _row(Op.INSERT, 1)]], (2, 0, True, [0])),  # redelivered
    ([[_row(Op.INSERT, 1), _row(Op.UPDATE, 2)]], (2, 0, False, [])),
    ([[_row(Op.INSERT, 1), _row(Op.DELETE, 2)]], (2, 1, False, [])),
    ([[_row(Op.INSERT, 1)], [_row(Op.INSERT, 2, name="w")]], None),  # a column the spec lacks: the events
])
def test_rows_are_typed_under_their_spec_and_their_spans_summarized(
        tmp_path: Path, rows: list[list[RowChange]], expected: tuple[int, int, bool, list[int]] | None) -> None:
    """A table's rows are also written as the typed changes of its spec, numbered; a span reads
    them when every spill of the table could be (else its events), and the driver's index says
    what it holds (changes, deletes, all fresh, which rows a later change supersedes). A clear
    forgets both."""
    spill = SpillFiles(str(tmp_path / "spill"), no_spark, lambda *_: SPEC)  # type: ignore[arg-type]
    for n, chunk in enumerate(rows):
        spill.write(T, "topic", [(r, 0, 10 * n + i, 0) for i, r in enumerate(chunk)])
    typed = spill.typed(T)
    files = sorted(Path(spill.root).glob("*.parquet"))
    assert len(files) == len(rows) * (2 if typed is not None else 1)  # a typed file went with its table's typing
    if expected is None:
        assert typed is None
    else:
        assert typed is not None and typed.shape == ex.change_shape(SPEC)
        assert set(typed.files) <= {str(f) for f in files}
        got = pq.read_table(typed.files[0])
        assert got.schema == ex.change_schema(SPEC).append(pa.field(ROW_COLUMN, pa.int64()))
        assert got.column("_c0").to_pylist() == [r.image[0].value for r in rows[0]]
        assert got.column(ROW_COLUMN).to_pylist() == list(range(len(rows[0])))
        plan = typed.index.plan(0, 100)
        assert plan is not None
        s = plan.summary
        assert (s.rows, s.deletes, s.fresh, plan.superseded) == expected
        keys = {r.image[0].value for chunk in rows for r in chunk}
        assert s.key_hashes == {hash((k,)) for k in keys}
        assert s.bounds == {0: (min(keys), max(keys))}
        assert typed.index.plan(11, 12).summary.rows == 1  # type: ignore[union-attr]  # a span: key 2's ts only
    spill.clear()
    assert spill.typed(T) is None and not list(Path(spill.root).glob("*.parquet"))


@pytest.mark.parametrize("spec_of", [lambda *_: None, lambda t, r, d: SPEC if r.commit_ts < 12 else WIDER])
def test_a_table_without_a_spec_or_whose_spec_changed_reads_its_events(tmp_path: Path, spec_of: Any) -> None:
    spill = SpillFiles(str(tmp_path / "spill"), no_spark, spec_of)  # type: ignore[arg-type]
    spill.write(T, "topic", [(_row(Op.INSERT, 1), 0, 0, 0)])
    spill.write(T, "topic", [(_row(Op.INSERT, 2), 0, 1, 0)])
    assert spill.typed(T) is None
    assert len(list(Path(spill.root).glob("*.parquet"))) == 2
