"""Broker faults: the broker stops mid-run and comes back (the run retries and completes), stays
away past the retry budget (the run stops non-zero with a clear message, nothing lost, and a rerun
completes), and partitions are added to the topic mid-stream (picked up while following, and by a
later catch-up run). Tables are compared with the streamgen model's state (`state_at`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewPartitions

from replicator.engine.pipeline import Engine, RunOptions
from replicator.errors import KafkaSourceError
from replicator.events import TP
from replicator.sources.kafka import KafkaSettings, KafkaSource
from replicator.warehouse import Warehouse
from tests.integration.helpers import Background, produce_stream, run_engine
from tests.kafka_fixtures import new_topic
from tests.reliability.common import (
    SOAK,
    PrivateBroker,
    assert_model_state,
    produce_small_batches,
    shifted,
    size,
    stream_records,
)
from tests.streamgen import Stream, generate
from tests.support.cli import run_replicator
from tests.support.waiting import wait_for
from tests.support.warehouse import applied_ts, steps_done

# Generous: other Spark jobs may share the machine; each scenario polls for its conditions.
pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.timeout(7200)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    """A broker of this module's own (not the session one): these tests stop it."""
    b = PrivateBroker(tmp_path_factory.mktemp("private-kafka") / "broker")
    try:
        yield b
    finally:
        b.close()


def _running(broker: PrivateBroker) -> PrivateBroker:
    broker.start()  # no-op when it runs
    return broker


def _slow_reader(bootstrap: str, topic: str, wh: Path, spark: Any, budget: float) -> tuple[Engine, KafkaSource]:
    """A catch-up run whose reads need many round trips (tiny fetches), interleaved with MERGEs,
    so a broker outage lands while it still has to read; probes after 1 s of empty polls."""
    source = KafkaSource(KafkaSettings(bootstrap, topic, group_id=f"rel-{topic}", retry_budget_s=budget,
                                       probe_after_s=1.0, poll_max_records=20, fetch_max_bytes=2048,
                                       max_partition_fetch_bytes=1024))
    opts = RunOptions(warehouse=str(wh), protocol="open", until_caught_up=True, max_buffer_rows=40, spill_rows=0,
                      progress=False)  # a step each full buffer: the outage lands between steps
    return Engine(source, opts, spark=spark), source


def _outage_mid_run(b: PrivateBroker, seed: int, prefix: str, wh: Path, spark: Any,
                    budget: float) -> tuple[Stream, str, Background, KafkaSource]:
    """Produce a stream, start a slow catch-up run, stop the broker once two steps are applied."""
    stream = generate(seed=seed, n_txn=size(100, 1500), n_partitions=3, n_tables=3, truncate_prob=0.02)
    topic = new_topic(b.bootstrap, 3, prefix=prefix)
    produce_small_batches(b.bootstrap, topic, stream_records(stream.partitions, "open"))
    engine, source = _slow_reader(b.bootstrap, topic, wh, spark, budget=budget)
    run = Background(engine)
    wait_for("two applied steps", lambda: steps_done(wh) >= 2 or not run.thread.is_alive(), timeout=600)
    assert run.thread.is_alive(), f"the run ended before the outage: {run.error}"
    b.stop()
    return stream, topic, run, source


def test_broker_restart_mid_run_then_completes(broker: PrivateBroker, spark: Any, tmp_path: Path) -> None:
    b = _running(broker)
    wh = tmp_path / "wh"
    stream, _, run, source = _outage_mid_run(b, 71, "rel-restart", wh, spark, budget=300)
    wait_for("the run to notice the outage", lambda: source.outages >= 1 or not run.thread.is_alive(), timeout=120)
    b.start()
    run.join(timeout=900)
    assert run.error is None, repr(run.error)
    assert source.outages >= 1, "the outage went unnoticed: make the stream larger"
    assert run.summary is not None and run.summary.watermark == stream.final_ts
    assert_model_state(spark, wh, stream.expected, "after a broker restart mid-run")


def test_broker_away_past_retry_budget_stops_clearly_then_rerun_completes(broker: PrivateBroker, spark: Any,
                                                                         tmp_path: Path) -> None:
    b = _running(broker)
    wh = tmp_path / "wh"
    stream, topic, run, _ = _outage_mid_run(b, 72, "rel-budget", wh, spark, budget=8)
    try:
        run.join(timeout=300)  # bounded: the budget, plus the probe and MERGE in flight
        assert isinstance(run.error, KafkaSourceError), repr(run.error)
        text = str(run.error)
        assert "unreachable for" in text and "retry budget 8s" in text and "nothing was lost" in text, text
        assert run.error.exit_code == 1
        # Nothing lost or half-applied: every table is the model's state at the committed watermark.
        applied = applied_ts(wh)
        assert 0 < applied < stream.final_ts
        assert_model_state(spark, wh, stream.state_at(applied), "after giving up on the broker")
        if SOAK:  # the CLI with the broker away (about 30 s of bootstrap timeout): exit 1, one line
            cli = run_replicator("run", "--bootstrap-servers", b.bootstrap, "--topic", topic, "--protocol", "open",
                                 "--warehouse", str(tmp_path / "wh-cli"), "--until-caught-up", timeout=300)
            assert cli.returncode == 1 and "replicator run: error: cannot connect to Kafka" in cli.stderr, cli.stderr
            assert "Traceback" not in cli.stderr
    finally:
        b.start()
    summary = run_engine(b.bootstrap, topic, wh, spark, max_buffer_rows=200)
    assert summary.watermark == stream.final_ts
    assert_model_state(spark, wh, stream.expected, "after the rerun")


