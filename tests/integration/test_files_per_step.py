"""What a run's steps leave behind stays bounded (issue 51). A small step writes one file per table
(delta/edge.py `one_file`): an append, the insert into an empty table, and a small MERGE each add
one data file (and a MERGE at most one change-data file), not one per partition of the step's
source. A follower compacts a table between steps once it holds enough small files
(engine/compaction.py: OPTIMIZE, no change-data rows), rolls its step log up past the retention
(storage/steplog.py), and every commit carries its lease epoch. Real broker, real Delta, canal-json."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from replicator.codec import codec_for
from replicator.delta import warehouse
from replicator.delta.merge import delta_ref
from replicator.delta.warehouse import Warehouse
from replicator.engine import applier
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
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
    # and the run rolls its step log up as it goes (storage/steplog.py): every 3 steps, keeping none
    monkeypatch.setattr(applier, "ROLL_EVERY_STEPS", 3)
    monkeypatch.setattr(warehouse, "STEP_LOG_RETENTION", dt.timedelta(0))
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
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", max_buffer_rows=2,
                         compaction=True, min_small_files=3)
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
