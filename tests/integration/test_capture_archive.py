"""Simulated streams through a real broker into real Delta, and capture archives as a second source.

- simulate's expected state equals what the replicator produces, for Open Protocol and Craft;
- capture -> archive -> `run --archive` gives the same tables as running straight from Kafka;
- capture resumes after the last archived record, repairs a tail cut by a killed capture,
  commits its consumer group after flushing, and follows a topic until SIGTERM.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from replicator.cli import main
from replicator.formats.archive import list_archive_files, read_archive
from replicator.sim.simcheck import check_warehouse, read_warehouse
from replicator.sim.simulate import ExpectedState, SimConfig, Simulation, produce
from replicator.sources.capture import CaptureOptions, capture
from tests.integration.helpers import produce as produce_raw
from tests.integration.helpers import run_engine
from tests.kafka_fixtures import new_topic
from tests.support.cli import replicator_argv, run_replicator
from tests.support.env import clean_env
from tests.support.waiting import Deadline, poll_until

pytestmark = pytest.mark.integration


def _canonical_rows(tables: dict[str, Any]) -> dict[str, list[str]]:
    return {name: sorted(json.dumps(r, sort_keys=True) for r in t.rows) for name, t in tables.items()}


def test_capture_archive_run_equals_kafka_run(kafka_bootstrap: str, spark: Any, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    topic = new_topic(kafka_bootstrap, 3, prefix="sim-open")
    sim = Simulation(SimConfig(protocol="open", events=1200, seed=31, partitions=3, tables=3,
                               ddl="create_schema,add_column,truncate"))
    produce(sim, kafka_bootstrap, topic)

    from_kafka = tmp_path / "wh-kafka"
    summary = run_engine(kafka_bootstrap, topic, from_kafka, spark, protocol="open")
    assert summary.replays_dropped > 0 and summary.ddl_applied == sim.stats.ddl
    assert check_warehouse(spark, from_kafka, sim.expected) == []

    out = tmp_path / "archive"
    assert main(["capture", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--out", str(out),
                 "--until-caught-up", "--rotate-bytes", "200000"]) == 0
    text = capsys.readouterr().out
    total = sum(sim.stats.messages.values())
    assert f"captured {total} records of topic {topic!r} (open)" in text
    for p, n in sim.stats.messages.items():
        assert f"partition {p}: {n} records, offsets 0..{n - 1}" in text
    files = list_archive_files(out)
    assert len(files) > 1 and all(f.name in text for f in files)

    from_archive = tmp_path / "wh-archive"
    assert main(["run", "--archive", str(out), "--warehouse", str(from_archive), "--json-summary"]) == 0
    run_summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert run_summary["source"] == topic and run_summary["records"] == total
    assert run_summary["watermark_tso"] == sim.expected.watermark
    assert _canonical_rows(read_warehouse(spark, from_archive)) == _canonical_rows(read_warehouse(spark, from_kafka))

    # The archive's name is the topic: the Kafka-built warehouse accepts it and finds nothing new.
    again = main(["run", "--archive", str(out), "--warehouse", str(from_kafka), "--json-summary"])
    assert again == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"] == 0


def test_simulate_cli_craft_matches_expected(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 2, prefix="sim-craft")
    expected = tmp_path / "expected.json"
    simulate = ("simulate", "--protocol", "craft", "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
                "--events", "1000", "--partitions", "2", "--tables", "3", "--seed", "17", "--expected", str(expected))
    out = run_replicator(*simulate, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "partition 0:" in out.stdout and "partition 1:" in out.stdout
    state = ExpectedState.load(expected)
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="craft")
    assert summary.dead_letters == 0
    assert check_warehouse(spark, wh, expected) == []
    assert state.generator["ddl"] and summary.ddl_applied == state.stats["ddl"]

    # A second simulate into the same (now non-empty) topic is refused: its expected state would lie.
    again = run_replicator(*simulate, timeout=300)
    assert again.returncode == 2 and "already holds records" in again.stderr


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        consumer.close()


def test_capture_resumes_repairs_and_commits(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 2, prefix="cap")
    produce_raw(kafka_bootstrap, topic, [(i % 2, None if i % 5 == 0 else b"k%d" % i, b"v%d" % i) for i in range(40)])
    out = tmp_path / "arch"
    group = f"cap-{topic}"
    opts = CaptureOptions(kafka_bootstrap, topic, out, until_caught_up=True, group_id=group, protocol="craft")
    first = capture(opts)
    assert first.records == 40 and first.stopped == "caught up"
    assert _committed(kafka_bootstrap, group, topic, 2) == {0: 20, 1: 20}

    # A killed capture left a partial frame: the next one cuts it off and captures that record again.
    last = list_archive_files(out)[-1]
    with open(last, "r+b") as f:
        f.truncate(last.stat().st_size - 3)
    produce_raw(kafka_bootstrap, topic, [(i % 2, b"k", b"w%d" % i) for i in range(10)])
    second = capture(opts)
    assert second.repaired is not None and "partial frame" in second.repaired
    assert second.records == 11  # the cut record plus the 10 new ones
    records = list(read_archive(out))
    for p in (0, 1):
        offsets = [r.offset for r in records if r.partition == p]
        assert offsets == list(range(25))
    nulls = [r for r in records if r.partition == 0 and r.offset == 0]
    assert nulls[0].key is None and nulls[0].value == b"v0"

    # Nothing new: a third capture writes no records and leaves no file behind, and a new
    # directory starts from the group's committed offsets.
    files = list_archive_files(out)
    third = capture(opts)
    assert third.records == 0 and third.files == [] and list_archive_files(out) == files
    fresh = capture(CaptureOptions(kafka_bootstrap, topic, tmp_path / "fresh", until_caught_up=True, group_id=group))
    assert fresh.records == 0
    assert "committed offset of group" in fresh.render()


def test_capture_follows_until_sigterm(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 1, prefix="follow")
    produce_raw(kafka_bootstrap, topic, [(0, b"\x00" * 7 + b"\x01", b"x%d" % i) for i in range(5)])
    out = tmp_path / "arch"

    def archived_all_five() -> bool:
        try:
            return len(list(read_archive(out))) == 5
        except Exception:  # not created or mid-write yet
            return False

    proc = subprocess.Popen(replicator_argv("capture", "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
                                            "--out", str(out)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=clean_env(PYTHONUNBUFFERED="1"))
    try:
        deadline = Deadline(120)
        poll_until(archived_all_five, deadline, every=0.5)
        produce_raw(kafka_bootstrap, topic, [(0, b"\x00" * 7 + b"\x01", b"late")])
        poll_until(lambda: len(list(read_archive(out))) >= 6, deadline, every=0.5)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert "captured 6 records" in stdout and "(open)" in stdout and "stopped by signal" in stdout
    assert [r.value for r in read_archive(out)][-1] == b"late"
