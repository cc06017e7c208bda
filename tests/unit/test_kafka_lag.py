"""The Kafka lag of the progress line: records on the broker not read yet. The Spark reader's
consumer reads nothing (the executors do), so its lag is measured from where the batches read
to, not from the consumer's position, which stays at the restart cursors of the run's start."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kafka import TopicPartition

from replicator.codec.values import InvalidText
from replicator.delta.ddl.scope import ddl_scope
from replicator.engine.batch import BatchLoop
from replicator.engine.loop import LoopOptions
from replicator.events import TP
from replicator.progress import Cursor, Progress
from replicator.sources.kafka import KafkaSettings, KafkaSource, kafka_lag
from tests.support.fake_kafka import FakeConsumer


def test_lag_is_end_less_position_per_partition() -> None:
    assert kafka_lag({0: 10, 1: 5}, {0: 7, 1: 5}) == 3
    assert kafka_lag({0: 10}, {0: 12}) == 0  # ends seen earlier than the position: no negative lag
    assert kafka_lag({0: 10, 1: 4}, {0: None}) == 14  # without a position: from offset 0
    assert kafka_lag({}, {0: 3}) == 0


class _Consumer(FakeConsumer):
    """Positions as kafka-python's consumer reports them; `start` reads these end offsets."""

    def __init__(self, ends: Mapping[int, int], positions: Mapping[int, int]) -> None:
        self.ends = ends
        self.positions = positions

    def end_offsets(self, tps: list[TopicPartition], timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        return {tp: self.ends[tp.partition] for tp in tps}

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        return self.positions[tp.partition]

    def highwater(self, tp: TopicPartition) -> int | None:
        return None  # no fetch response yet: the end offsets seen at start count


def _source(ends: Mapping[int, int], positions: Mapping[int, int]) -> KafkaSource:
    """A KafkaSource past `start`: these end offsets seen, its consumer at these positions."""
    consumer = _Consumer(ends, positions)
    src = KafkaSource(KafkaSettings("127.0.0.1:1", topic="t"), consumer_factory=lambda **config: consumer)
    src.start(dict.fromkeys((TP("t", p) for p in ends), None))
    return src


def test_the_consumers_lag_counts_from_its_position() -> None:
    assert _source({0: 100, 1: 50}, {0: 100, 1: 20}).lag() == 30


def test_a_lag_read_elsewhere_counts_from_where_it_was_read_to() -> None:
    # The consumer was seeked to the cursors (0, 0) and never read; the batch read both partitions
    # to their ends. Partitions the reader does not name count from the consumer's position.
    src = _source({0: 100, 1: 50, 2: 9}, {0: 0, 1: 0, 2: 4})
    assert src.lag() == 155
    assert src.lag(read_to={TP("t", 0): 100, TP("t", 1): 50}) == 5
    assert src.lag(read_to={TP("t", 0): 100, TP("t", 1): 50, TP("t", 2): 9}) == 0


class _Kafka:
    """What the batch loop's source asks of the Kafka source for the lag."""

    def __init__(self) -> None:
        self.name = "t"
        self.asked: list[dict[TP, int] | None] = []

    def lag(self, read_to: Mapping[TP, int] | None = None) -> int:
        self.asked.append(dict(read_to) if read_to is not None else None)
        return 0


def test_the_spark_readers_lag_is_measured_from_its_windowers_read_offsets() -> None:
    kafka = _Kafka()
    progress = Progress(cursors={TP("t", 0): Cursor(40, 0), TP("t", 1): Cursor(7, 0)})
    loop = BatchLoop(cast(Any, kafka), "t", cast(Any, None), progress, LoopOptions(until_caught_up=True),
                     read=cast(Any, None), scope_of=ddl_scope, invalid_text=InvalidText())
    assert loop.source.lag() == 0
    assert kafka.asked[-1] == {TP("t", 0): 40, TP("t", 1): 7}  # before any batch: the restart cursors
    loop.windower.read_to(TP("t", 0), 100)  # what a batch does once read (engine/batch.py `_batch`)
    loop.windower.read_to(TP("t", 1), 50)
    loop.source.lag()
    assert kafka.asked[-1] == {TP("t", 0): 100, TP("t", 1): 50}
