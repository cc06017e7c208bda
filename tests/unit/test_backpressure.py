"""Backpressure in the control loop (`ControlLoop.pace`): with a bounded buffer and partitions read
unevenly, partitions ahead of the global watermark are paused and the laggards read, so a step
forced by a full buffer applies most of it; every row still lands exactly once, in order, and a
run whose laggards have nothing more resumes the rest and ends."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.engine.loop import PRESSURE
from replicator.engine.window import Windower
from replicator.events import TP, Column, DdlCode, DdlEvent, Event, Flag, Op, Record, RowChange, TypeCode
from replicator.progress import Progress
from tests.unit.test_loop import Clock, FakeApplier, FakeSource, ins, loop_of, res


class PausableSource(FakeSource):
    """A FakeSource whose partitions can be paused, like KafkaSource (kafka-python's pause)."""

    def __init__(self, clock: Clock, records: Mapping[int, Sequence[Sequence[Event] | bytes]], per_poll: int = 1,
                 ) -> None:
        super().__init__(clock, records, per_poll)
        self.paused: set[int] = set()
        self.pause_calls = 0
        self.limits: list[int] = []

    def pause_only(self, partitions: Collection[TP]) -> None:
        self.pause_calls += 1
        self.paused = {tp.partition for tp in partitions}

    def limit_poll(self, records: int) -> None:
        self.limits.append(records)

    def poll(self) -> list[Record]:
        held = {p: self.next[p] for p in self.paused}
        for p in held:  # a paused partition hands out nothing this poll
            self.next[p] = len(self.records[p])
        try:
            out = super().poll()
        finally:
            self.next.update(held)
        return out


def skewed(windows: int, hot: int, cold: int = 1) -> dict[int, list[list[Event] | bytes]]:
    """Partition 0 carries `hot` rows per window (one record each), partition 1 `cold`: read a
    record of each per poll, partition 1 runs far ahead of partition 0 in upstream time."""
    out: dict[int, list[list[Event] | bytes]] = {0: [], 1: []}
    key = 0
    for w in range(windows):
        base = 1000 * (w + 1)
        for p, n in ((0, hot), (1, cold)):
            for i in range(n):
                key += 1
                out[p].append([ins(base + 10 * p + i, key)])
            out[p].append(res(base + 500))
    return out


def expected_rows(records: Mapping[int, Sequence[Sequence[Event] | bytes]]) -> list[tuple[int, int]]:
    rows = [(ev.commit_ts, ev.columns[0].value) for rs in records.values() for evs in rs if not isinstance(evs, bytes)
            for ev in evs if hasattr(ev, "columns")]
    return sorted(rows)


def catch_up(source: FakeSource, buffer: int) -> FakeApplier:
    clock = source.clock
    applier = FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=True, max_buffer_rows=buffer)
    loop.run()
    return applier


def test_a_skewed_catch_up_makes_full_steps_not_one_window_steps() -> None:
    records = skewed(windows=100, hot=5)  # 600 rows, 5 of the hot partition's per window
    plain = catch_up(FakeSource(Clock(), records, per_poll=10), buffer=40)
    paced_source = PausableSource(Clock(), records, per_poll=10)
    paced = catch_up(paced_source, buffer=40)
    want = expected_rows(records)
    assert sorted(plain.rows()) == want
    assert sorted(paced.rows()) == want
    assert len(set(paced.rows())) == len(want)  # exactly once
    # Without pausing the cold partition's rows sit above the watermark, the buffer stays full
    # and most steps forced by it are one window of the hot partition.
    assert len(plain.steps) >= 60
    # With it a forced step applies what the pressure share leaves of a full buffer, less the
    # hot partition's incomplete window: steps of 25 rows or more.
    assert len(paced.steps) <= 600 / (40 * (1 - PRESSURE) - 5) + 2
    assert paced_source.pause_calls > 0


def test_steps_stay_in_watermark_order_with_their_rows_complete() -> None:
    records = skewed(windows=12, hot=8, cold=3)
    applier = catch_up(PausableSource(Clock(), records, per_poll=5), buffer=16)
    his = [s.hi for s in applier.steps]
    assert his == sorted(his) and len(set(his)) == len(his)
    done = 0
    for step in applier.steps:
        ts = [r.commit_ts for rows in step.rows.values() for r in rows]
        assert all(done < t <= step.hi for t in ts)  # nothing twice, nothing above its step
        done = step.hi
    assert sorted(applier.rows()) == expected_rows(records)


