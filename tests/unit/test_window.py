"""Windowing and exactly-once logic, without Spark: a sink emulating Delta's txnVersion skip."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.delta.warehouse import State
from replicator.engine.window import Cursor, DdlStep, RowBatch, Windower, collapse
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
from tests.streamgen import generate, interleave


class Sink:
    """In-memory 'Delta': per-table rows, per-table txn version (a MERGE at <= version is skipped)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[Any, dict[str, Any]]] = {}
        self.version: dict[str, int] = {}

    def apply(self, step: RowBatch | DdlStep, crash_after: int | None = None) -> bool:
        """Apply a step; with crash_after=n, stop after n tables (simulated kill). True if complete."""
        if isinstance(step, DdlStep):
            d = step.ddl
            if d.ddl_type == 3:
                self.rows.setdefault(d.table, {})
            elif d.ddl_type == 11:
                self.rows[d.table] = {}
            return crash_after is None
        for i, (table, rows) in enumerate(sorted(step.rows.items())):
            if crash_after is not None and i >= crash_after:
                return False
            name = table[1]
            if self.version.get(name, -1) >= step.hi:
                continue
            target = self.rows.setdefault(name, {})
            for ch in collapse(rows, ["id"]):
                if ch.delete:
                    target.pop(ch.key, None)
                else:
                    assert ch.image is not None
                    target[ch.key] = dict(ch.image)
            self.version[name] = step.hi
        return crash_after is None

    def state(self) -> dict[str, dict[int, dict[str, Any]]]:
        return {t: {k[0]: v for k, v in rows.items()} for t, rows in self.rows.items()}


def run_with_crashes(seed: int, crash_prob: float) -> tuple[Sink, Any]:
    stream = generate(seed)
    arrivals = interleave(stream, seed)
    by_part: dict[int, list[Any]] = {}
    for p, off, ev in arrivals:
        by_part.setdefault(p, []).append((off, ev))
    rnd = random.Random(seed * 7 + 1)
    sink = Sink()
    # Progress survives a crash only as the state file's JSON (what Warehouse.save_state writes).
    persisted = State().model_dump_json(by_alias=True)
    partitions = list(range(len(stream.partitions)))
    for _attempt in range(200):
        w = Windower(partitions, State.model_validate_json(persisted).progress)
        crashed = False
        # re-read from the cursors, in the same interleaving
        start = {p: w.progress.cursors.get(p, Cursor(0, 0)).offset for p in partitions}
        for p, off, ev in arrivals:
            if off < start[p]:
                continue
            w.offer(p, off, [ev])
            if rnd.random() < 0.3:
                while (step := w.next_step()) is not None:
                    crash_here = rnd.random() < crash_prob
                    done = sink.apply(step, crash_after=rnd.randint(0, 3) if crash_here else None)
                    if not done:
                        crashed = True
                        break
                    w.commit(step)
                    w.checkpoint()
                    persisted = State(progress=w.progress).model_dump_json(by_alias=True)
                if crashed:
                    break
        if crashed:
            continue
        while (step := w.next_step()) is not None:
            assert sink.apply(step)
            w.commit(step)
        return sink, stream
    raise AssertionError("too many crashes")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_exactly_once_without_crashes(seed: int) -> None:
    sink, stream = run_with_crashes(seed, crash_prob=0.0)
    assert sink.state() == stream.expected


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_exactly_once_with_random_crashes(seed: int) -> None:
    sink, stream = run_with_crashes(seed, crash_prob=0.25)
    assert sink.state() == stream.expected


def _col(name: str, value: Any, key: bool = False) -> Column:
    return Column(name, TypeCode.LONG, Flag.HANDLE_KEY if key else 0, value)


def row(ts: int, op: Op, key: int, val: Any = None, old_key: int | None = None, table: str = "t") -> RowChange:
    new = (_col("id", key, True), _col("v", val)) if op is not Op.DELETE else ()
    old = (_col("id", old_key if old_key is not None else key, True),) if op is not Op.INSERT else ()
    return RowChange(ts, "s", table, op, new, old)


def test_global_watermark_needs_every_partition() -> None:
    w = Windower([0, 1])
    w.offer(0, 0, [row(10, Op.INSERT, 1, 1)])
    w.offer(0, 1, [Resolved(20)])
    assert w.watermark == 0 and w.next_step() is None
    w.offer(1, 0, [Resolved(15)])
    assert w.watermark == 15
    step = w.next_step()
    assert isinstance(step, RowBatch) and step.hi == 15 and step.count == 1


def test_replay_at_or_below_partition_watermark_is_dropped() -> None:
    w = Windower([0])
    w.offer(0, 0, [row(10, Op.INSERT, 1, 1), Resolved(10)])
    w.offer(0, 1, [row(10, Op.INSERT, 1, 1)])
    assert w.stats.replays_dropped == 1
    assert w.buffered_rows == 1


def test_older_version_arriving_later_never_wins() -> None:
    changes = collapse([row(5, Op.UPDATE, 1, "new"), row(3, Op.UPDATE, 1, "old")][::-1], ["id"])
    assert changes[0].image == {"id": 1, "v": "new"}
    # sorted input as the windower hands it out: (commit ts, arrival)
    w = Windower([0])
    w.offer(0, 0, [row(5, Op.UPDATE, 1, "new")])
    w.offer(0, 1, [row(3, Op.UPDATE, 1, "old")])
    w.offer(0, 2, [Resolved(6)])
    step = w.next_step()
    assert isinstance(step, RowBatch)
    assert collapse(step.rows[("s", "t")], ["id"])[0].image == {"id": 1, "v": "new"}


def test_key_change_deletes_old_key() -> None:
    out = {c.key: c for c in collapse([row(1, Op.INSERT, 1, "x"), row(2, Op.UPDATE, 2, "y", old_key=1)], ["id"])}
    assert out[(1,)].delete and not out[(2,)].delete


def test_ddl_barrier_orders_rows_and_dedupes_broadcast_copies() -> None:
    w = Windower([0, 1])
    ddl = DdlEvent(20, "s", "t", 5, "ALTER TABLE t ADD COLUMN c INT")
    w.offer(0, 0, [row(10, Op.INSERT, 1, 1)])
    w.offer(0, 1, [ddl])
    w.offer(1, 0, [ddl])
    w.offer(0, 2, [row(30, Op.INSERT, 2, 2)])
    w.offer(0, 3, [Resolved(40)])
    w.offer(1, 1, [Resolved(40)])
    steps = []
    while (s := w.next_step()) is not None:
        steps.append(s)
        w.commit(s)
    assert [type(s).__name__ for s in steps] == ["RowBatch", "DdlStep", "RowBatch"]
    assert steps[0].hi == 20 and steps[2].hi == 40
    assert w.stats.ddl_duplicates == 1


def test_restart_cursor_points_at_oldest_unapplied_event() -> None:
    w = Windower([0])
    w.offer(0, 0, [Resolved(5)])
    w.offer(0, 1, [row(10, Op.INSERT, 1, 1)])
    w.offer(0, 2, [Resolved(8)])
    assert w.restart_cursors() == {0: Cursor(1, 5)}
    w.offer(0, 3, [Resolved(12)])
    s = w.next_step()
    assert s is not None
    w.commit(s)
    assert w.restart_cursors() == {0: Cursor(4, 12)}
