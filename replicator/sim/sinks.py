"""Sinks of a simulated stream: a Kafka topic or a capture-archive directory.

kafka-python and the archive writer are imported lazily, so the simulator itself stays pure.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from replicator.errors import ConfigError, ReplicatorError
from replicator.sim.stream import Simulation

if TYPE_CHECKING:
    from replicator.sim.topics import TopicMessage


@dataclass
class SinkReport:
    """What a sink wrote: records per partition, the time it took, and the target (for summaries)."""

    records: dict[int, int]
    elapsed_s: float
    target: str

    @property
    def total(self) -> int:
        return sum(self.records.values())


def ensure_topic(bootstrap: str, topic: str, partitions: int, *, timeout_s: float = 30.0) -> None:
    """Create ``topic`` with ``partitions`` partitions, or check that an existing one is empty and
    has that many (a simulated stream must be the whole topic for its expected state to hold)."""
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError, TopicAlreadyExistsError

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="replicator-simulate",
                                 request_timeout_ms=int(timeout_s * 1000))
    except KafkaError as exc:
        raise ReplicatorError(f"cannot connect to Kafka at {bootstrap}: {exc}") from None
    try:
        with contextlib.suppress(TopicAlreadyExistsError):
            admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}},
                                timeout_ms=int(timeout_s * 1000))
        admin.wait_for_topics([topic], timeout_ms=int(timeout_s * 1000))
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + timeout_s
        parts = consumer.partitions_for_topic(topic)
        while not parts and time.monotonic() < deadline:
            time.sleep(0.2)
            parts = consumer.partitions_for_topic(topic)
        if not parts:
            raise ReplicatorError(f"topic {topic!r} did not appear on {bootstrap}")
        if len(parts) != partitions:
            raise ConfigError(f"topic {topic!r} exists with {len(parts)} partitions, not --partitions {partitions}; "
                              "simulate into a new topic")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        ends = consumer.end_offsets(tps)
        begins = consumer.beginning_offsets(tps)
        if any(ends[tp] > begins[tp] for tp in tps):
            raise ConfigError(f"topic {topic!r} already holds records; simulate into a new (or empty) topic, "
                              "since its expected state describes the whole topic")
    finally:
        consumer.close()


def produce(sim: Simulation, bootstrap: str, topic: str, *, progress: Callable[[int], None] | None = None,
            create: bool = True) -> SinkReport:
    """Produce the stream into ``topic`` (created if missing): batched, lingering, idempotent (so
    per-partition order survives retries), acks=all; fails if any record was not acknowledged."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    if create:
        ensure_topic(bootstrap, topic, sim.config.partitions)
    started = time.monotonic()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=1 << 20,
                             max_request_size=32 << 20, enable_idempotence=True,
                             client_id="replicator-simulate")
    counts = {p: 0 for p in range(sim.config.partitions)}
    failures: list[BaseException] = []

    def failed(exc: BaseException) -> None:
        failures.append(exc)

    try:
        for i, m in enumerate(sim.records(), 1):
            producer.send(topic, key=m.key, value=m.value, partition=m.partition).add_errback(failed)
            counts[m.partition] += 1
            if progress is not None and i % 10_000 == 0:
                progress(i)
        producer.flush()
    except KafkaError as exc:
        raise ReplicatorError(f"producing to {topic!r} on {bootstrap} failed: {exc}") from None
    finally:
        producer.close()
    if failures:
        raise ReplicatorError(f"{len(failures)} record(s) were not acknowledged by {bootstrap}: {failures[0]}")
    return SinkReport(counts, time.monotonic() - started, f"topic {topic} on {bootstrap}")


def write_archive(sim: Simulation, directory: str | Path, topic: str, *, rotate_bytes: int | None = None) -> SinkReport:
    """Write the stream as a capture archive (the same frames ``replicator capture`` writes):
    offsets count from 0 per partition, timestamps are the simulated commit times."""
    from replicator.formats.archive import DEFAULT_ROTATE_BYTES, ArchiveWriter, list_archive_files

    out = Path(directory)
    if out.exists() and list_archive_files(out):
        raise ConfigError(f"{out} already holds archive files; simulate into a new directory")
    started = time.monotonic()
    counts = {p: 0 for p in range(sim.config.partitions)}
    with ArchiveWriter(out, rotate_bytes=rotate_bytes or DEFAULT_ROTATE_BYTES,
                       creator=f"replicator simulate seed={sim.config.seed}") as writer:
        for m in sim.records():
            writer.write_record(topic=topic, partition=m.partition, offset=counts[m.partition],
                                timestamp_ms=m.timestamp_ms, key=m.key, value=m.value, protocol=sim.config.protocol)
            counts[m.partition] += 1
    return SinkReport(counts, time.monotonic() - started, f"archive {out}")


def produce_topics(records: Iterable[TopicMessage], bootstrap: str, partitions: int) -> dict[tuple[str, int], int]:
    """Produce a topic-per-table stream (`TopicDispatch.records()`, or part of it): each topic is
    created (empty, `partitions` partitions) right before its first record, as TiCDC creates a
    table's topic when the table is created. Returns the records sent per (topic, partition)."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, batch_size=1 << 20,
                             max_request_size=32 << 20, enable_idempotence=True, client_id="replicator-simulate")
    sent: dict[tuple[str, int], int] = {}
    created: set[str] = set()
    failures: list[BaseException] = []
    try:
        for topic, m in records:
            if topic not in created:
                created.add(topic)
                producer.flush()  # what precedes it is on the broker before the new topic appears
                with contextlib.suppress(ConfigError):  # produced in parts: it exists, not empty
                    ensure_topic(bootstrap, topic, partitions)
            producer.send(topic, key=m.key, value=m.value, partition=m.partition).add_errback(failures.append)
            sent[(topic, m.partition)] = sent.get((topic, m.partition), 0) + 1
        producer.flush()
    except KafkaError as exc:
        raise ReplicatorError(f"producing the topic-per-table stream on {bootstrap} failed: {exc}") from None
    finally:
        producer.close()
    if failures:
        raise ReplicatorError(f"{len(failures)} record(s) were not acknowledged by {bootstrap}: {failures[0]}")
    return sent
