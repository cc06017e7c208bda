"""The engine's control loop with a fake source, a fake applier and a fake clock (no JVM, no broker):
when a catch-up run may end, when a step is due, what a failure leaves behind, dead letters,
partitions added mid-stream and the retry budget."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

import pytest

from replicator.engine.loop import ControlLoop, LoopOptions, StepRecord
from replicator.engine.window import Step, Windower
from replicator.errors import ClaimCheckError, DdlError, DecodeError, KafkaSourceError, SchemaError
from replicator.events import (
    TP,
    Column,
    DdlEvent,
    Event,
    Flag,
    Op,
    Record,
    Resolved,
    RowChange,
    TypeCode,
    tso_from_ms,
    where,
)
from replicator.progress import Cursor, Progress

BAD = b"undecodable"
MISSING = b"claim-check file missing"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


class FakeSource:
    """Records per partition, handed out `per_poll` at a time in round-robin; each poll takes 0.5 s
    of the fake clock (a real poll waits up to 500 ms). Caught up = every partition read to the
    end it had when reading started (or when it was added), like KafkaSource."""

    name = "fake"

    def __init__(self, clock: Clock, records: Mapping[int, Sequence[Sequence[Event] | bytes]], per_poll: int = 1,
                 ) -> None:
        self.clock = clock
        self.records = {p: list(rs) for p, rs in records.items()}
        self.per_poll = per_poll
        self.next: dict[int, int] = {}
        self.end: dict[int, int] = {}
        self.committed: list[dict[TP, int]] = []
        self.polls = 0

    def partitions(self) -> list[TP]:
        return [TP(self.name, p) for p in sorted(self.records)]

    def start(self, positions: Mapping[TP, int | None]) -> None:
        for tp, pos in positions.items():
            p = tp.partition
            self.next[p] = pos or 0
            self.end[p] = len(self.records[p])

    def poll(self) -> list[Record]:
        self.polls += 1
        self.clock.now += 0.5
        out: list[Record] = []
        for p in sorted(self.next):
            for _ in range(self.per_poll):
                off = self.next[p]
                if off >= len(self.records[p]):
                    break
                value = self.records[p][off]
                out.append(Record(self.name, p, off, -1, None, value if isinstance(value, bytes) else b"ok"))
                self.next[p] = off + 1
        return out

    def caught_up(self) -> bool:
        return all(self.next[p] >= self.end[p] for p in self.next)

    def commit(self, offsets: Mapping[TP, int]) -> None:
        self.committed.append(dict(offsets))

    def lag(self) -> int | None:
        return None

    def close(self) -> None:
        pass

    def decode(self, rec: Record) -> list[Event]:
        if rec.value == BAD:
            raise DecodeError("not a TiCDC message")
        if rec.value == MISSING:
            raise ClaimCheckError(f"claim-check file gone ({where(rec)})")
        events = self.records[rec.partition][rec.offset]
        assert not isinstance(events, bytes)
        return list(events)


class TopicSource(FakeSource):
    """A source whose topic can gain partitions (metadata fetched on request), like KafkaSource."""

    def __init__(self, clock: Clock, records: Mapping[int, Sequence[Sequence[Event] | bytes]], per_poll: int = 1,
                 *, hidden: Mapping[int, Sequence[Sequence[Event] | bytes]] | None = None,
                 metadata_down_polls: int = 0, budget_s: float | None = None) -> None:
        super().__init__(clock, records, per_poll)
        self.hidden = dict(hidden or {})  # partitions that exist but the run did not see at start
        self.metadata_down = metadata_down_polls  # fresh_partitions fails this many times first
        self.budget_s = budget_s
        self.down_since: float | None = None
        self.metadata_requests = 0

    def fresh_partitions(self) -> list[TP] | None:
        self.metadata_requests += 1
        if self.metadata_down != 0:
            self.metadata_down -= 1
            if self.down_since is None:
                self.down_since = self.clock.now
            elif self.budget_s is not None and self.clock.now - self.down_since > self.budget_s:
                raise KafkaSourceError(f"no answer to metadata requests for {self.clock.now - self.down_since:.0f}s "
                                       f"(retry budget {self.budget_s:.0f}s)")
            return None
        self.down_since = None
        return [TP(self.name, p) for p in sorted([*self.records, *self.hidden])]

    def add_partitions(self, new: Sequence[TP]) -> bool:
        for tp in new:
            p = tp.partition
            self.records[p] = list(self.hidden.pop(p))
            self.next[p] = 0
            self.end[p] = len(self.records[p])
        return True

    def read_to_end(self, topics: Sequence[str], read_to: Mapping[TP, int]) -> bool | None:
        return all(read_to.get(TP(self.name, p), 0) >= len(rs) for p, rs in self.records.items())


class FakeApplier:
    """Applied steps in order; saved progress as copies (what a restart would find)."""

    def __init__(self, fail_on_step: int | None = None) -> None:
        self.steps: list[Step] = []
        self.saved: list[tuple[Progress, StepRecord | None]] = []
        self.dead: list[tuple[Record, str]] = []
        self.fail_on_step = fail_on_step

    def apply(self, step: Step) -> StepRecord:
        n = len(self.steps) + 1
        if n == self.fail_on_step:
            raise SchemaError("a value does not fit its column")
        self.steps.append(step)
        return {"step": n, "hi": step.hi}

    def dead_letter(self, dead: Sequence[tuple[Record, str]]) -> None:
        self.dead.extend(dead)

    def save_progress(self, progress: Progress, record: StepRecord | None) -> None:
        self.saved.append((copy.deepcopy(progress), copy.deepcopy(record)))

    @property
    def progress(self) -> Progress:
        return self.saved[-1][0] if self.saved else Progress()

    def rows(self) -> list[tuple[int, int]]:
        """(commit ts, key) of every applied row."""
        return [(r.commit_ts, r.columns[0].value) for s in self.steps
                for rows in s.rows.values() for r in rows]


def ins(ts: int, key: int) -> RowChange:
    return RowChange(ts, "s", "t", Op.INSERT, (Column("id", TypeCode.LONG, Flag.HANDLE_KEY, key),))


def res(ts: int) -> list[Event]:
    return [Resolved(ts)]


def loop_of(source: FakeSource, applier: FakeApplier, clock: Clock, *, progress: Progress | None = None,
            **options: object) -> ControlLoop:
    windower = Windower(source.partitions(), progress or Progress())
    cursors = windower.progress.cursors
    source.start({p: cursors[p].offset if p in cursors else None for p in source.partitions()})
    return ControlLoop(source, source.decode, applier, windower, LoopOptions(**options),  # type: ignore[arg-type]
                       clock=clock)


TWO_PARTITIONS: dict[int, list[list[Event] | bytes]] = {
    0: [[ins(10, 1)], res(15), [ins(20, 3)], res(25)],
    1: [[ins(12, 2)], res(15), [ins(22, 4)], res(25)],
}


def test_catch_up_run_applies_every_ready_step_then_ends() -> None:
    clock = Clock()
    source, applier = FakeSource(clock, TWO_PARTITIONS), FakeApplier()
    loop_of(source, applier, clock, until_caught_up=True).run()
    assert applier.rows() == [(10, 1), (12, 2), (20, 3), (22, 4)]
    assert applier.progress == Progress(25, {TP("fake", 0): Cursor(4, 25), TP("fake", 1): Cursor(4, 25)})
    assert source.committed[-1] == {TP("fake", 0): 4, TP("fake", 1): 4}


def test_catch_up_run_waits_for_late_metadata_before_it_ends() -> None:
    clock = Clock()
    source = TopicSource(clock, TWO_PARTITIONS, per_poll=4, metadata_down_polls=5)
    applier = FakeApplier()
    loop_of(source, applier, clock, until_caught_up=True).run()
    assert source.metadata_requests > 5  # the source was caught up after one poll; the run kept asking
    assert applier.rows() == [(10, 1), (12, 2), (20, 3), (22, 4)]
    assert applier.progress.applied_ts == 25


def test_follower_keeps_going_when_caught_up_and_stops_on_request() -> None:
    clock = Clock()
    source, applier = FakeSource(clock, TWO_PARTITIONS, per_poll=4), FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=False, flush_interval_s=2.0)
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        ticks += 1
        if ticks == 3:  # caught up since the first poll: a follower waits for more
            source.records[0] += [[ins(30, 5)], res(35)]
            source.records[1] += [res(35)]
        if ticks == 20:
            loop.request_stop()

    loop.on_tick = tick
    loop.run()
    assert source.polls > 10
    assert applier.rows() == [(10, 1), (12, 2), (20, 3), (22, 4), (30, 5)]
    assert applier.progress.applied_ts == 35


def test_follower_applies_when_the_flush_interval_passed() -> None:
    clock = Clock()
    source, applier = FakeSource(clock, TWO_PARTITIONS, per_poll=4), FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=False, flush_interval_s=2.0)
    seen: list[tuple[float, int]] = []

    def tick() -> None:
        seen.append((clock.now, len(applier.steps)))
        if clock.now >= 4.0:
            loop.request_stop()

    loop.on_tick = tick
    loop.run()
    # everything was read by the first poll (t=0.5); the step came once 2 s had passed since the start
    assert [n for t, n in seen if t < 2.0] == [0] * len([t for t, _ in seen if t < 2.0])
    assert any(n == 1 for t, n in seen if t >= 2.0)
    assert applier.rows() == [(10, 1), (12, 2), (20, 3), (22, 4)]


class BackloggedSource(FakeSource):
    """Knows what is on the broker but unread, like KafkaSource's high watermarks."""

    def backlogged(self) -> bool:
        return any(self.next[p] < len(self.records[p]) for p in self.next)