def _partition_count(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return len(consumer.partitions_for_topic(topic) or ())
    finally:
        consumer.close()


def test_partitions_added_mid_stream_are_picked_up(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    first = generate(seed=73, n_txn=size(60, 600), n_partitions=2, n_tables=2, truncate_prob=0.0)
    second = shifted(generate(seed=74, n_txn=size(60, 600), n_partitions=3, n_tables=2, truncate_prob=0.0),
                     first.final_ts, "u")
    expected = {**first.expected, **second.expected}
    topic = new_topic(kafka_bootstrap, 2, prefix="rel-grow")
    produce_stream(kafka_bootstrap, topic, first.partitions, "open")
    follow_wh, batch_wh = tmp_path / "follow", tmp_path / "batch"
    # A catch-up run sees the two partitions of the time.
    run_engine(kafka_bootstrap, topic, batch_wh, spark, max_buffer_rows=500)
    # A follower (on a thread: request_stop() ends it), applying every half second.
    source = KafkaSource(KafkaSettings(kafka_bootstrap, topic, group_id=f"rel-{topic}"))
    engine = Engine(source, RunOptions(warehouse=str(follow_wh), protocol="open", progress=False,
                                       flush_interval_s=0.5), spark=spark)
    run = Background(engine)
    try:
        wait_for("the first phase applied", lambda: applied_ts(follow_wh) >= first.final_ts, timeout=600)
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap, request_timeout_ms=30000)
        try:
            admin.create_partitions({topic: NewPartitions(total_count=3)})
        finally:
            admin.close()
        wait_for("the new partition in the metadata", lambda: _partition_count(kafka_bootstrap, topic) == 3,
                 timeout=60, every=1.0)
        produce_stream(kafka_bootstrap, topic, second.partitions, "open")
        wait_for("the second phase applied (incl. the new partition)",
                 lambda: applied_ts(follow_wh) >= second.final_ts or not run.thread.is_alive(), timeout=600)
    finally:
        engine.request_stop()
        run.join(timeout=300)
    assert run.error is None, repr(run.error)
    assert f"{topic}:2" in Warehouse(follow_wh).load_state().partitions  # cursors by "<topic>:<partition>"
    assert_model_state(spark, follow_wh, expected, "follower after partitions were added")
    # The next catch-up run starts with three partitions.
    summary = run_engine(kafka_bootstrap, topic, batch_wh, spark, max_buffer_rows=500)
    assert summary.watermark == second.final_ts
    assert_model_state(spark, batch_wh, expected, "catch-up run after partitions were added")


class _MetadataLagging(KafkaSource):
    """The real source, but its metadata requests fail `misses` times once everything is read: the
    state CI met when the metadata client was still in reconnect backoff after a broker restart
    while the consumer had already read to the end."""

    def __init__(self, settings: KafkaSettings, misses: int) -> None:
        super().__init__(settings)
        self.misses = misses

    def fresh_partitions(self) -> list[int] | None:
        if self.misses and self.caught_up():
            self.misses -= 1
            return None
        return super().fresh_partitions()


def test_caught_up_run_waits_for_metadata_before_ending(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    stream = generate(seed=75, n_txn=size(40, 400), n_partitions=2, n_tables=2, truncate_prob=0.0)
    topic = new_topic(kafka_bootstrap, 2, prefix="rel-meta")
    produce_stream(kafka_bootstrap, topic, stream.partitions, "open")
    source = _MetadataLagging(KafkaSettings(kafka_bootstrap, topic, group_id=f"rel-{topic}"), misses=5)
    opts = RunOptions(warehouse=str(tmp_path / "wh"), protocol="open", until_caught_up=True, progress=False)
    summary = Engine(source, opts, spark=spark).run()
    assert source.misses == 0
    assert summary.watermark == stream.final_ts, "the run ended caught up with ready steps left unapplied"
    assert_model_state(spark, tmp_path / "wh", stream.expected, "after metadata came back")


class _Refusing:
    """A metadata client whose every request fails, as when the broker is away."""

    requests = 0

    def describe_topics(self, topics: list[str]) -> Any:
        from kafka.errors import NodeNotReadyError

        _Refusing.requests += 1
        raise NodeNotReadyError("No node_id provided")

    def close(self) -> None:
        pass


def test_metadata_retries_are_paced_and_budgeted(kafka_bootstrap: str) -> None:
    topic = new_topic(kafka_bootstrap, 1, prefix="rel-meta-budget")
    refusing = True
    made: list[Any] = []  # the metadata clients the source made, in order

    def admin(**config: Any) -> Any:
        made.append(_Refusing() if refusing else KafkaAdminClient(**config))
        return made[-1]

    source = KafkaSource(KafkaSettings(kafka_bootstrap, topic, group_id=f"rel-{topic}", retry_budget_s=1.5),
                         admin_factory=admin)
    try:
        assert source.fresh_partitions() is None and _Refusing.requests == 1
        for _ in range(100):  # asked per record while blocked: no request within METADATA_RETRY_S
            assert source.fresh_partitions() is None
        assert _Refusing.requests == 1 and len(made) == 1
        time.sleep(source.METADATA_RETRY_S + 0.1)
        assert source.fresh_partitions() is None and _Refusing.requests == 2
        assert len(made) == 2, "a failed client is kept (kafka-python's backoff would delay its recovery)"
        time.sleep(source.METADATA_RETRY_S + 0.1)
        with pytest.raises(KafkaSourceError, match=r"no answer to metadata .* budget 2s.*nothing was lost"):
            source.fresh_partitions()
        time.sleep(source.METADATA_RETRY_S + 0.1)
        refusing = False  # a real client: it answers, and the outage is over
        assert source.fresh_partitions() == [TP(topic, 0)]
        assert source._meta_down_since is None  # private: shows only in how a next outage is counted
    finally:
        source.close()
