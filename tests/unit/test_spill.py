"""A full buffer's complete rows spilled (`Windower.spill_ready`, `ControlLoop.spill`): they leave
memory, hold the restart cursors back until applied, never cross a pending DDL, and come back as
one step of spans; a catch-up under a small buffer then makes steps as large as the spill allows,
with every row applied exactly once and in order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.engine.loop import ControlLoop, LoopOptions
from replicator.engine.rows import RowSpan
from replicator.engine.window import Step, Windower
from replicator.events import TP, DdlEvent, Event, Resolved, RowChange
from replicator.progress import Progress
from replicator.tables import TableName
from tests.unit.test_backpressure import PausableSource, expected_rows, skewed
from tests.unit.test_loop import Clock, FakeApplier, FakeSource, ins, res

P0, P1 = TP("t", 0), TP("t", 1)


class FakeSpill:
    """The rows written, in memory (the real one writes Parquet files: sources/spill.py)."""

    vouched = True

    def __init__(self) -> None:
        self.rows = 0
        self.tables: dict[TableName, list[tuple[RowChange, int, int, int]]] = {}
        self.topics: dict[TableName, str] = {}
        self.writes = 0

    def write(self, table: TableName, topic: str, rows: Sequence[tuple[RowChange, int, int, int]],
              ddls: Sequence[DdlEvent] = ()) -> None:
        assert self.topics.setdefault(table, topic) == topic  # one topic a table
        self.tables.setdefault(table, []).extend(rows)
        self.rows += len(rows)
        self.writes += 1

    def source(self, table: TableName) -> FakeSpill:
        return self

    def clear(self) -> None:
        self.tables, self.topics, self.rows = {}, {}, 0

    # what a step's span reads
    def rows_of(self, table: TableName, lo: int, hi: int) -> list[RowChange]:
        return [r for r, *_ in self.tables.get(table, []) if lo < r.commit_ts <= hi]


def rows_of(step: Step) -> list[tuple[int, int]]:
    """(commit ts, key) of a step's rows, spans read from their spill."""
    out: list[tuple[int, int]] = []
    for table, rows in step.rows.items():
        if isinstance(rows, RowSpan):
            source = rows.where()
            assert isinstance(source, SpillingApplier.Spill)
            rows = source.rows_of(table, rows.lo, rows.hi)
        out += [(r.commit_ts, (r.columns or r.old_columns)[0].value) for r in rows]
    return out


class SpillingApplier(FakeApplier):
    """Reads a span's rows as it is applied (before the spill is cleared)."""

    Spill = FakeSpill

    def __init__(self) -> None:
        super().__init__()
        self.read: list[list[tuple[int, int]]] = []

    def apply(self, step: Step) -> dict[str, object]:
        self.read.append(rows_of(step))
        return super().apply(step)

    def all_rows(self) -> list[tuple[int, int]]:
        return [r for step in self.read for r in step]


ADD_COLUMN = 5  # TiDB's code (not one the pipeline branches on: events.DdlCode)


def ddl(ts: int) -> DdlEvent:
    return DdlEvent(ts, "s", "t", ADD_COLUMN, "ALTER TABLE t ADD COLUMN c INT")


def test_complete_rows_leave_memory_and_hold_the_restart_cursor() -> None:
    spill = FakeSpill()
    w = Windower([P0, P1], Progress(), spill=spill)
    w.offer(P0, 0, [ins(10, 1)])
    w.offer(P1, 0, [ins(12, 2)])
    w.offer(P0, 1, [Resolved(20)])
    w.offer(P1, 1, [Resolved(20)])
    w.offer(P0, 2, [ins(25, 3)])  # above W: stays
    assert w.spill_ready() == 2
    assert (w.buffered_rows, w.spilled_rows) == (1, 2)
    w.checkpoint()
    assert {p: c.offset for p, c in w.progress.cursors.items()} == {P0: 0, P1: 0}  # not applied yet
    w.offer(P1, 2, [ins(18, 4)])  # a replay (below its partition's watermark): dropped
    w.offer(P0, 3, [Resolved(30)])
    w.offer(P1, 3, [Resolved(30)])
    step = w.next_step()
    assert step is not None and step.hi == 30 and not step.ddls
    # a table's span starts right before its first spilled row (no empty segment before a DDL there)
    assert all(isinstance(r, RowSpan) and (r.lo, r.hi) == (9, 30) for r in step.rows.values())
    assert sorted(r.columns[0].value for r in spill.rows_of(("s", "t"), 0, 30)) == [1, 2, 3]
    w.commit(step)
    w.checkpoint()
    assert (w.applied_ts, w.spilled_rows, spill.rows) == (30, 0, 0)
    assert {p: c.offset for p, c in w.progress.cursors.items()} == {P0: 4, P1: 4}
    assert w.next_step() is None


def test_the_spill_crosses_a_pending_ddl_and_its_steps_split_there() -> None:
    spill = FakeSpill()
    w = Windower([P0], Progress(), spill=spill)
    w.offer(P0, 0, [ins(10, 1)])
    w.offer(P0, 1, [ddl(15)])
    w.offer(P0, 2, [ins(20, 2)])
    w.offer(P0, 3, [Resolved(30)])
    assert w.spill_ready() == 2 and not w.ready_in_memory
    # The DDL changes the columns of the row after it: its step ends before that row (`Step`),
    # a spilled one as well as one in memory.
    first = w.next_step()
    assert first is not None and first.hi == 19 and [d.commit_ts for d in first.ddls] == [15]
    assert list(first.rows.values()) == [RowSpan(9, 19)]
    w.commit(first)
    w.checkpoint()
    assert w.progress.cursors[P0].offset == 0  # the row at 20 is not applied yet
    second = w.next_step()
    assert second is not None and second.hi == 30 and not second.ddls
    assert list(second.rows.values()) == [RowSpan(19, 30)]
    assert [r.commit_ts for r in spill.rows_of(("s", "t"), 19, 30)] == [20]
    w.commit(second)
    w.checkpoint()
    assert w.spilled_rows == 0 and w.progress.cursors[P0].offset == 4