def _many_windows(n: int) -> dict[int, list[list[Event] | bytes]]:
    return {p: [ev for w in range(n) for ev in ([ins(100 * w + 10 + p, 10 * w + p)], res(100 * w + 50))]
            for p in (0, 1)}


def test_a_follower_reads_what_is_already_there_before_its_interval_step() -> None:
    # 10 windows, read one record per partition per 0.5 s poll: 10 s of reading. A follower whose
    # interval (2 s) passes while records it knows of are unread reads them first, so one step
    # covers all 10 windows instead of a step per 2 s of reading that falls ever further behind.
    clock = Clock()
    source, applier = BackloggedSource(clock, _many_windows(10)), FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=False, flush_interval_s=2.0)

    def tick() -> None:
        if applier.steps:
            loop.request_stop()

    loop.on_tick = tick
    loop.run()
    assert [s.hi for s in applier.steps] == [950]
    assert len(applier.rows()) == 20
    # the same input from a source that cannot tell: steps every 2 s while reading
    clock = Clock()
    source2, applier2 = FakeSource(clock, _many_windows(10)), FakeApplier()
    loop2 = loop_of(source2, applier2, clock, until_caught_up=False, flush_interval_s=2.0)
    loop2.on_tick = lambda: loop2.request_stop() if source2.caught_up() else None
    loop2.run()
    assert len(applier2.steps) > 3


