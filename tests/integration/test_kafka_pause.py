"""The Kafka source's pause/resume against a real broker (the loop's backpressure): every record of
every partition is handed out exactly once, in offset order, however partitions are paused and
resumed between polls; a paused partition hands out nothing. kafka-python 3.0.12 left a
resumed partition's parked records behind for good (`KafkaSource._unpark`): this test hung then."""

from __future__ import annotations

import random

from replicator.events import TP
from replicator.sources.kafka import KafkaSettings, KafkaSource
from tests.integration.helpers import produce
from tests.kafka_fixtures import kafka_bootstrap, new_topic  # noqa: F401  (kafka_bootstrap is a fixture)


def test_pausing_and_resuming_partitions_loses_and_repeats_nothing(kafka_bootstrap: str) -> None:  # noqa: F811
    topic = new_topic(kafka_bootstrap, partitions=3, prefix="pause")
    per_partition = 3000
    produce(kafka_bootstrap, topic, ((p, None, f"{p}:{i}:".encode() + b"x" * 200)
                                     for i in range(per_partition) for p in range(3)))
    source = KafkaSource(KafkaSettings(kafka_bootstrap, topic, group_id=None, poll_max_records=150))
    try:
        parts = source.partitions()
        source.start({p: None for p in parts})
        nxt = {p: 0 for p in parts}
        rng = random.Random(7)
        polls = 0
        while any(n < per_partition for n in nxt.values()):
            polls += 1
            assert polls < 400, f"reading stalled at {nxt}"
            paused = set(rng.sample(parts, rng.randint(0, 2)))
            source.pause_only(paused)
            for rec in source.poll():
                tp = TP(rec.topic, rec.partition)
                assert tp not in paused, f"{tp} handed out records while paused"
                assert rec.offset == nxt[tp], f"{tp}: offset {rec.offset}, expected {nxt[tp]}"
                assert rec.value is not None and rec.value.startswith(f"{tp.partition}:{rec.offset}:".encode())
                nxt[tp] += 1
        source.pause_only([])
        assert source.poll() == []
        assert source.caught_up()
    finally:
        source.close()
