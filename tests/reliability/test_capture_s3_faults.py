"""`replicator capture --out s3a://...` killed with SIGKILL mid-session, then run again: files are
staged locally and put whole once complete, and only what was put is acknowledged, so after each
kill the store holds a readable archive, the consumer group's offsets never run ahead of it, and the
final capture leaves every record in the archive exactly once."""

from __future__ import annotations

import functools
import random
import subprocess
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from replicator.errors import DecodeError
from replicator.formats.archive import read_archive
from tests.kafka_fixtures import new_topic
from tests.reliability.common import produce_small_batches, size
from tests.s3_fixtures import S3Server
from tests.support.cli import kill_group, start_replicator, tail
from tests.support.env import cli_env
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.timeout(900)]


@pytest.fixture()
def s3(s3_store: S3Server) -> S3Server:
    """The session's server as this process's object store (tests/conftest.py)."""
    return s3_store


def _capture(s3: S3Server, bootstrap: str, topic: str, url: str, group: str, log: Path,
             *args: str) -> subprocess.Popen[bytes]:
    staging = log.parent / "staging"  # what a killed capture leaves staged stays in the test's directory
    staging.mkdir(exist_ok=True)
    return start_replicator("capture", "--bootstrap-servers", bootstrap, "--topic", topic, "--out", url,
                            "--protocol", "craft", "--rotate-bytes", "3000", "--group-id", group, *args,
                            env=cli_env(**s3.env(), TMPDIR=str(staging)), log=log)


def _count(url: str) -> int:
    """Records in the store (0 before its first object)."""
    try:
        return sum(1 for _ in read_archive(url))
    except DecodeError:
        return 0


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) or 0 for p in range(2)}
    finally:
        consumer.close()


def _progressed(proc: subprocess.Popen[bytes], url: str, records: int, bootstrap: str, group: str, topic: str,
                acked: int) -> bool:
    """The capture ended, or put a file in the store and committed offsets past `acked`."""
    if proc.poll() is not None:
        return True
    return _count(url) > records and sum(_committed(bootstrap, group, topic).values()) > acked


@pytest.mark.soak  # CI time: `make soak`
def test_capture_into_s3_killed_mid_session_then_rerun(s3: S3Server, kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 2, prefix="rel-cap-s3")
    url, group, log = s3.warehouse_url("cap-kill"), f"cap-{topic}", tmp_path / "captures.log"
    rnd = random.Random(5)
    produced: list[tuple[int, bytes | None, bytes | None]] = []

    def more(batch: int, n: int) -> None:
        records: list[tuple[int, bytes | None, bytes | None]] = [
            (p, None, b"batch%d-p%d-%d" % (batch, p, i)) for i in range(n) for p in range(2)]
        produce_small_batches(kafka_bootstrap, topic, records)
        produced.extend(records)

    more(0, 100)
    for kill in range(size(2, 8)):
        more(2 * kill + 1, 60)
        before, acked = _count(url), sum(_committed(kafka_bootstrap, group, topic).values())
        proc = _capture(s3, kafka_bootstrap, topic, url, group, log)  # follows the topic
        try:
            wait_for("a file of this capture put in the store and its offsets committed",
                     functools.partial(_progressed, proc, url, before, kafka_bootstrap, group, topic, acked),
                     timeout=300, every=1.0)
            more(2 * kill + 2, 30)  # while it runs: staged, maybe put
            time.sleep(rnd.uniform(0.0, 2.0))
            assert proc.poll() is None, tail(log)
        finally:
            kill_group(proc)  # records still staged are lost: they were never acknowledged

        archived = [(r.partition, r.offset) for r in read_archive(url)]  # readable after every kill
        for p, offset in _committed(kafka_bootstrap, group, topic).items():
            assert offset <= sum(1 for q, _ in archived if q == p), "a committed offset ran ahead of the archive"

    more(99, 20)
    final = _capture(s3, kafka_bootstrap, topic, url, group, log, "--until-caught-up")
    try:
        assert final.wait(timeout=300) == 0, tail(log)
    finally:
        kill_group(final)

    records = list(read_archive(url))
    for p in range(2):
        mine = [r for r in records if r.partition == p]
        expected = [v for q, _, v in produced if q == p]
        assert [r.offset for r in mine] == list(range(len(expected))), f"partition {p}: a gap or a duplicate"
        assert [r.value for r in mine] == expected
    assert _committed(kafka_bootstrap, group, topic) == {p: sum(1 for q, _, _ in produced if q == p) for p in range(2)}