def test_a_backlogged_follower_still_applies_when_the_buffer_is_full() -> None:
    clock = Clock()
    source, applier = BackloggedSource(clock, _many_windows(10)), FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=False, flush_interval_s=2.0, max_buffer_rows=4)
    loop.on_tick = lambda: loop.request_stop() if source.caught_up() else None
    loop.run()
    assert len(applier.steps) >= 4
    assert len(applier.rows()) == 20


def test_a_full_buffer_makes_a_step_due_before_the_flush_interval() -> None:
    clock = Clock()
    records: dict[int, list[list[Event] | bytes]] = {
        0: [[ins(10, 1), ins(11, 2)], res(15), [ins(20, 3), ins(21, 4)], res(25)]}
    source, applier = FakeSource(clock, records), FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=False, flush_interval_s=3600.0, max_buffer_rows=2)
    applied_when_read: list[int] = []

    def tick() -> None:
        if source.caught_up() and not applied_when_read:
            applied_when_read.append(len(applier.steps))
            loop.request_stop()

    loop.on_tick = tick
    loop.run()
    assert applied_when_read == [2]  # both steps came due by size, not by the interval or the stop
    assert [s.hi for s in applier.steps] == [15, 25]
    assert clock.now < 3600.0


def test_a_failing_apply_stops_the_run_with_progress_not_past_it() -> None:
    clock = Clock()
    source, applier = FakeSource(clock, TWO_PARTITIONS), FakeApplier(fail_on_step=2)
    loop = loop_of(source, applier, clock, until_caught_up=True, max_buffer_rows=1)
    with pytest.raises(SchemaError):
        loop.run()
    assert [s.hi for s in applier.steps] == [15]
    # a rerun restarts at the rows of the failed step, with the watermark before them
    assert applier.progress == Progress(15, {TP("fake", 0): Cursor(2, 15), TP("fake", 1): Cursor(2, 15)})
    assert all(c[TP("fake", 0)] <= 2 and c[TP("fake", 1)] <= 2 for c in source.committed)


def test_dead_letter_with_on_error_stop_stops_before_it() -> None:
    clock = Clock()
    records: dict[int, list[list[Event] | bytes]] = {0: [[ins(10, 1)], res(15), BAD, [ins(20, 3)], res(25)]}
    source, applier = FakeSource(clock, records), FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=True, on_error="stop")
    with pytest.raises(DecodeError, match="partition 0 offset 2"):
        loop.run()
    assert [rec.offset for rec, _ in applier.dead] == [2]
    assert applier.rows() == [(10, 1)]  # what was complete before it is applied
    assert applier.progress == Progress(15, {TP("fake", 0): Cursor(2, 15)})  # a rerun reads the bad message again
    assert loop.counts.error is not None and loop.counts.dead_letters == 1


