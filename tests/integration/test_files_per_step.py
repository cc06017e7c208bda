"""What a run's steps leave behind stays bounded (issue 51). A small step writes one file per table
(delta/session.py `one_file`): an append, the insert into an empty table, and a small MERGE each add
one data file (and a MERGE at most one change-data file), not one per partition of the step's
source. A follower compacts a table between steps once it holds enough small files
(engine/compaction.py: OPTIMIZE, no change-data rows), rolls its step log up past the retention
(storage/steplog.py), and every commit carries its lease epoch. Real broker, real Delta, canal-json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.codec import codec_for
from replicator.delta import rowcount
from replicator.delta.writer import delta_ref
from replicator.engine import applier, compaction
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, read_table, run_engine
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration

KEY = int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY | Flag.BINARY)


def _row(ts: int, op: Op, key: int, v: str, pre: str | None = None) -> RowChange:
    def image(value: str) -> tuple[Column, ...]:
        return (Column("id", TypeCode.LONG, KEY, key), Column("v", TypeCode.VARCHAR, 0, value))

    if op is Op.DELETE:
        return RowChange(ts, "s", "t", op, (), image(v))
    return RowChange(ts, "s", "t", op, image(v), image(pre) if pre is not None else ())


def test_each_small_step_adds_one_file(kafka_bootstrap: str, spark: Any, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    # and the run rolls its step log up as it goes (storage/steplog.py): every 3 steps, keeping the
    # steps of the last 0 hours (the retention); its VACUUMs are the next test's
    monkeypatch.setattr(compaction, "vacuum_every", lambda hours: float("inf"))
    monkeypatch.setattr(applier, "ROLL_EVERY_STEPS", 3)
    events: list[Any] = [DdlEvent(10, "s", "t", 3, "CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `v` VARCHAR(8))")]
    ts, expected = 11, {}
    for step in range(4):  # inserts only: the first into the empty table, then appends
        for k in range(step * 5, step * 5 + 5):
            events.append(_row(ts, Op.INSERT, k, f"a{k}"))
            expected[k] = f"a{k}"
            ts += 1
        events.append(Resolved(ts))
        ts += 1
    for step in range(3):  # updates and deletes of earlier keys, plus new keys: MERGEs
        for k in (step, step + 10):
            events.append(_row(ts, Op.UPDATE, k, f"u{k}", pre=expected[k]))
            expected[k] = f"u{k}"
            ts += 1
        events.append(_row(ts, Op.DELETE, step + 5, expected.pop(step + 5)))
        events.append(_row(ts + 1, Op.INSERT, 100 + step, f"n{step}"))
        expected[100 + step] = f"n{step}"
        ts += 2
        events.append(Resolved(ts))
        ts += 1
    topic = new_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, k, v) for k, v in codec_for("canal-json").encode(events)])
    wh = tmp_path / "wh"
    # compacting as a follower does, a table once it has 3 small files (engine/compaction.py)
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", max_buffer_rows=2, spill_rows=0,
                         compaction=True, min_small_files=3, retention_hours=0)
    assert summary.error is None and summary.watermark == ts - 1

    assert {r["id"]: r["v"] for r in read_table(spark, wh, "s", "t")} == expected
    entry = Warehouse(wh).load_state().live_table("s", "t")
    assert entry is not None
    history = sorted(spark.sql(f"DESCRIBE HISTORY {delta_ref(entry.path)}").collect(), key=lambda h: h["version"])
    writes = [(h["operation"], h["operationMetrics"]) for h in history if h["operation"] in ("WRITE", "MERGE")]
    assert [op for op, _ in writes] == ["WRITE"] * 4 + ["MERGE"] * 3, writes
    log = Warehouse(wh).windows()  # 7 steps, rolled at step 3 (folding 1-2) and 6 (folding 3-5)
    assert [r["kind"] for r in log] == ["rollup", "window", "window"] and log[0]["rolled_steps"] == 5
    data_writes = [h for h in history if h["operation"] in ("WRITE", "MERGE")]
    assert log[0]["tables"] == {entry.uid: {"version": data_writes[4]["version"]}}, "as of the 5th step"
    # compacted at least once after 3 steps; its commits change no data (change-data readers see none)
    optimized = [h for h in history if h["operation"] == "OPTIMIZE"]
    assert optimized and all(json.loads(h["userMetadata"])["replicator"]["kind"] == "maintain" for h in optimized)
    compacted = Warehouse(wh).load_state().compacted  # when: for `tables` and `status`
    assert set(compacted) == {entry.uid} and compacted[entry.uid] >= optimized[-1]["timestamp"].timestamp() - 1
    changes = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1).load(entry.path)
    net = {r["id"]: r["v"] for r in changes.orderBy("_commit_version").collect() if r["_change_type"] != "delete"
           and r["_change_type"] != "update_preimage"}
    deleted = {r["id"] for r in changes.collect() if r["_change_type"] == "delete"}
    assert {k: v for k, v in net.items() if k not in deleted} == expected, "the change feed holds every change once"
    assert changes.count() == 20 + 3 + 2 * 6 + 3, "inserts, updates (pre and post images), deletes: nothing more"
    epochs = {json.loads(h["userMetadata"])["replicator"].get("epoch") for h in history if h["userMetadata"]}
    assert epochs == {1}, "every commit says under which lease epoch it was made"
    for op, m in writes:
        if op == "WRITE":
            assert m["numFiles"] == "1", f"an append of a small step writes one file: {m}"
        else:
            assert m["numTargetFilesAdded"] == "1", f"a small MERGE writes one data file: {m}"
            assert int(m.get("numTargetChangeFilesAdded", "0")) <= 1, f"and at most one change-data file: {m}"


def _files(path: str) -> tuple[set[str], set[str]]:
    """The table's data files and change-data files on disk, by their path below the table."""
    root = Path(path.removeprefix("file:"))
    data = {str(p.relative_to(root)) for p in root.rglob("*.parquet")
            if "_delta_log" not in p.parts and "_change_data" not in p.parts}
    return data, {str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_change_data" in p.parts}


def test_a_follower_vacuums_past_the_retention_never_below_the_tables_own(
        kafka_bootstrap: str, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "SHARE", 1.0)  # whenever one is due, whatever it took so far
    events: list[Any] = [DdlEvent(10, "s", "t", 3, "CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `v` VARCHAR(8))")]
    ts, expected = 11, {}

    def step(keys: range, prefix: str) -> None:
        nonlocal ts
        for k in keys:
            events.append(_row(ts, Op.UPDATE if k in expected else Op.INSERT, k, f"{prefix}{k}", pre=expected.get(k)))
            expected[k] = f"{prefix}{k}"
            ts += 1
        events.append(Resolved(ts))
        ts += 1

    for n in range(4):  # inserts, then MERGEs that rewrite the file holding the keys
        step(range(0, 4) if n == 0 else range(n - 1, n + 1), f"a{n}")
    topic = new_topic(kafka_bootstrap, 1)
    codec = codec_for("canal-json")
    produce(kafka_bootstrap, topic, [(0, k, v) for k, v in codec.encode(events)])
    wh = tmp_path / "wh"
    # a retention of 0 hours asked for, the table's own is Delta's 7 days: nothing goes
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", max_buffer_rows=2, spill_rows=0,
                         compaction=True, min_small_files=100, retention_hours=0)
    assert summary.error is None and summary.vacuums >= 1 and summary.vacuumed_bytes == 0
    state = Warehouse(wh).load_state()
    entry = state.live_table("s", "t")
    assert entry is not None and set(state.vacuumed) == {entry.uid}
    snapshot = rowcount.read_snapshot(entry.path, rowcount.file_bytes)
    assert snapshot is not None
    live = {k[0] for k in snapshot.live}
    data, change_data = _files(entry.path)
    assert data > live and change_data, "the replaced files are kept for the table's own retention"

    # the table's own retention lowered to 0 (by its owner): the follower's next VACUUM removes them
    spark.sql(f"ALTER TABLE {delta_ref(entry.path)} SET TBLPROPERTIES "
              "('delta.deletedFileRetentionDuration' = 'interval 0 hours')")
    events.clear()
    step(range(2, 4), "b")
    produce(kafka_bootstrap, topic, [(0, k, v) for k, v in codec.encode(events)])
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", max_buffer_rows=2, spill_rows=0,
                         compaction=True, min_small_files=100, retention_hours=0)
    assert summary.error is None and summary.vacuums >= 1 and summary.vacuumed_bytes > 0
    assert {r["id"]: r["v"] for r in read_table(spark, wh, "s", "t")} == expected
    snapshot = rowcount.read_snapshot(entry.path, rowcount.file_bytes)
    assert snapshot is not None
    data, change_data = _files(entry.path)
    assert data == {k[0] for k in snapshot.live} and not change_data
    assert Warehouse(wh).load_state().vacuumed[entry.uid] > state.vacuumed[entry.uid]
    history = spark.sql(f"DESCRIBE HISTORY {delta_ref(entry.path)}").collect()
    vacuums = [h for h in history if h["operation"] == "VACUUM END"]
    assert vacuums and all(json.loads(h["userMetadata"])["replicator"]["kind"] == "maintain" for h in vacuums)
