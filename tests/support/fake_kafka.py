"""A stand-in for kafka-python's consumer, injected through `KafkaSource(consumer_factory=...)`:
what `start` asks of every consumer (assign, beginning offsets, seek); subclasses answer the
offsets a test is about."""

from __future__ import annotations

from kafka import TopicPartition


class FakeConsumer:
    """Every partition begins at offset 0; assignments and seeks are accepted and forgotten."""

    def assign(self, tps: list[TopicPartition]) -> None:
        pass

    def beginning_offsets(self, tps: list[TopicPartition], timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 0)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        pass
