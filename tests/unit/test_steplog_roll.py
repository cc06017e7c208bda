"""The step log stays bounded (storage/steplog.py `roll`): steps older than a retention are folded
into one rollup record that still says each table's Delta version, so every view that reads the
log (a table's version at a watermark, whether a shard held a watermark) answers the same for
every watermark the log still offers, and refuses older ones instead of guessing."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.delta.explore import Explorer
from replicator.delta.shardview import Shard, earliest_readable
from replicator.progress import Progress
from replicator.storage import steplog
from replicator.storage.local import LocalFileIO
from replicator.storage.steplog import ROLLUP, StepLog, fold
from replicator.warehouse import State, Warehouse

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
SEGMENT_RECORDS = 16  # small segments: the same shapes, fewer writes


@pytest.fixture(autouse=True)
def _small_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(steplog, "SEGMENT_RECORDS", SEGMENT_RECORDS)


class SegmentedIO(LocalFileIO):
    """A local directory that cannot append: the log is written in segments, as on S3."""

    can_append = False


def _record(step: int, tables: dict[str, int]) -> dict[str, Any]:
    return {"step": step, "hi": step * 10, "applied_ts": step * 10, "kind": "window",
            "recorded_at": (T0 + dt.timedelta(minutes=step)).isoformat(),
            "tables": {uid: {"version": v, "upserts": 1} for uid, v in tables.items()}}


def _records(n: int) -> list[dict[str, Any]]:
    """Table a changes every step, b every third, c only at step 2."""
    out = []
    for step in range(1, n + 1):
        tables = {"a": step}
        if step % 3 == 0:
            tables["b"] = step // 3
        if step == 2:
            tables["c"] = 7
        out.append(_record(step, tables))
    return out


def _shard(records: list[dict[str, Any]]) -> Shard:
    """A shard that applied up to its last step, with this step log."""
    state = State()
    state.progress = Progress(applied_ts=max(int(r["applied_ts"]) for r in records))
    return Shard(cast(Any, None), state, sorted(records, key=lambda r: int(r.get("applied_ts", r["hi"]))))


@pytest.mark.parametrize("io", [LocalFileIO(), SegmentedIO()], ids=["appended", "segments"])
def test_old_steps_fold_into_one_record_that_keeps_each_tables_version(tmp_path: Path, io: LocalFileIO) -> None:
    n = 3 * SEGMENT_RECORDS + 5
    log = StepLog(io, str(tmp_path))
    for r in _records(n):
        log.append(r)
    before = log.records()
    cut = 2 * SEGMENT_RECORDS + 8  # steps recorded before this one's time are rolled up
    folded = log.roll(T0 + dt.timedelta(minutes=cut))
    after = StepLog(io, str(tmp_path)).records()
    # where the store appends, every older step folds; in segments, only whole segments do
    last_folded = cut - 1 if io.can_append else (cut - 1) // SEGMENT_RECORDS * SEGMENT_RECORDS
    assert folded == last_folded
    rollup, kept = after[0], after[1:]
    assert rollup["kind"] == ROLLUP and rollup["step"] == last_folded and rollup["rolled_steps"] == last_folded
    assert rollup["first_step"] == 1 and rollup["applied_ts"] == last_folded * 10
    assert rollup["tables"] == {"a": {"version": last_folded}, "b": {"version": last_folded // 3}, "c": {"version": 7}}
    assert kept == before[last_folded:], "the steps after the cut are kept as they were"
    for w in range(kept[0]["applied_ts"], n * 10 + 1, 7):
        for uid in "abc":
            assert _shard(after).version_at(uid, w) == _shard(before).version_at(uid, w)
    assert earliest_readable(after) == kept[0]["applied_ts"]
    assert not _shard(after).held(kept[0]["applied_ts"] - 1) and _shard(after).held(kept[0]["applied_ts"])

    # later: the rollup folds into the next one, counting every step once
    again = StepLog(io, str(tmp_path))
    assert again.roll(T0 + dt.timedelta(minutes=cut)) == 0, "nothing new to fold"
    more = again.roll(T0 + dt.timedelta(minutes=n + 100))
    final = StepLog(io, str(tmp_path)).records()
    assert final[0]["kind"] == ROLLUP and final[0]["rolled_steps"] == folded + more and final[0]["first_step"] == 1
    assert final[-1] == before[-1], "the newest step is never folded"
    if not io.can_append:
        names = sorted(p.name for p in (tmp_path / "windows").iterdir())
        assert len(names) == 2 and names[0].endswith(f".{ROLLUP}.jsonl"), names


def test_a_crash_between_the_rollup_and_the_removal_counts_each_step_once(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    io = SegmentedIO()
    log = StepLog(io, str(tmp_path))
    n = 3 * SEGMENT_RECORDS + 5
    for r in _records(n):
        log.append(r)
    before = log.records()

    def crash(*_: Any) -> None:
        raise OSError("killed")

    monkeypatch.setattr(io, "remove_listed", crash)
    with pytest.raises(OSError):
        log.roll(T0 + dt.timedelta(minutes=2 * SEGMENT_RECORDS + 8))
    monkeypatch.setattr(io, "remove_listed", LocalFileIO.remove_listed.__get__(io))
    half = StepLog(io, str(tmp_path)).records()  # the old segments and their rollup, both
    for w in range(10, n * 10 + 1, 13):
        assert _shard(half).version_at("b", w) == _shard(before).version_at("b", w)
    assert StepLog(io, str(tmp_path)).roll(T0 + dt.timedelta(minutes=2 * SEGMENT_RECORDS + 8)) == 0
    assert StepLog(io, str(tmp_path)).records()[0]["rolled_steps"] == 2 * SEGMENT_RECORDS


@settings(max_examples=60, deadline=None)
@given(changes=st.lists(st.sets(st.sampled_from("abcd"), max_size=3), min_size=2, max_size=40),
       cuts=st.lists(st.integers(0, 45), min_size=1, max_size=4))
def test_views_answer_the_same_after_any_rolls(changes: list[set[str]], cuts: list[int]) -> None:
    versions: dict[str, int] = {}
    records = []
    for step, touched in enumerate(changes, 1):
        for uid in sorted(touched):
            versions[uid] = versions.get(uid, 0) + 1
        records.append(_record(step, {uid: versions[uid] for uid in touched}))
    rolled = list(records)
    for cut in sorted(cuts):  # what `roll` keeps where the store appends: a prefix folds
        k = 0
        before = T0 + dt.timedelta(minutes=cut)
        while k < len(rolled) - 1 and dt.datetime.fromisoformat(rolled[k]["recorded_at"]) < before:
            k += 1
        if any(r["kind"] != ROLLUP for r in rolled[:k]):
            rolled = [fold(rolled[:k]), *rolled[k:]]
    earliest = earliest_readable(rolled)
    assert sum(r.get("rolled_steps", 1) for r in rolled) == len(records)
    for w in range(earliest or 0, len(records) * 10 + 11):
        for uid in "abcd":
            assert _shard(rolled).version_at(uid, w) == _shard(records).version_at(uid, w)


def test_a_notebook_is_offered_only_the_watermarks_still_held(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    for r in _records(40):
        wh.steps.append(r)
    explorer = Explorer(wh, cast(Any, None))
    assert explorer.watermarks() == [s * 10 for s in range(1, 41)]
    assert wh.roll_step_log(dt.timedelta(days=1), now=T0 + dt.timedelta(days=1, minutes=30)) == 29
    assert explorer.watermarks() == [s * 10 for s in range(30, 41)]
    assert explorer.version_at("b", 300) == 10 and explorer.version_at("c", 400) == 7
    with pytest.raises(ValueError, match="earliest readable watermark is 300"):
        explorer.version_at("a", 290)
