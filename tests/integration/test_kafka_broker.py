"""Round trips through the real local broker with kafka-python 3.0.

These tests pin down the client features the replicator relies on: exact bytes, per-partition offsets,
offset lookups by position and by time, and consumer-group commits. They also cover the
`make kafka-up` / `make kafka-down` CLI contract.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition

from replicator.sim import localkafka
from tests.kafka_fixtures import kafka_bootstrap, new_topic  # noqa: F401  (kafka_bootstrap is a fixture)

pytestmark = pytest.mark.integration

Record = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]


@pytest.fixture
def producer(kafka_bootstrap: str) -> Iterator[KafkaProducer]:  # noqa: F811
    prod = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", linger_ms=0, request_timeout_ms=15000)
    try:
        yield prod
    finally:
        prod.close(timeout=10)


def _consumer(bootstrap: str, **overrides: object) -> KafkaConsumer:
    config: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "request_timeout_ms": 15000,
        "fetch_max_wait_ms": 100,
    }
    config.update(overrides)
    return KafkaConsumer(**config)


def _drain(consumer: KafkaConsumer, expected: int, timeout_s: float = 30.0) -> dict[int, list[Record]]:
    """Poll until ``expected`` records arrived; group them by partition as (offset, key, value, headers)."""
    got: dict[int, list[Record]] = {}
    deadline = time.monotonic() + timeout_s
    count = 0
    while count < expected and time.monotonic() < deadline:
        for tp, records in consumer.poll(timeout_ms=500).items():
            for rec in records:
                got.setdefault(tp.partition, []).append((rec.offset, rec.key, rec.value, list(rec.headers)))
                count += 1
    assert count == expected, f"consumed {count} of {expected} records: {got}"
    return got


def test_produce_consume_exact_bytes_and_offsets(kafka_bootstrap: str, producer: KafkaProducer) -> None:  # noqa: F811
    topic = new_topic(kafka_bootstrap, partitions=3)
    expected: dict[int, list[Record]] = {0: [], 1: [], 2: []}
    futures = []
    for partition in range(3):
        for i in range(5):
            key: bytes | None = bytes([partition, i, 0, 255, 0x80]) + b"\x00k"
            value: bytes | None = bytes(range(256)) * (i + 1) + f"p{partition}-{i}".encode()
            headers = [("h", bytes([i, 0, 255]))]
            if i == 3:
                key = None  # keyless record
            if i == 4:
                value = None  # tombstone must come back as None, not b""
                headers = []
            if (partition, i) == (2, 0):
                value = b""  # empty value stays empty
            if (partition, i) == (1, 2):
                value = os.urandom(200_000)  # bigger than one default fetch chunk of a partition is fine too
            futures.append(
                (
                    partition,
                    i,
                    producer.send(topic, value=value, key=key, headers=headers, partition=partition),
                )
            )
            expected[partition].append((i, key, value, headers))
    producer.flush(timeout=15)
    for partition, i, future in futures:
        meta = future.get(timeout=15)
        assert (meta.topic, meta.partition, meta.offset) == (topic, partition, i)

    consumer = _consumer(kafka_bootstrap, max_partition_fetch_bytes=1_048_576)
    try:
        tps = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got = _drain(consumer, expected=15)
    finally:
        consumer.close(autocommit=False)
    assert got == expected


def test_beginning_end_offsets_and_offsets_for_times(kafka_bootstrap: str, producer: KafkaProducer) -> None:  # noqa: F811
    topic = new_topic(kafka_bootstrap, partitions=2)
    base_ms = (int(time.time()) - 3600) * 1000  # in the past: the broker rejects timestamps > 1 h ahead
    for i in range(6):
        producer.send(topic, value=f"v{i}".encode(), partition=0, timestamp_ms=base_ms + i * 1000)
    producer.send(topic, value=b"only", partition=1, timestamp_ms=base_ms + 10_000)
    producer.flush(timeout=15)

    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = _consumer(kafka_bootstrap)
    try:
        assert consumer.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert consumer.end_offsets([tp0, tp1]) == {tp0: 6, tp1: 1}

        found = consumer.offsets_for_times({tp0: base_ms + 2500, tp1: base_ms})
        assert found[tp0] is not None and found[tp0].offset == 3 and found[tp0].timestamp == base_ms + 3000
        assert found[tp1] is not None and found[tp1].offset == 0 and found[tp1].timestamp == base_ms + 10_000
        exact = consumer.offsets_for_times({tp0: base_ms + 1000})
        assert exact[tp0] is not None and exact[tp0].offset == 1
        assert consumer.offsets_for_times({tp0: base_ms + 60_000}) == {tp0: None}  # after the last record

        consumer.assign([tp0])
        consumer.seek(tp0, found[tp0].offset)
        got = _drain(consumer, expected=3)
        assert [(off, val) for off, _k, val, _h in got[0]] == [(3, b"v3"), (4, b"v4"), (5, b"v5")]
    finally:
        consumer.close(autocommit=False)


def test_consumer_group_commit_and_committed(kafka_bootstrap: str, producer: KafkaProducer) -> None:  # noqa: F811
    topic = new_topic(kafka_bootstrap, partitions=2)
    for partition in range(2):
        for i in range(4):
            producer.send(topic, value=f"{partition}:{i}".encode(), partition=partition)
    producer.flush(timeout=15)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    group = f"group-{uuid.uuid4().hex[:8]}"

    first = _consumer(kafka_bootstrap, group_id=group)
    try:
        first.subscribe([topic])
        got = _drain(first, expected=8)  # also proves the group coordinator (RF=1 __consumer_offsets) works
        assert sorted(got) == [0, 1]
        assert first.committed(tp0) is None  # nothing committed yet
        first.commit({tp0: OffsetAndMetadata(2, "checkpoint-a", -1), tp1: OffsetAndMetadata(4, "", -1)})
        assert first.committed(tp0) == 2
        assert first.committed(tp1) == 4
        with_meta = first.committed(tp0, metadata=True)
        assert with_meta.offset == 2 and with_meta.metadata == "checkpoint-a"
    finally:
        first.close(autocommit=False)

    second = _consumer(kafka_bootstrap, group_id=group)
    try:
        assert second.committed(tp0) == 2 and second.committed(tp1) == 4  # read back from the broker
        second.subscribe([topic])
        resumed = _drain(second, expected=2)  # only p0 offsets 2 and 3 remain after the commit
        assert {p: [(off, val) for off, _k, val, _h in recs] for p, recs in resumed.items()} == {
            0: [(2, b"0:2"), (3, b"0:3")]
        }
    finally:
        second.close(autocommit=False)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "replicator.sim.localkafka", *args],
        cwd=localkafka.REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_cli_up_up_down_is_idempotent(tmp_path: Path) -> None:
    state = tmp_path / "state"
    port = localkafka.free_ports(1)[0]
    bootstrap = f"127.0.0.1:{port}"
    try:
        first = _cli("up", "--state-dir", str(state), "--port", str(port))
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip() == bootstrap
        pid = int((state / "broker.pid").read_text())
        assert localkafka.pid_alive(pid)

        second = _cli("up", "--state-dir", str(state), "--port", str(port))
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == bootstrap
        assert "already running" in second.stderr
        assert int((state / "broker.pid").read_text()) == pid  # no second JVM

        new_topic(bootstrap)  # the detached broker outlived the `up` process and serves clients
        status = _cli("status", "--state-dir", str(state))
        assert status.returncode == 0 and status.stdout.strip() == bootstrap

        down = _cli("down", "--state-dir", str(state))
        assert down.returncode == 0, down.stderr
        assert not localkafka.pid_alive(pid)  # `down` waits until the process is gone
        assert not (state / "broker.pid").exists()

        again = _cli("down", "--state-dir", str(state))
        assert again.returncode == 0 and "not running" in again.stderr
        assert _cli("status", "--state-dir", str(state)).returncode == 1
    finally:
        localkafka.stop(state)  # never leak a detached JVM, whatever failed above


def test_cluster_ids_never_look_like_flags() -> None:
    from replicator.sim.localkafka import new_cluster_id

    assert not any(new_cluster_id().startswith("-") for _ in range(5000))
