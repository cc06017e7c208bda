"""`BatchWindower` (the Spark reader's) decides the same steps and restart cursors as the driver
reader's `Windower` over the same events: it gets only the resolved and DDL events, and asks a
row index (here in memory; on Spark, aggregates over the executors' rows) about the rows."""

from __future__ import annotations

from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.delta.ddl.scope import ddl_scope
from replicator.engine.batch import BatchWindower
from replicator.engine.rows import RowSpan
from replicator.engine.window import Step, Windower, WindowStats
from replicator.events import TP, Resolved, RowChange
from replicator.progress import Progress
from replicator.tables import DdlScope, TableName
from tests.streamgen import generate, interleave


class MemoryIndex:
    """The row index over rows in memory: (table, commit ts, partition, offset, watermark before)."""

    def __init__(self, rows: list[tuple[TableName, int, int, int, int]]) -> None:
        self.rows = rows

    def first_after(self, scope: DdlScope, ts: int, hi: int) -> int | None:
        found = [t for table, t, *_ in self.rows if scope.covers(table) and ts < t <= hi]
        return min(found) if found else None

    def tables_in(self, lo: int, hi: int) -> list[TableName]:
        return sorted({table for table, t, *_ in self.rows if lo < t <= hi})

    def restart_points(self, above: int) -> Iterable[tuple[int, int, int]]:
        return [(p, o, wm) for _, t, p, o, wm in self.rows if t > above]


def _steps(w: Windower) -> list[tuple[int, tuple[str, ...], list[TableName], dict[TP, tuple[int, int]]]]:
    out = []
    while (step := w.next_step()) is not None:
        tables = sorted(step.rows)
        w.commit(step)
        w.checkpoint()
        cursors = {p: (c.offset, c.watermark) for p, c in w.progress.cursors.items()}
        out.append((step.hi, tuple(d.query for d in step.ddls), tables, cursors))
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), cut=st.floats(0.2, 1.0), truncate=st.sampled_from([0.0, 0.1]))
def test_the_same_steps_and_cursors_as_the_driver_readers_windower(seed: int, cut: float, truncate: float) -> None:
    stream = generate(seed, n_txn=40, n_partitions=3, n_tables=3, truncate_prob=truncate)
    arrivals = interleave(stream, seed)
    arrivals = arrivals[: max(1, int(len(arrivals) * cut))]  # what a batch read so far
    parts = [TP("t", p) for p in range(3)]
    driver = Windower(parts, Progress(), scope_of=ddl_scope)
    for p, o, ev in arrivals:
        driver.offer(TP("t", p), o, [ev])
    kept = [(table, b.row.commit_ts, b.partition.partition, b.offset, b.wm_before)
            for table, buf in driver._rows.items() for b in buf]  # private: the driver's buffer, as the index
    batch = BatchWindower("t", parts, Progress(), ddl_scope, MemoryIndex(kept), WindowStats())
    for p, o, ev in arrivals:
        if not isinstance(ev, RowChange):
            batch.offer(TP("t", p), o, [ev])
    for tp in parts:
        batch.read_to(tp, driver.next_offsets()[tp])
    got, want = _steps(batch), _steps(driver)
    assert got == want
    for step in got:
        assert all(isinstance(t, tuple) for t in step[2])


def test_a_span_step_names_its_commit_ts_range() -> None:
    index = MemoryIndex([(("s", "a"), 5, 0, 0, 0), (("s", "b"), 9, 0, 1, 0)])
    w = BatchWindower("t", [TP("t", 0)], Progress(), ddl_scope, index, WindowStats())
    w.offer(TP("t", 0), 2, [Resolved(7)])
    step = w.next_step()
    assert isinstance(step, Step) and step.rows == {("s", "a"): RowSpan(0, 7)}  # b's row is above the watermark