@pytest.mark.parametrize("on_error", ["stop", "skip"])
def test_an_unresolvable_claim_check_stops_without_a_dead_letter(on_error: str) -> None:
    clock = Clock()
    records: dict[int, list[list[Event] | bytes]] = {0: [[ins(10, 1)], res(15), MISSING, [ins(20, 3)], res(25)]}
    source, applier = FakeSource(clock, records), FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=True, on_error=on_error)
    with pytest.raises(ClaimCheckError, match="partition 0 offset 2"):
        loop.run()
    assert applier.dead == [] and loop.counts.dead_letters == 0  # never dead-lettered, also with skip
    assert applier.rows() == [(10, 1)]  # what was complete before it is applied
    assert applier.progress == Progress(15, {TP("fake", 0): Cursor(2, 15)})  # a rerun reads it again
    assert loop.counts.error is not None


def test_dead_letter_with_on_error_skip_goes_on() -> None:
    clock = Clock()
    records: dict[int, list[list[Event] | bytes]] = {0: [[ins(10, 1)], res(15), BAD, [ins(20, 3)], res(25)]}
    source, applier = FakeSource(clock, records), FakeApplier()
    loop_of(source, applier, clock, until_caught_up=True, on_error="skip").run()
    assert [rec.offset for rec, _ in applier.dead] == [2]
    assert applier.rows() == [(10, 1), (20, 3)]
    assert applier.progress == Progress(25, {TP("fake", 0): Cursor(5, 25)})


def test_a_new_partition_blocks_the_watermark_until_its_first_resolved_event() -> None:
    clock = Clock()
    # Partition 1 was added to the topic; it holds a row at ts 12, below the resolved ts 15 that
    # the old partition already shows. Applying up to 15 before reading it would lose that row.
    source = TopicSource(clock, {0: [[ins(10, 1)], res(15), [ins(20, 3)], res(25)]},
                         hidden={1: [[ins(12, 2)], res(15), res(25)]})
    applier = FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=True)
    loop.run()
    assert loop.windower.partitions == [TP("fake", 0), TP("fake", 1)]
    assert applier.rows() == [(10, 1), (12, 2), (20, 3)]
    assert applier.progress == Progress(25, {TP("fake", 0): Cursor(4, 25), TP("fake", 1): Cursor(3, 25)})


def test_ready_steps_wait_while_metadata_is_unavailable_and_the_budget_ends_the_run() -> None:
    clock = Clock()
    source = TopicSource(clock, TWO_PARTITIONS, per_poll=4, metadata_down_polls=-1, budget_s=30.0)
    applier = FakeApplier()
    with pytest.raises(KafkaSourceError, match="retry budget 30s"):
        loop_of(source, applier, clock, until_caught_up=True).run()
    assert clock.now > 30.0
    assert applier.steps == [] and applier.saved == []  # nothing applied without fresh metadata, nothing lost


def test_progress_is_saved_before_the_consumer_group_is_told() -> None:
    clock = Clock()
    events: list[tuple[str, dict[int, int]]] = []
    source, applier = FakeSource(clock, TWO_PARTITIONS, per_poll=4), FakeApplier()
    save, commit = applier.save_progress, source.commit

    def saving(progress: Progress, record: StepRecord | None) -> None:
        events.append(("save", progress.offsets()))
        save(progress, record)

    def committing(offsets: Mapping[int, int]) -> None:
        events.append(("commit", dict(offsets)))
        commit(offsets)

    applier.save_progress = saving  # type: ignore[method-assign]
    source.commit = committing  # type: ignore[method-assign]
    loop_of(source, applier, clock, until_caught_up=True).run()
    assert events
    for i, (what, offsets) in enumerate(events):
        if what == "commit":
            assert events[i - 1] == ("save", offsets)


def test_a_ddl_ends_its_step_before_the_rows_after_it() -> None:
    """The DDL goes into the step with the rows before it; the step ends right before the first row
    after it (of a table it affects: here, by default, every table)."""
    clock = Clock()
    ddl = DdlEvent(18, "s", "t", 11, "TRUNCATE TABLE t")
    records: dict[int, list[list[Event] | bytes]] = {0: [[ins(10, 1)], [ddl], [ins(20, 3)], res(25)]}
    source, applier = FakeSource(clock, records), FakeApplier()
    loop_of(source, applier, clock, until_caught_up=True).run()
    assert [(s.hi, s.ddls, [r.commit_ts for rs in s.rows.values() for r in rs]) for s in applier.steps] == [
        (19, (ddl,), [10]), (25, (), [20])]
    assert applier.progress.applied_ts == 25 and applier.progress.ddl_ledger == set()


