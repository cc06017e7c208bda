"""A data commit lands on the version its plan was read at, or not at all (issue 50, item 2; the
s3a commit store's `Pin`, delta/commitfence.py): a stale holder's commit that lands between the
moment a run read what a table holds and its next write is not written on top of. Before pins,
Delta's own snapshot saw the stale commit and put the append at the version after it, so a step
the stale holder had also written was in the table twice.

The stale holder is another driver in real life. Here its commit is made by a second applier in
this JVM, and the pin is set back afterwards to what it was: what a commit of another JVM leaves
(this JVM's log store moves the pin on only for its own commits)."""

from __future__ import annotations

from typing import Any

import pytest

from replicator.changes import Change
from replicator.delta import commitfence
from replicator.delta.merge import DeltaApplier
from replicator.delta.typemap import ColumnSpec, TableSpec
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration

SPEC = TableSpec("db", "pinned", (ColumnSpec("id", "BIGINT", nullable=False), ColumnSpec("v", "STRING")), ("id",))


def _meta(ts: int) -> dict[str, Any]:
    return {"replicator": {"step": ts, "applied_ts": ts, "kind": "window"}}


def _fresh(k: int, v: str) -> Change:
    return Change((k,), False, {"id": k, "v": v}, fresh=True)


def _rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def test_a_stale_commit_between_read_and_write_is_re_planned_not_written_over(spark: Any, s3_store: S3Server) -> None:
    pins = commitfence.pins(spark)
    assert pins is not None, "the tests' session commits s3a:// tables through the replicator's store"
    root = s3_store.warehouse_url("pinned")
    holder = DeltaApplier(spark)
    holder.epoch = lambda: 2  # a lease holder: its data writes are pinned
    stale = DeltaApplier(spark)  # the holder before it (epoch 1), paused, then resumed
    stale.epoch = lambda: 1
    step = [_fresh(2, "b"), _fresh(3, "c")]
    for case, late, expected_kind in (("same step", (step, 20), "none"),
                                      ("earlier step", ([_fresh(2, "b")], 15), "merge")):
        path = f"{root}/{case.replace(' ', '_')}"
        holder.create_table(path, SPEC)
        holder.holds_nothing(path, case)
        assert stale.applied_ts(path, case) == -1  # what the stale holder read before it was paused
        holder.merge(path, case, SPEC, [_fresh(1, "a")], 10, _meta(10))
        read_at = holder.cached_version(path)
        assert pins.next(path) == read_at + 1, "the holder's own commit moved its pin on"
        changes, ts = late
        stale.merge(path, case, SPEC, changes, ts, _meta(ts))  # resumed: its late commit lands on top
        pins.readAt(path, read_at)  # as another JVM's commit leaves this JVM's pin
        res = holder.merge(path, case, SPEC, step, 20, _meta(20))
        assert res.kind == expected_kind, case
        assert _rows(spark, path) == [(1, "a"), (2, "b"), (3, "c")], f"{case}: every row once"
        assert holder.applied_ts(path, case) == 20
        assert pins.next(path) == holder.table_version(path) + 1, "pinned again at what it read and wrote"
