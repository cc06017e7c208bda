"""Runs one `StepPlan` (engine/plan.py): segments on a bounded pool, DDLs one at a time on the
calling thread, each only once what it waits for is done.

Why this shape: a step's MERGEs into different tables are independent, and most of a small
MERGE's time is fixed cost (planning, the Delta log, job scheduling) that overlaps well across
tables; DDLs change the catalog, so they run alone on the calling thread, in commit order, while
MERGEs of the tables they do not affect go on.

On the first failure nothing new starts, segments not yet started are cancelled, the running ones
finish, and the error is raised: the step's progress is then not committed, and the re-run skips
exactly what committed (each write is idempotent by the applied ts it records).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from typing import Any, TypeVar

from replicator.engine.plan import Segment, StepPlan

DEFAULT_APPLY_PARALLELISM = 4
"""MERGEs of one step at once (`--apply-parallelism`). Measured on 2 cores (`make bench`): a small
MERGE is mostly fixed driver-side cost, so a few overlap well; more only queue behind the cores."""

J = TypeVar("J")
R = TypeVar("R")


class InlineExecutor(Executor):
    """Runs each submitted call at once on the calling thread (parallelism 1: no threads at all)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # the caller sees it through the future, as with a pool
            fut.set_exception(exc)
        return fut


def run_plan(
    plan: StepPlan,
    *,
    prepare: Callable[[Segment], J],
    run: Callable[[J], R],
    apply_ddl: Callable[[int], None],
    done: Callable[[Segment, R, bool], None],
    executor: Executor,
) -> None:
    """Run every segment and DDL of `plan` in an order it allows.

    `prepare(segment)` runs on the calling thread right before the segment is submitted (catalog
    lookups: after every DDL the segment waits for); `run(job)` on the executor; `apply_ddl(i)` on
    the calling thread; `done(segment, result, more)` on the calling thread as each segment
    finishes (`more`: whether other work of the step remains).
    """
    segments = plan.segments
    waiting: list[set[int]] = [set() for _ in plan.ddls]
    for i, seg in enumerate(segments):
        if seg.before is not None:
            waiting[seg.before].add(i)
    todo = list(range(len(segments)))
    running: dict[Future[R], int] = {}
    applied = 0
    error: BaseException | None = None
    while True:
        if error is None:
            try:
                for i in [i for i in todo if segments[i].after <= applied]:
                    todo.remove(i)
                    fut = executor.submit(run, prepare(segments[i]))
                    running[fut] = i
                    if fut.done() and fut.exception() is not None:
                        break  # an inline run failed: start nothing more
                else:
                    if applied < len(plan.ddls) and not waiting[applied]:
                        apply_ddl(applied)
                        applied += 1
                        continue
            except BaseException as exc:
                error = exc
        if not running:
            break
        finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
        for fut in finished:
            i = running.pop(fut)
            try:
                result = fut.result()
            except BaseException as exc:
                error = error or exc
                continue
            seg = segments[i]
            if seg.before is not None:
                waiting[seg.before].discard(i)
            if error is None:
                try:
                    done(seg, result, bool(todo or running or applied < len(plan.ddls)))
                except BaseException as exc:
                    error = exc
        if error is not None:
            for fut in running:
                fut.cancel()  # not started yet: never starts; the re-run applies it
            running = {f: i for f, i in running.items() if not f.cancelled()}
    if error is not None:
        raise error
    if todo or applied < len(plan.ddls):  # a plan whose constraints cannot be met (a bug, not input)
        raise RuntimeError(f"step plan stalled: {len(todo)} segment(s) and {len(plan.ddls) - applied} DDL(s) left")
