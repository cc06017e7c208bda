"""Windowing and exactly-once logic, without Spark: a sink emulating the applied-ts skip."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.changes import collapse
from replicator.delta.ddl.scope import ddl_scope
from replicator.engine.plan import Segment, plan_step
from replicator.engine.schedule import InlineExecutor, run_plan
from replicator.engine.window import Cursor, Step, Windower
from replicator.events import TP, Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
from replicator.warehouse import State
from tests.streamgen import generate, interleave


class _Crash(Exception):
    """A simulated kill in the middle of a step."""


class Sink:
    """In-memory 'Delta': per-table rows, per-table applied ts (a write at <= that ts is skipped)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[Any, dict[str, Any]]] = {}
        self.version: dict[str, int] = {}

    def apply(self, step: Step, crash_after: int | None = None) -> bool:
        """Apply a step as the engine plans it (per-table segments split at the DDLs that affect
        the table); with crash_after=n, stop after n segments (simulated kill). True if complete."""
        plan = plan_step(step.hi, step.rows, step.ddls, ddl_scope)
        done: list[Segment] = []

        def run(seg: Segment) -> None:
            if crash_after is not None and len(done) >= crash_after:
                raise _Crash
            name = seg.table[1]
            done.append(seg)
            if self.version.get(name, -1) >= seg.version:
                return
            target = self.rows.setdefault(name, {})
            for ch in collapse(seg.rows, ["id"]):
                if ch.delete:
                    target.pop(ch.key, None)
                else:
                    assert ch.image is not None
                    target[ch.key] = dict(ch.image)
            self.version[name] = seg.version

        def apply_ddl(i: int) -> None:
            d = step.ddls[i]
            if d.ddl_type == 3:
                self.rows.setdefault(d.table, {})
            elif d.ddl_type == 11:
                self.rows[d.table] = {}

        try:
            run_plan(plan, prepare=lambda seg: seg, run=run, apply_ddl=apply_ddl,
                     done=lambda *_: None, executor=InlineExecutor())
        except _Crash:
            return False
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
    partitions = [TP("t", p) for p in range(len(stream.partitions))]
    for _attempt in range(200):
        w = Windower(partitions, State.model_validate_json(persisted).progress, scope_of=ddl_scope)
        crashed = False
        # re-read from the cursors, in the same interleaving
        start = {p: w.progress.cursors.get(p, Cursor(0, 0)).offset for p in partitions}
        for p, off, ev in arrivals:
            if off < start[TP("t", p)]:
                continue
            w.offer(TP("t", p), off, [ev])
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
    w = Windower([TP("t", 0), TP("t", 1)])
    w.offer(TP("t", 0), 0, [row(10, Op.INSERT, 1, 1)])
    w.offer(TP("t", 0), 1, [Resolved(20)])
    assert w.watermark == 0 and w.next_step() is None
    w.offer(TP("t", 1), 0, [Resolved(15)])
    assert w.watermark == 15
    step = w.next_step()
    assert step is not None and step.hi == 15 and step.count == 1


def test_replay_at_or_below_partition_watermark_is_dropped() -> None:
    w = Windower([TP("t", 0)])
    w.offer(TP("t", 0), 0, [row(10, Op.INSERT, 1, 1), Resolved(10)])
    w.offer(TP("t", 0), 1, [row(10, Op.INSERT, 1, 1)])
    assert w.stats.replays_dropped == 1
    assert w.buffered_rows == 1


def test_older_version_arriving_later_never_wins() -> None:
    changes = collapse([row(5, Op.UPDATE, 1, "new"), row(3, Op.UPDATE, 1, "old")][::-1], ["id"])
    assert changes[0].image == {"id": 1, "v": "new"}
    # sorted input as the windower hands it out: (commit ts, arrival)
    w = Windower([TP("t", 0)])
    w.offer(TP("t", 0), 0, [row(5, Op.UPDATE, 1, "new")])
    w.offer(TP("t", 0), 1, [row(3, Op.UPDATE, 1, "old")])
    w.offer(TP("t", 0), 2, [Resolved(6)])
    step = w.next_step()
    assert step is not None
    assert collapse(step.rows[("s", "t")], ["id"])[0].image == {"id": 1, "v": "new"}


def test_key_change_deletes_old_key() -> None:
    out = {c.key: c for c in collapse([row(1, Op.INSERT, 1, "x"), row(2, Op.UPDATE, 2, "y", old_key=1)], ["id"])}
    assert out[(1,)].delete and not out[(2,)].delete


def test_ddl_barrier_orders_rows_and_dedupes_broadcast_copies() -> None:
    w = Windower([TP("t", 0), TP("t", 1)], scope_of=ddl_scope)
    ddl = DdlEvent(20, "s", "t", 5, "ALTER TABLE t ADD COLUMN c INT")
    w.offer(TP("t", 0), 0, [row(10, Op.INSERT, 1, 1)])
    w.offer(TP("t", 0), 1, [ddl])
    w.offer(TP("t", 1), 0, [ddl])
    w.offer(TP("t", 0), 2, [row(30, Op.INSERT, 2, 2)])
    w.offer(TP("t", 0), 3, [Resolved(40)])
    w.offer(TP("t", 1), 1, [Resolved(40)])
    steps = []
    while (s := w.next_step()) is not None:
        steps.append(s)
        w.commit(s)
    # The step ends right before the table's first row after the DDL: 29, then the rest.
    assert [(s.hi, s.ddls, sorted(r.commit_ts for rs in s.rows.values() for r in rs)) for s in steps] == [
        (29, (ddl,), [10]), (40, (), [30])]
    assert w.stats.ddl_duplicates == 1
    plan = plan_step(steps[0].hi, steps[0].rows, steps[0].ddls, ddl_scope)
    assert [(s.version, s.after, s.before) for s in plan.segments] == [(20, 0, 0)]


