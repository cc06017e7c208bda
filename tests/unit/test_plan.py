"""Per-table DDL barriers: a DDL's scope, the plan of a step, and running it concurrently."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.delta.ddl.scope import ddl_scope
from replicator.engine.plan import Segment, StepPlan, plan_step
from replicator.engine.schedule import InlineExecutor, run_plan
from replicator.events import Column, DdlEvent, Flag, Op, RowChange, TypeCode
from replicator.tables import EVERYTHING, NOTHING, DdlScope


def ddl(code: int, query: str, table: str = "t", schema: str = "s", ts: int = 10) -> DdlEvent:
    return DdlEvent(ts, schema, table, code, query)


@pytest.mark.parametrize(("event", "covered", "not_covered"), [
    (ddl(5, "ALTER TABLE t ADD COLUMN c INT"), [("s", "t"), ("S", "T")], [("s", "u"), ("o", "t")]),
    (ddl(14, "RENAME TABLE a TO b, x.c TO d", table="a"), [("s", "a"), ("s", "b"), ("x", "c"), ("x", "d")],
     [("s", "c"), ("s", "t")]),
    (ddl(14, "ALTER TABLE a RENAME TO o.b", table="a"), [("s", "a"), ("o", "b")], [("s", "b")]),
    (ddl(3, "CREATE TABLE n LIKE src", table="n"), [("s", "n"), ("s", "src")], [("s", "t")]),
    (ddl(3, "CREATE TABLE n (id INT PRIMARY KEY) PARTITION BY HASH(id) PARTITIONS 4", table="n"), [("s", "n")],
     [("s", "t")]),
    (ddl(4, "DROP TABLE a, o.b", table="a"), [("s", "a"), ("o", "b")], [("s", "b")]),
    (ddl(11, "TRUNCATE TABLE t"), [("s", "t")], [("s", "u")]),
    (ddl(2, "DROP DATABASE s", table=""), [("s", "t"), ("s", "anything")], [("o", "t")]),
    (ddl(25, "RECOVER TABLE t"), [("s", "t")], [("s", "u")]),
    (ddl(20, "ALTER TABLE t DROP PARTITION p0"), [("s", "t")], [("s", "u")]),
    (ddl(5, "ALTER TABLE t ADD COLUMN (a INT, b INT)"), [("s", "t")], [("s", "u")]),
])
def test_scope_names_the_tables_a_ddl_affects(event: DdlEvent, covered: list[tuple[str, str]],
                                              not_covered: list[tuple[str, str]]) -> None:
    scope = ddl_scope(event)
    assert all(scope.covers(t) for t in covered), scope
    assert not any(scope.covers(t) for t in not_covered), scope


def test_no_op_codes_hold_nothing_back_and_unknown_ones_everything() -> None:
    assert ddl_scope(ddl(7, "CREATE INDEX i ON t (a)")) == NOTHING
    assert ddl_scope(ddl(1, "CREATE DATABASE n", table="")) == NOTHING
    assert ddl_scope(ddl(99, "ALTER TABLE t SOMETHING")) == EVERYTHING
    assert ddl_scope(ddl(5, "this is not sql at all ((", table="")) == EVERYTHING


def row(table: str, ts: int) -> RowChange:
    return RowChange(ts, "s", table, Op.INSERT, (Column("id", TypeCode.LONG, Flag.HANDLE_KEY, ts),))


def test_plan_splits_each_table_at_its_own_ddls() -> None:
    d1, d2 = DdlEvent(20, "s", "a", 11, "x"), DdlEvent(30, "s", "b", 11, "y")
    scopes = {"x": DdlScope.of(("s", "a")), "y": DdlScope.of(("s", "b"))}
    rows = {("s", "a"): [row("a", 10), row("a", 25)], ("s", "b"): [row("b", 5), row("b", 40)],
            ("s", "c"): [row("c", 1)]}
    plan = plan_step(50, rows, [d1, d2], lambda d: scopes[d.query])
    got = [(s.table[1], [r.commit_ts for r in s.rows], s.version, s.after, s.before) for s in plan.segments]
    assert got == [("a", [10], 20, 0, 0), ("a", [25], 50, 1, None), ("b", [5], 30, 0, 1), ("b", [40], 50, 2, None),
                   ("c", [1], 50, 0, None)]
    assert [s.table[1] for s in plan.waits_for(1)] == ["b"]


@st.composite
def plans(draw: st.DrawFn) -> tuple[StepPlan, int]:
    tables = [f"t{i}" for i in range(draw(st.integers(1, 5)))]
    n_ddls = draw(st.integers(0, 4))
    ts = sorted(draw(st.lists(st.integers(1, 100), min_size=n_ddls, max_size=n_ddls)))
    ddls, scopes = [], {}
    for i, at in enumerate(ts):
        covered = draw(st.lists(st.sampled_from(tables), max_size=3, unique=True))
        everything = draw(st.booleans()) and draw(st.booleans())
        ddls.append(DdlEvent(at, "s", "", 11, f"d{i}"))
        scopes[f"d{i}"] = EVERYTHING if everything else DdlScope.of(*(("s", c) for c in covered))
    rows: dict[tuple[str, str], list[RowChange]] = {}
    for t in tables:
        stamps = sorted(draw(st.lists(st.integers(1, 120), max_size=6)))
        if stamps:
            rows[("s", t)] = [row(t, x) for x in stamps]
    return plan_step(120, rows, ddls, lambda d: scopes[d.query]), draw(st.integers(1, 4))


@settings(max_examples=80, deadline=None)
@given(plans(), st.randoms(use_true_random=False))
def test_run_plan_keeps_every_barrier_under_concurrency(drawn: tuple[StepPlan, int], rnd: random.Random) -> None:
    """Whatever the timing: each DDL runs after every row of its tables at or before it and before
    every row after it; DDLs in order; each segment exactly once; versions rise per table."""
    plan, workers = drawn
    log: list[tuple[str, Any]] = []
    lock = threading.Lock()
    delays = {i: rnd.random() * 0.003 for i in range(len(plan.segments))}

    def run(seg: Segment) -> Segment:
        time.sleep(delays[plan.segments.index(seg)])
        with lock:
            log.append(("seg", seg))
        return seg

    def apply_ddl(i: int) -> None:
        with lock:
            log.append(("ddl", i))

    executor = InlineExecutor() if workers == 1 else ThreadPoolExecutor(workers)
    run_plan(plan, prepare=lambda s: s, run=run, apply_ddl=apply_ddl, done=lambda *_: None,
             executor=executor)
    segs = [x for k, x in log if k == "seg"]
    assert len(segs) == len(plan.segments)
    assert [x for k, x in log if k == "ddl"] == list(range(len(plan.ddls)))
    where = {("ddl", x) if k == "ddl" else ("seg", id(x)): i for i, (k, x) in enumerate(log)}
    for seg in plan.segments:
        at = where[("seg", id(seg))]
        for j, scope in enumerate(plan.scopes):
            if not scope.covers(seg.table):
                continue
            ts = plan.ddls[j].commit_ts
            if all(r.commit_ts <= ts for r in seg.rows):
                assert at < where[("ddl", j)]
            else:
                assert all(r.commit_ts > ts for r in seg.rows) and at > where[("ddl", j)]
    by_table: dict[tuple[str, str], list[int]] = {}
    for seg in segs:
        by_table.setdefault(seg.table, []).append(seg.version)
    assert all(v == sorted(v) for v in by_table.values())


def test_first_failure_stops_the_step_and_cancels_what_has_not_started() -> None:
    rows = {("s", f"t{i}"): [row(f"t{i}", 1)] for i in range(6)}
    plan = plan_step(10, rows, [], lambda d: EVERYTHING)
    started: list[str] = []
    gate = threading.Event()

    def run(seg: Segment) -> str:
        started.append(seg.table[1])
        if seg.table[1] == "t0":
            raise RuntimeError("boom")
        gate.wait(1)
        return seg.table[1]

    with ThreadPoolExecutor(2) as pool, pytest.raises(RuntimeError, match="boom"):
        run_plan(plan, prepare=lambda s: s, run=run, apply_ddl=lambda i: None, done=lambda *_: gate.set(),
                 executor=pool)
    assert len(started) < 6  # the rest were cancelled before they started


def test_a_failing_ddl_stops_before_the_rows_after_it() -> None:
    d = DdlEvent(20, "s", "a", 11, "x")
    rows = {("s", "a"): [row("a", 10), row("a", 30)]}
    plan = plan_step(40, rows, [d], lambda _: DdlScope.of(("s", "a")))
    ran: list[int] = []

    def fail(i: int) -> None:
        raise ValueError("ddl failed")

    with pytest.raises(ValueError, match="ddl failed"):
        run_plan(plan, prepare=lambda s: s, run=lambda s: ran.append(s.version), apply_ddl=fail,
                 done=lambda *_: None, executor=InlineExecutor())
    assert ran == [20]