class FailingDdlApplier(FakeApplier):
    """A DDL whose query says BAD fails as the real applier does under --on-ddl-error stop."""

    def apply(self, step: Step) -> StepRecord:
        bad = next((d for d in step.ddls if "BAD" in d.query), None)
        if bad is not None:
            exc = DdlError(f"cannot parse {bad.query!r}")
            exc.commit_ts = bad.commit_ts
            raise exc
        return super().apply(step)


def test_a_failing_ddl_stops_the_run_with_what_precedes_it_applied() -> None:
    """The step holding a bad DDL fails; what precedes the DDL is applied and committed (as its own
    step) before the run stops, so the warehouse is as of just before it."""
    clock = Clock()
    good = DdlEvent(5, "s", "t", 3, "CREATE TABLE t (id INT PRIMARY KEY)")
    bad = DdlEvent(15, "s", "t", 5, "ALTER TABLE t BAD")
    records: dict[int, list[list[Event] | bytes]] = {0: [[good], [ins(10, 1)], [bad], [ins(20, 2)], res(25)]}
    source, applier = FakeSource(clock, records), FailingDdlApplier()
    with pytest.raises(DdlError):
        loop_of(source, applier, clock, until_caught_up=True).run()
    assert [(s.hi, s.ddls) for s in applier.steps] == [(9, (good,)), (14, ())]  # the last: up to the bad DDL
    assert applier.rows() == [(10, 1)]
    assert applier.progress.applied_ts == 14


# -- a sharded follower's step grid ------------------------------------------------------------

BASE_MS = 1_700_000_000_000  # a multiple of the 2 s grid


def at(ms: int) -> int:
    return tso_from_ms(BASE_MS + ms)


def test_a_sharded_followers_interval_steps_end_on_the_grid_then_at_a_still_watermark() -> None:
    clock = Clock()
    records: dict[int, list[list[Event] | bytes]] = {
        p: [[ins(at(1000 + p), p)], res(at(1500)), [ins(at(2500 + p), 10 + p)], res(at(3000)),
            [ins(at(4100 + p), 20 + p)], res(at(5500))] for p in (0, 1)}
    source, applier = FakeSource(clock, records, per_poll=10), FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=False, flush_interval_s=2.0, step_grid_ms=2000)
    loop.on_tick = lambda: loop.request_stop() if clock.now >= 10.0 else None
    loop.run()
    # the first interval step ends on the last grid line below the watermark; the next interval
    # finds the watermark where it was (an idle upstream) and goes to it, before the stop
    assert [s.hi for s in applier.steps] == [at(4000), at(5500)]
    assert [len(rows) for s in applier.steps for rows in s.rows.values()] == [4, 2]
    assert applier.progress.applied_ts == at(5500)


class LiveSource(FakeSource):
    """Upstream time runs with the clock (from `start_s`): each second a row per partition at
    +100 ms and a resolved event at +500 ms, appended when the clock passes them."""

    def __init__(self, clock: Clock, per_poll: int) -> None:
        super().__init__(clock, {0: [], 1: []}, per_poll)
        self.second = 0

    def poll(self) -> list[Record]:
        while (self.second + 1) * 1000 <= self.clock.now * 1000:
            s = self.second
            for p in (0, 1):
                self.records[p] += [[ins(at(s * 1000 + 100 + p), 2 * s + p)], res(at(s * 1000 + 500))]
            self.second += 1
        return super().poll()


def test_sharded_followers_with_their_own_timing_step_at_the_same_grid_lines() -> None:
    his: list[list[int]] = []
    for start, per_poll in ((0.0, 1), (0.7, 3)):  # another start, another read pace
        clock = Clock()
        clock.now = start
        source, applier = LiveSource(clock, per_poll), FakeApplier()
        loop = loop_of(source, applier, clock, until_caught_up=False, flush_interval_s=2.0, step_grid_ms=2000)
        loop.on_tick = lambda clock=clock, loop=loop: loop.request_stop() if clock.now >= 30.0 else None  # type: ignore[misc]
        loop.run()
        steps = [s.hi for s in applier.steps]
        assert all(hi % (1 << 18) == 0 and (hi >> 18) % 2000 == 0 for hi in steps[:-1]), steps
        assert len({r for r in applier.rows()}) == len(applier.rows())
        his.append(steps[:-1])  # the last one is the stop's, at the watermark
    common = set(his[0]) & set(his[1])
    assert len(common) >= 10, his
