"""A broker restart seen while asking a position: kafka-python validates positions over the
network after a leader change (KIP-320) and raises that request's connection error from
`position()`. It is an outage like a failed poll: counted against the retry budget, never a raw
kafka-python error out of the run (seen: a restart mid-run stopped the run with
KafkaConnectionError instead of reading on once the broker was back)."""

from __future__ import annotations

import time

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaConnectionError

from replicator.errors import KafkaSourceError
from replicator.events import TP
from replicator.sources.kafka import KafkaSettings, KafkaSource
from tests.support.fake_kafka import FakeConsumer


class _Consumer(FakeConsumer):
    """Positions while the broker is away (`down`) or back; before that, `start` answered for a
    partition whose end offset is 10."""

    def __init__(self) -> None:
        self.down = True
        self.asked = 0

    def end_offsets(self, tps: list[TopicPartition], timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 10)

    def position(self, tp: TopicPartition, timeout_ms: int | None = None) -> int:
        self.asked += 1
        if self.down:
            raise KafkaConnectionError("111 ECONNREFUSED")
        return 10

    def highwater(self, tp: TopicPartition) -> int | None:
        return 12


def _source(budget_s: float) -> tuple[KafkaSource, _Consumer]:
    """A KafkaSource past `start` on one partition whose end offset at start was 10."""
    consumer = _Consumer()
    src = KafkaSource(KafkaSettings("127.0.0.1:1", topic="t", retry_budget_s=budget_s),
                      consumer_factory=lambda **config: consumer)
    src.start({TP("t", 0): None})
    return src, consumer


def test_a_failed_position_is_an_outage_within_the_budget() -> None:
    src, consumer = _source(budget_s=60.0)
    assert src.caught_up() is False  # position unknown: not caught up, and no raw error
    assert src.backlogged() is False
    assert src.partition_lags() == {TP("t", 0): 12}
    assert src.outages == 1  # one outage, however often it was asked
    # a position lookup is not a probe (private: the probe pacing shows only by waiting it out)
    assert src._probe_delay == src.settings.probe_after_s
    consumer.down = False
    assert src.caught_up() is True
    assert src.backlogged() is True  # position 10 below the high watermark 12


def test_a_failed_position_past_the_budget_stops_clearly() -> None:
    src, _ = _source(budget_s=0.0)
    time.sleep(0.01)  # the last answer (the start's) was a moment ago
    with pytest.raises(KafkaSourceError, match=r"unreachable for .*retry budget 0s.*KafkaConnectionError"):
        src.caught_up()


def test_a_broker_unreachable_at_start_is_given_the_retry_budget_not_more() -> None:
    """kafka-python waits 30 s to bootstrap by default: a shorter budget must hold at start too."""
    seen: list[int] = []

    def factory(**config: object) -> _Consumer:
        seen.append(int(config["bootstrap_timeout_ms"]))  # type: ignore[call-overload]
        return _Consumer()

    for budget in (2.0, 120.0):
        KafkaSource(KafkaSettings("127.0.0.1:1", topic="t", retry_budget_s=budget), consumer_factory=factory)
    assert seen == [2000, 30000]
