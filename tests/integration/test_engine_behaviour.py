"""Bad input -> dead letters with position; one run per warehouse; follow mode; replay offsets."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.deadletter import read_dead_letters
from replicator.errors import DecodeError, StateError
from replicator.warehouse import Warehouse
from tests.integration.helpers import open_frame, produce, read_table, run_engine
from tests.integration.test_engine_seed import PAST_SECOND_TXN, resolved, seed_records
from tests.kafka_fixtures import new_topic
from tests.support.cli import replicator_argv, run_replicator
from tests.support.waiting import Deadline, poll_until
from tests.support.warehouse import applied_ts

pytestmark = pytest.mark.integration

ROW_KEY = b'{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1}'


def test_undecodable_message_is_dead_lettered_and_stops_with_position(
    kafka_bootstrap: str, spark: Any, tmp_path: Path
) -> None:
    topic = new_topic(kafka_bootstrap, 2)
    recs = seed_records()
    garbage = (0, b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05{bad", b"\x00" * 3)
    produce(kafka_bootstrap, topic, [*recs[:6], garbage, *recs[6:]])
    wh = tmp_path / "wh"
    with pytest.raises(DecodeError) as info:
        run_engine(kafka_bootstrap, topic, wh, spark)
    assert f"topic {topic!r} partition 0 offset" in str(info.value)
    dead = read_dead_letters(spark, Warehouse(wh))
    assert len(dead) == 1 and dead[0]["partition"] == 0 and dead[0]["value"] == garbage[2]
    # The complete first window before the bad message was applied; nothing after it.
    assert applied_ts(wh) < PAST_SECOND_TXN
    # Re-running stops again at the same message (nothing skipped silently) ...
    with pytest.raises(DecodeError):
        run_engine(kafka_bootstrap, topic, wh, spark)
    assert len(read_dead_letters(spark, Warehouse(wh))) == 1  # recorded once
    # ... until the user says skip: then the rest applies.
    summary = run_engine(kafka_bootstrap, topic, wh, spark, on_error="skip")
    assert summary.watermark == PAST_SECOND_TXN
    assert read_table(spark, wh, "test", "t1") == [{"id": 3, "val": "dd"}, {"id": 4, "val": "ee"}]


def test_handle_key_only_message_is_refused(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 1)
    ohk_key = b'{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1,"ohk":true}'
    produce(kafka_bootstrap, topic, [(0, *open_frame([ohk_key], [b'{"u":{"id":{"t":3,"h":true,"v":1}}}']))])
    with pytest.raises(DecodeError, match="handle-key"):
        run_engine(kafka_bootstrap, topic, tmp_path / "wh", spark)
    assert len(read_dead_letters(spark, Warehouse(tmp_path / "wh"))) == 1


def test_second_run_on_same_warehouse_fails_fast(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    with wh.locked(), pytest.raises(StateError, match="in use by another replicator run"), \
            Warehouse(tmp_path / "wh").locked():
        pass


def test_follow_mode_stops_cleanly_on_sigterm_and_replay_offsets(kafka_bootstrap: str, spark: Any,
                                                                 tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 2)
    recs = seed_records(closing=False)
    produce(kafka_bootstrap, topic, recs)
    wh = tmp_path / "wh"
    cmd = replicator_argv("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
                          "--warehouse", str(wh), "--json-summary")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = Deadline(120)
        # wait until the first window is applied
        poll_until(lambda: applied_ts(wh) >= 415508881038376963, deadline, every=0.5)
        # More data arrives while following.
        produce(kafka_bootstrap, topic, [(p, *open_frame([resolved(PAST_SECOND_TXN)], [b""])) for p in (0, 1)])
        poll_until(lambda: applied_ts(wh) == PAST_SECOND_TXN, deadline, every=0.5)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert json.loads(out.decode().strip().splitlines()[-1])["watermark_tso"] == PAST_SECOND_TXN
    assert read_table(spark, wh, "test", "t1") == [{"id": 3, "val": "dd"}, {"id": 4, "val": "ee"}]

    # replay --from-offsets into a fresh warehouse from mid-stream: the table was created before
    # those offsets, so rows are inferred from row events (no CREATE TABLE seen).
    wh2 = tmp_path / "wh2"
    rep = run_replicator("replay", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
                         "--warehouse", str(wh2), "--from-offsets", "0=2,1=2", "--until-caught-up", timeout=300)
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert read_table(spark, wh2, "test", "t1") == [{"id": 3, "val": "dd"}, {"id": 4, "val": "ee"}]


def test_a_run_reads_each_tables_log_once_and_appends_fresh_inserts(spark: Any, tmp_path: Path,
                                                                   monkeypatch: Any) -> None:
    """What a table already holds is read back from its log once per run (a clean run's later
    steps know it); tables whose step holds only new keys are appended, the rest merged, and the
    result is exact across DDL steps."""
    from replicator.delta.session import DeltaSession
    from replicator.engine.pipeline import Engine, RunOptions
    from replicator.sim.simcheck import compare_tables, read_warehouse
    from replicator.sim.simulate import SimConfig, Simulation, write_archive
    from replicator.sources.archive import ArchiveSource
    from replicator.warehouse import Warehouse

    sim = Simulation(SimConfig(protocol="craft", seed=11, events=600, partitions=2, tables=3,
                               ddl=["add_column", "rename_table", "truncate"]))
    write_archive(sim, tmp_path / "archive", "clean-run")
    reads: list[str] = []
    original = DeltaSession.last_applied_ts

    def counted(self: DeltaSession, path: str, read: Any) -> int:
        reads.append(path)
        return original(self, path, read)

    monkeypatch.setattr(DeltaSession, "last_applied_ts", counted)
    summary = Engine(ArchiveSource(tmp_path / "archive"),
                     RunOptions(warehouse=str(tmp_path / "wh"), protocol="craft", until_caught_up=True,
                                max_buffer_rows=150, spill_rows=0, progress=False), spark=spark).run()
    assert summary.ddl_applied >= 3 + 3 and summary.steps > 3  # CREATE TABLEs and the listed DDLs
    assert sorted(set(reads)) == sorted(reads), "a table's log is read back at most once a run"
    assert summary.tables_appended > 0 and summary.tables_merged > 0
    commits = summary.to_json()["commits"]
    assert commits["append"]["count"] > 0 and commits["append"]["jobs"] == commits["append"]["count"]
    steps = Warehouse(tmp_path / "wh").windows()
    assert sum(r.get("appended", 0) for r in steps) == summary.tables_appended
    assert compare_tables(sim.expected, read_warehouse(spark, tmp_path / "wh")) == []