def test_a_catch_up_ends_when_the_laggard_has_nothing_more() -> None:
    # Partition 1 ends at 1500 while partition 0 reads on to 9500: the watermark stops at 1500 and
    # partition 0 is ahead. Reading it cannot move the watermark, yet the run must read it to its
    # end and finish, applying everything up to 1500 and holding the rest.
    records: dict[int, list[list[Event] | bytes]] = {
        0: [ev for w in range(9) for ev in
            [*[[ins(1000 * (w + 1) + i, 100 * w + i)] for i in range(6)], res(1000 * (w + 1) + 500)]],
        1: [[ins(1100, 9999)], res(1500)],
    }
    source = PausableSource(Clock(), records, per_poll=3)
    applier = catch_up(source, buffer=12)
    assert source.caught_up()
    assert applier.progress.applied_ts == 1500
    assert sorted(applier.rows()) == [r for r in expected_rows(records) if r[0] <= 1500]


def test_a_follower_under_pressure_applies_when_the_laggard_runs_dry() -> None:
    # Partition 0 holds rows up to its last resolved ts 1500 (upstream is quiet there for now);
    # partition 1 runs ahead to 9500. Once partition 1 is paused and partition 0 has nothing more,
    # the ready rows are applied at once (not after the hour-long interval), then partition 1 is
    # read again: its rows wait above the watermark, as they would without pausing.
    records: dict[int, list[list[Event] | bytes]] = {
        0: [*[[ins(1000 + i, i)] for i in range(3)], res(1500)],
        1: [ev for w in range(1, 10) for ev in ([ins(1000 * w + 600, 100 + w)], res(1000 * w + 500))],
    }
    source = PausableSource(Clock(), records, per_poll=2)
    applier = FakeApplier()
    loop = loop_of(source, applier, source.clock, until_caught_up=False, flush_interval_s=3600.0,
                   max_buffer_rows=16)
    loop.on_tick = lambda: loop.request_stop() if source.caught_up() else None
    loop.run()
    assert [s.hi for s in applier.steps] == [1500]
    assert sorted(applier.rows()) == [(1000, 0), (1001, 1), (1002, 2)]
    assert source.clock.now < 3600.0 and source.caught_up()
    assert loop.windower.buffered_rows == 9  # partition 1's rows above 1500, unapplied


def test_quiet_partitions_are_never_ahead() -> None:
    w = Windower([TP("a", 0), TP("a", 1), TP("b", 0)], Progress())
    w.offer(TP("b", 0), 0, [RowChange(20, "s", "gone", Op.INSERT, (Column("id", TypeCode.LONG, Flag.HANDLE_KEY, 1),))])
    w.offer(TP("a", 0), 0, res(100))
    w.offer(TP("a", 1), 0, res(50))
    w.offer(TP("b", 0), 1, res(300))
    assert w.ahead_partitions() == {TP("a", 0), TP("b", 0)}
    # The only table of topic b dropped: b goes quiet (the loop must read it to its end, never pause it).
    w.offer(TP("b", 0), 2, [DdlEvent(40, "s", "gone", DdlCode.DROP_TABLE, "DROP TABLE `s`.`gone`")])
    assert w.excluded_topics() == ["b"]
    assert w.ahead_partitions() == {TP("a", 0)}


def test_a_poll_is_at_most_the_pressure_share_of_the_buffer_in_rows() -> None:
    # Records of 4 rows each (an Open Protocol batch): a poll of a 400-row buffer is 40 rows.
    records: dict[int, list[list[Event] | bytes]] = {
        0: [[ins(10, 1)], [ins(20 + i, 10 + i) for i in range(4)], res(50)]}
    source = PausableSource(Clock(), records)
    catch_up(source, buffer=400)
    assert source.limits == [int(400 * PRESSURE), int(400 * PRESSURE / 4)]


@settings(max_examples=60, deadline=None)
@given(windows=st.integers(1, 12), hot=st.integers(1, 9), cold=st.integers(0, 4), per_poll=st.integers(1, 7),
       buffer=st.integers(1, 30))
def test_pacing_never_loses_or_repeats_a_row(windows: int, hot: int, cold: int, per_poll: int, buffer: int) -> None:
    records = skewed(windows, hot, cold)
    applier = catch_up(PausableSource(Clock(), records, per_poll=per_poll), buffer=buffer)
    assert sorted(applier.rows()) == expected_rows(records)
    assert len(applier.rows()) == len(expected_rows(records))