def test_a_tables_rows_from_a_second_topic_end_the_spill_before_them() -> None:
    a, b = TP("a", 0), TP("b", 0)
    spill = FakeSpill()
    w = Windower([a, b], Progress(), spill=spill)
    w.offer(a, 0, [ins(10, 1)])
    w.offer(b, 0, [ins(20, 2)])  # the same table, on another topic
    w.offer(a, 1, [Resolved(30)])
    w.offer(b, 1, [Resolved(30)])
    assert w.spill_ready() == 1
    step = w.next_step()
    assert step is not None and step.hi == 19
    w.commit(step)
    rest = w.next_step()
    assert rest is not None and rest.hi == 30
    assert [r.commit_ts for rows in rest.rows.values() for r in rows] == [20]  # type: ignore[union-attr]


def catch_up(source: FakeSource, buffer: int, spill_rows: int) -> tuple[SpillingApplier, Windower]:
    applier = SpillingApplier()
    windower = Windower(source.partitions(), Progress(), spill=FakeSpill())
    source.start({p: None for p in source.partitions()})
    loop = ControlLoop(source, source.decode, applier, windower,
                       LoopOptions(until_caught_up=True, max_buffer_rows=buffer, spill_rows=spill_rows),
                       clock=source.clock)
    loop.run()
    return applier, windower


def test_a_catch_up_under_a_small_buffer_applies_its_backlog_in_one_step() -> None:
    records = skewed(windows=100, hot=5)  # 600 rows
    without, _ = catch_up(PausableSource(Clock(), records, per_poll=10), buffer=40, spill_rows=0)
    spilled, windower = catch_up(PausableSource(Clock(), records, per_poll=10), buffer=40, spill_rows=10_000)
    want = expected_rows(records)
    assert sorted(without.all_rows()) == want and sorted(spilled.all_rows()) == want
    assert len(without.steps) >= 15
    assert len(spilled.steps) == 1 and len(spilled.read[0]) == 600
    assert windower.buffered_rows == 0 and windower.spilled_rows == 0


def test_the_spill_cap_makes_a_step_each_time_it_is_reached() -> None:
    records = skewed(windows=100, hot=5)
    applier, _ = catch_up(PausableSource(Clock(), records, per_poll=10), buffer=40, spill_rows=200)
    assert 3 <= len(applier.steps) <= 6
    assert all(len(rows) <= 200 + 40 for rows in applier.read)
    assert sorted(applier.all_rows()) == expected_rows(records)


def test_a_follower_applies_its_spill_at_the_interval() -> None:
    clock = Clock()
    records: dict[int, list[list[Event] | bytes]] = {0: [[ins(10 + i, i)] for i in range(6)] + [res(100)]}
    source = FakeSource(clock, records, per_poll=10)
    applier = SpillingApplier()
    windower = Windower(source.partitions(), Progress(), spill=FakeSpill())
    source.start({p: None for p in source.partitions()})
    loop = ControlLoop(source, source.decode, applier, windower,
                       LoopOptions(until_caught_up=False, max_buffer_rows=2, spill_rows=1000, flush_interval_s=1.0),
                       clock=clock)
    loop.on_tick = lambda: loop.request_stop() if applier.steps else None
    loop.run()
    assert [len(rows) for rows in applier.read] == [6]


@settings(max_examples=60, deadline=None)
@given(windows=st.integers(1, 12), hot=st.integers(1, 9), cold=st.integers(0, 4), per_poll=st.integers(1, 7),
       buffer=st.integers(1, 30), spill_rows=st.integers(0, 60), ddl_at=st.integers(0, 12))
def test_spilling_never_loses_or_repeats_a_row(windows: int, hot: int, cold: int, per_poll: int, buffer: int,
                                              spill_rows: int, ddl_at: int) -> None:
    records = skewed(windows, hot, cold)
    if 0 < ddl_at <= windows:  # a DDL in the hot partition's stream, before the window's resolved event
        hot_rows: Mapping[int, list[list[Event] | bytes]] = records
        stream = hot_rows[0]
        cut = [i for i, evs in enumerate(stream) if isinstance(evs, list) and isinstance(evs[0], Resolved)][ddl_at - 1]
        stream.insert(cut, [ddl(1000 * ddl_at + 400)])
    applier, windower = catch_up(PausableSource(Clock(), records, per_poll=per_poll), buffer, spill_rows)
    want = expected_rows(records)
    assert sorted(applier.all_rows()) == want and len(applier.all_rows()) == len(want)
    his = [s.hi for s in applier.steps]
    assert his == sorted(his) and len(set(his)) == len(his)
    done = 0
    for step, rows in zip(applier.steps, applier.read, strict=True):
        assert all(done < ts <= step.hi for ts, _ in rows)
        for d in step.ddls:  # it changes every table's columns (scope): its step ends before the rows after it
            assert all(ts < d.commit_ts for ts, _ in rows)
        done = step.hi
    assert windower.spilled_rows == 0 and windower.buffered_rows == 0
