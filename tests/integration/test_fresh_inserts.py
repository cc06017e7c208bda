"""Fresh inserts are appended (replicator.delta.writer): one Spark job, the same table a MERGE
leaves, and a write at or below the ts a table holds is skipped by a restarted run that reads that
ts back from the table's own commits, past a user's OPTIMIZE."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replicator.changes import Change
from replicator.delta.writer import TableWriter, delta_ref
from replicator.runtime import commitfence
from replicator.tables import ColumnSpec, TableSpec
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration

SPEC = TableSpec("db", "fresh", (ColumnSpec("id", "BIGINT", nullable=False), ColumnSpec("v", "STRING")), ("id",))


def _meta(ts: int) -> dict[str, Any]:
    return {"replicator": {"step": ts, "applied_ts": ts, "kind": "window"}}


def _fresh(k: int, v: str) -> Change:
    return Change((k,), False, {"id": k, "v": v}, fresh=True)


def _rows(spark: Any, path: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).collect())


def _operations(spark: Any, path: str) -> list[str]:
    history = spark.sql(f"DESCRIBE HISTORY {delta_ref(path)}").collect()
    return [h["operation"] for h in sorted(history, key=lambda h: h["version"])]


def test_fresh_inserts_are_appended_with_one_job_and_end_as_a_merge_would(spark: Any, tmp_path: Path) -> None:
    fast, plain = TableWriter(spark), TableWriter(spark)
    plain.append_fresh = False
    paths = {"fast": str(tmp_path / "fast"), "plain": str(tmp_path / "plain")}
    step2 = [_fresh(3, "c"), Change((4,), True, None, fresh=True), _fresh(5, "e")]  # 4: inserted, deleted again
    for applier, path in ((fast, paths["fast"]), (plain, paths["plain"])):
        applier.create_table(path, SPEC)
        applier.merge(path, "t", SPEC, [_fresh(1, "a"), _fresh(2, "b")], 10, _meta(10))
        res = applier.merge(path, "t", SPEC, step2, 20, _meta(20))
        assert (res.rows, res.upserts, res.deletes) == (3, 2, 1)
    assert _rows(spark, paths["fast"]) == _rows(spark, paths["plain"]) == [(1, "a"), (2, "b"), (3, "c"), (5, "e")]
    assert _operations(spark, paths["fast"]) == ["CREATE TABLE", "WRITE", "WRITE"]
    assert _operations(spark, paths["plain"])[-1] == "MERGE"
    appends = fast.commits.kinds["append"]
    assert appends.count == 2 and appends.jobs == 2, "an append of fresh inserts costs one Spark job"
    assert fast.commits.kinds["merge"].count == 0
    assert plain.commits.kinds["merge"].jobs > plain.commits.kinds["merge"].count


def test_a_key_that_was_there_sends_the_step_to_merge(spark: Any, tmp_path: Path) -> None:
    applier = TableWriter(spark)
    path = str(tmp_path / "t")
    applier.create_table(path, SPEC)
    applier.merge(path, "t", SPEC, [_fresh(1, "a"), _fresh(2, "b")], 10, _meta(10))
    res = applier.merge(path, "t", SPEC, [_fresh(3, "c"), Change((1,), False, {"id": 1, "v": "a2"})], 20, _meta(20))
    assert res.kind == "merge"
    assert _rows(spark, path) == [(1, "a2"), (2, "b"), (3, "c")]


def test_a_restarted_run_skips_what_the_table_holds_past_a_users_optimize(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    crashed = TableWriter(spark)
    crashed.create_table(path, SPEC)
    crashed.merge(path, "t", SPEC, [_fresh(1, "a")], 10, _meta(10))
    crashed.merge(path, "t", SPEC, [_fresh(2, "b")], 20, _meta(20))  # ... then the process died
    spark.sql(f"OPTIMIZE {delta_ref(path)}")  # a user's maintenance commits on top, without our metadata
    spark.sql(f"ALTER TABLE {delta_ref(path)} SET TBLPROPERTIES ('note' = 'x')")
    rerun = TableWriter(spark)
    assert rerun.applied_ts(path, "t") == 20
    again = rerun.merge(path, "t", SPEC, [_fresh(2, "b")], 20, _meta(20))
    assert again.skipped and again.kind == "none"
    assert rerun.commits.kinds["append"].count == 0
    assert rerun.merge(path, "t", SPEC, [_fresh(3, "c")], 30, _meta(30)).kind == "append"
    assert _rows(spark, path) == [(1, "a"), (2, "b"), (3, "c")]
    assert TableWriter(spark).applied_ts(str(tmp_path / "t"), "other uid, same table") == 30


def test_a_table_without_replicator_commits_holds_nothing(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    applier = TableWriter(spark)
    applier.create_table(path, SPEC)
    spark.sql(f"INSERT INTO {delta_ref(path)} VALUES (1, 'by hand')")
    assert TableWriter(spark).applied_ts(path, "t") == -1


class _Raced(Exception):
    """What py4j raises when the s3a commit store found the version taken (its text names the class)."""

    def __init__(self) -> None:
        super().__init__("An error occurred while calling o1.sql.\n: replicator.s3commit.CommitRacedException: "
                         "replicator: commit raced: .../_delta_log/00000000000000000002.json was written by another "
                         "writer first (412)")


@pytest.mark.parametrize(("other", "expected_kind"), [("same step", "none"), ("earlier step", "merge"),
                                                      ("not ours", "append")])
def test_a_raced_commit_is_re_planned_from_what_the_table_holds(spark: Any, tmp_path: Path, monkeypatch: Any,
                                                                 other: str, expected_kind: str) -> None:
    """The commit store refused our append's version: another writer committed first. A stale
    holder's write of the same step is not applied again; one of an earlier step turns the append
    into a MERGE (re-applying cannot double a row); anything else (a user's write) is re-run."""
    path = str(tmp_path / "t")
    applier, stale = TableWriter(spark), TableWriter(spark)
    applier.create_table(path, SPEC)
    applier.merge(path, "t", SPEC, [_fresh(1, "a")], 10, _meta(10))
    step = [_fresh(2, "b"), _fresh(3, "c")]
    original = applier._append_view  # private: where a commit race is injected (a second driver in real life)
    raced = []

    def first_raced(*args: Any, **kwargs: Any) -> Any:
        if not raced:
            raced.append(True)
            if other == "same step":
                stale.merge(path, "t", SPEC, step, 20, _meta(20))
            elif other == "earlier step":
                stale.merge(path, "t", SPEC, [_fresh(2, "b")], 15, _meta(15))
            else:
                spark.sql(f"OPTIMIZE {delta_ref(path)}")
            raise _Raced()
        return original(*args, **kwargs)

    monkeypatch.setattr(applier, "_append_view", first_raced)
    fenced = []
    applier.fence = lambda: fenced.append(True)  # type: ignore[method-assign]
    res = applier.merge(path, "t", SPEC, step, 20, _meta(20))
    assert raced and fenced, "the lease is checked before the write goes again"
    assert res.kind == expected_kind
    assert _rows(spark, path) == [(1, "a"), (2, "b"), (3, "c")], "every row once"
    assert applier.applied_ts(path, "t") == 20


def test_a_stale_commit_between_read_and_write_is_re_planned_not_written_over(spark: Any, s3_store: S3Server) -> None:
    """A data commit lands on the version its plan was read at, or not at all (issue 50, item 2;
    the s3a commit store's `Pin`, runtime/commitfence.py): a stale holder's commit that lands between
    the moment a run read what a table holds and its next write is not written on top of. Before
    pins, Delta's own snapshot saw the stale commit and put the append at the version after it, so
    a step the stale holder had also written was in the table twice. The stale holder is another
    driver in real life; here a second applier in this JVM, and the pin is set back afterwards to
    what it was: what a commit of another JVM leaves (this JVM's log store moves the pin on only for
    its own commits)."""
    pins = commitfence.pins(spark)
    assert pins is not None, "the tests' session commits s3a:// tables through the replicator's store"
    root = s3_store.warehouse_url("pinned")
    holder = TableWriter(spark)
    holder.epoch = lambda: 2  # a lease holder: its data writes are pinned
    stale = TableWriter(spark)  # the holder before it (epoch 1), paused, then resumed
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
