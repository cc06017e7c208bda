"""Concurrent writers and readers: while the replicator runs, a user (another Spark session)
keeps compacting (OPTIMIZE), vacuuming (retention check off) and scanning the replicated tables.

The replicator retries MERGEs rejected by Delta's optimistic concurrency and ends with the
model's final state; every snapshot a reader sees equals the model's state at the watermark of
the MERGE that produced it (readers never see a torn step). Whether the user's loop happens to
commit inside a MERGE is timing; a second scenario makes one do so, every time.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.writer import TableWriter, is_conflict
from replicator.engine.pipeline import Engine, RunOptions
from replicator.mysql.tokens import quote_ident
from replicator.sources.kafka import KafkaSettings, KafkaSource
from replicator.warehouse import Warehouse
from tests.integration.concurrency import CommitDuringScan
from tests.integration.helpers import produce_stream
from tests.kafka_fixtures import new_topic
from tests.reliability.common import assert_model_state, size
from tests.streamgen import SCHEMA, Stream, generate

# Generous: other Spark jobs may share the machine; each scenario polls for its conditions.
pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.timeout(7200)]

# Below Delta's 168 h minimum, so only with the retention check off. Not 0: RETAIN 0 HOURS deletes
# the files a MERGE has written but not yet committed, and the table is corrupt (reproduced; the
# replicator then stops with a StateError saying so, see docs/reliability.md). Delta 4.0.1 also
# truncates fractional hours (RETAIN 0.02 HOURS, DeltaTable.vacuum(0.02)) to 0.
VACUUM_RETAIN_HOURS = 1


class User(threading.Thread):
    """OPTIMIZE / VACUUM / full scans in a loop on whichever replicated tables exist."""

    def __init__(self, spark: Any, wh: Path, stream: Stream) -> None:
        super().__init__(daemon=True)
        self.session = spark.newSession()  # its own SQL conf (like another client), same JVM
        self.session.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        self.wh, self.stream = wh, stream
        self.done = threading.Event()
        self.ops: dict[str, int] = {"OPTIMIZE": 0, "VACUUM": 0, "scan": 0, "conflict": 0}
        self.failure: BaseException | None = None
        self.rnd = random.Random(5)

    def run(self) -> None:
        try:
            while not self.done.is_set():
                state = Warehouse(self.wh)
                entries = state.load_state().live_tables() if state.state_path.exists() else []
                if not entries:
                    time.sleep(0.2)
                    continue
                entry = self.rnd.choice(entries)
                op = self.rnd.choices(["OPTIMIZE", "VACUUM", "scan"], [4, 1, 3])[0]
                try:
                    if op == "OPTIMIZE":
                        self.session.sql(f"OPTIMIZE delta.`{entry.path}`").collect()
                    elif op == "VACUUM":
                        self.session.sql(f"VACUUM delta.`{entry.path}` RETAIN {VACUUM_RETAIN_HOURS} HOURS").collect()
                    else:
                        self.check_snapshot(entry.table, entry.path)
                    self.ops[op] += 1
                except Exception as exc:
                    if not is_conflict(exc):  # the user's own OPTIMIZE may lose a race too: fine
                        raise
                    self.ops["conflict"] += 1
                time.sleep(self.rnd.uniform(0.0, 0.5))  # a busy user, not a tight loop
        except BaseException as exc:
            self.failure = exc

    def check_snapshot(self, table: str, path: str) -> None:
        """The latest version equals the model at the watermark of the last MERGE before it."""
        history = self.session.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
        latest = max(h["version"] for h in history)
        applied: int | None = None
        for h in sorted(history, key=lambda h: -h["version"]):
            # a window is a MERGE, or a WRITE when it went into an empty table (the applier's insert)
            if h["operation"] in ("MERGE", "WRITE") and h["userMetadata"]:
                applied = int(json.loads(h["userMetadata"])["replicator"]["applied_ts"])
                break
            if h["operation"] == "CREATE TABLE":
                applied = 0
                break
            assert h["operation"] in ("OPTIMIZE", "VACUUM START", "VACUUM END"), h["operation"]
        assert applied is not None
        df = self.session.read.format("delta").option("versionAsOf", latest).load(path)
        rows = {r["id"]: r.asDict() for r in df.collect()}
        want = self.stream.state_at(applied)[table] if applied else {}
        assert rows == want, f"{SCHEMA}.{table} version {latest} is not the model at {applied}"
        # ... and an aggregate over the same snapshot agrees with it.
        agg = df.selectExpr("count(*) AS n", "sum(qty) AS q").collect()[0]
        assert agg["n"] == len(want) and (agg["q"] or 0) == sum(r["qty"] or 0 for r in want.values())


def test_optimize_vacuum_and_readers_during_a_run(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    stream = generate(seed=81, n_txn=size(80, 2000), n_partitions=3, n_tables=3, truncate_prob=0.0)
    topic = new_topic(kafka_bootstrap, 3, prefix="rel-concurrent")
    produce_stream(kafka_bootstrap, topic, stream.partitions, "open")
    wh = tmp_path / "wh"
    user = User(spark, wh, stream)
    user.start()
    source = KafkaSource(KafkaSettings(kafka_bootstrap, topic, group_id=f"rel-{topic}"))
    engine = Engine(source, RunOptions(warehouse=str(wh), protocol="open", until_caught_up=True,
                                       max_buffer_rows=20, spill_rows=0, progress=False), spark=spark)
    try:
        summary = engine.run()
    finally:
        user.done.set()
        user.join(timeout=600)
    assert user.failure is None, repr(user.failure)
    print(f"\nuser operations {user.ops}; replicator conflict retries {engine.delta.conflict_retries}")
    assert summary.watermark == stream.final_ts
    assert user.ops["OPTIMIZE"] > 0 and user.ops["scan"] > 0 and user.ops["VACUUM"] > 0, user.ops
    assert_model_state(spark, wh, stream.expected, "with a concurrent user")


def test_an_optimize_committing_inside_a_merge_makes_it_retry_and_stay_exact(
        kafka_bootstrap: str, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's first MERGE is held inside its Delta transaction (its source passes through
    the UDF `gate`) while a user's OPTIMIZE ZORDER commits and removes the files it read: Delta
    rejects the MERGE, the engine re-runs it once, and the tables end exactly as upstream."""
    stream = generate(seed=82, n_txn=12, n_partitions=1, n_tables=1, replay_prob=0.0, truncate_prob=0.0)
    topic = new_topic(kafka_bootstrap, 1, prefix="rel-merge-conflict")
    produce_stream(kafka_bootstrap, topic, stream.partitions, "open")
    gate = CommitDuringScan(spark, tmp_path)
    plain = TableWriter.merge_sql

    def gated(self: TableWriter, path: str, spec: Any, view: str, key_range: str = "", *,
              source_ref: str = "") -> str:
        gate.path = gate.path or path
        gate.register(self.spark)
        ref = source_ref or quote_ident(view)
        return plain(self, path, spec, view, key_range,
                     source_ref=f"(SELECT * FROM {ref} AS g WHERE gate(g.`_op`) IS NOT NULL)")

    monkeypatch.setattr(TableWriter, "merge_sql", gated)
    user = threading.Thread(target=gate.user, kwargs={"zorder_by": "id"}, daemon=True)
    user.start()
    source = KafkaSource(KafkaSettings(kafka_bootstrap, topic, group_id=f"rel-{topic}"))
    engine = Engine(source, RunOptions(warehouse=str(tmp_path / "wh"), protocol="open", until_caught_up=True,
                                       max_buffer_rows=10, spill_rows=0, progress=False), spark=spark)
    try:
        summary = engine.run()
    finally:
        gate.committed.touch()
        user.join(timeout=600)
    assert gate.failure is None, repr(gate.failure)
    assert gate.ops and not gate.ops[0].startswith("OPTIMIZE removed 0"), gate.ops
    assert engine.delta.conflict_retries == 1, "the MERGE never met the concurrent commit"
    assert summary.watermark == stream.final_ts
    assert_model_state(spark, tmp_path / "wh", stream.expected, "after a MERGE re-run over a concurrent OPTIMIZE")
    history = spark.sql(f"DESCRIBE HISTORY delta.{quote_ident(gate.path)}").collect()
    assert [h["operation"] for h in history].count("OPTIMIZE") == 1