def _on(table: str, ts: int, key: int) -> RowChange:
    return RowChange(ts, "s", table, Op.INSERT, (_col("id", key, key=True),))


def test_a_ddl_holds_back_only_its_own_tables() -> None:
    """Rows of other tables flow past a DDL into the same step; only the DDL's table is cut."""
    w = Windower([TP("t", 0)], scope_of=ddl_scope)
    alter = DdlEvent(20, "s", "a", 5, "ALTER TABLE a ADD COLUMN c INT")
    w.offer(TP("t", 0), 0, [_on("a", 10, 1), _on("b", 10, 1), alter, _on("b", 25, 2), _on("b", 35, 3), _on("a", 30, 2),
                   Resolved(40)])
    first = w.next_step()
    assert first is not None and first.hi == 29 and first.ddls == (alter,)
    assert {t: [r.commit_ts for r in rs] for t, rs in first.rows.items()} == {("s", "a"): [10], ("s", "b"): [10, 25]}
    w.commit(first)
    second = w.next_step()
    assert second is not None and second.hi == 40 and not second.ddls
    assert {t: [r.commit_ts for r in rs] for t, rs in second.rows.items()} == {("s", "a"): [30], ("s", "b"): [35]}


def test_ddls_of_different_tables_share_a_step() -> None:
    w = Windower([TP("t", 0)], scope_of=ddl_scope)
    d1 = DdlEvent(20, "s", "a", 11, "TRUNCATE TABLE a")
    d2 = DdlEvent(30, "s", "b", 11, "TRUNCATE TABLE b")
    w.offer(TP("t", 0), 0, [_on("a", 10, 1), _on("b", 15, 1), d1, _on("b", 25, 2), d2, _on("a", 35, 3), _on("c", 36, 1),
                   Resolved(50)])
    step = w.next_step()  # b's row 25 flows past a's DDL; a's row 35 ends the step
    assert step is not None and step.hi == 34 and step.ddls == (d1, d2)
    plan = plan_step(step.hi, step.rows, step.ddls, ddl_scope)
    assert [(s.table[1], [r.commit_ts for r in s.rows], s.version, s.after, s.before) for s in plan.segments] == [
        ("a", [10], 20, 0, 0), ("b", [15, 25], 30, 0, 1)]
    w.commit(step)
    rest = w.next_step()
    assert rest is not None and rest.hi == 50 and sorted(rest.rows) == [("s", "a"), ("s", "c")]


def test_a_ddl_whose_scope_is_unknown_holds_back_every_table() -> None:
    w = Windower([TP("t", 0)], scope_of=ddl_scope)
    odd = DdlEvent(20, "s", "", 99, "SOMETHING NEW")
    w.offer(TP("t", 0), 0, [_on("b", 10, 1), odd, _on("b", 25, 2), Resolved(40)])
    step = w.next_step()
    assert step is not None and step.hi == 24 and step.ddls == (odd,)


def test_restart_cursor_points_at_oldest_unapplied_event() -> None:
    w = Windower([TP("t", 0)])
    w.offer(TP("t", 0), 0, [Resolved(5)])
    w.offer(TP("t", 0), 1, [row(10, Op.INSERT, 1, 1)])
    w.offer(TP("t", 0), 2, [Resolved(8)])
    assert w.restart_cursors() == {TP("t", 0): Cursor(1, 5)}
    w.offer(TP("t", 0), 3, [Resolved(12)])
    s = w.next_step()
    assert s is not None
    w.commit(s)
    assert w.restart_cursors() == {TP("t", 0): Cursor(4, 12)}


def test_rows_after_a_catalog_only_ddl_share_its_step() -> None:
    """CREATE / RENAME re-run harmlessly after the rows that follow them: no step boundary, the plan
    still orders each table's rows around them."""
    w = Windower([TP("t", 0)], scope_of=ddl_scope)
    create = DdlEvent(20, "s", "n", 3, "CREATE TABLE n (id INT PRIMARY KEY)")
    rename = DdlEvent(30, "s", "a", 14, "RENAME TABLE a TO b")
    w.offer(TP("t", 0), 0, [_on("a", 10, 1), create, _on("n", 25, 1), rename, _on("b", 35, 2), Resolved(40)])
    step = w.next_step()
    assert step is not None and step.hi == 40 and step.ddls == (create, rename)
    plan = plan_step(step.hi, step.rows, step.ddls, ddl_scope)
    assert [(s.table[1], s.version, s.after, s.before) for s in plan.segments] == [
        ("a", 30, 0, 1), ("b", 40, 2, None), ("n", 40, 1, None)]
