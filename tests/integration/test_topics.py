"""Integration (real broker, real Delta): a changefeed dispatched one topic per table plus a default
topic, replicated by one replicator following every topic (`--topic-pattern`) or a list of them
(`--topic` repeated), as a scheduled job and as a follower that sees topics appear; the tables
equal the simulator's expected ones. The kill -9 variant is in tests/reliability/test_kills.py."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from replicator.engine.pipeline import Engine, RunOptions
from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from replicator.sim.sinks import produce_topics
from replicator.sim.topics import TopicDispatch
from replicator.sources.kafka import KafkaSettings, KafkaSource
from replicator.warehouse import Warehouse
from tests.integration.helpers import Background
from tests.support.waiting import poll_until
from tests.support.warehouse import applied_ts

pytestmark = pytest.mark.integration

EVENTS = 120  # small: each run is a few Spark steps
# the DDLs that shape the layout (schema DDL on the default topic, a table created mid-stream, one
# dropped, one renamed to a new topic); the column DDLs are covered per topic elsewhere
LAYOUT_DDL = "create_schema,create_table,drop_table,rename_table"


def dispatched(seed: int, protocol: str = "open") -> TopicDispatch:
    """4 tables, 2 partitions per topic: one table created mid-stream and dropped for good, one
    renamed (its new name's topic appears then), schema DDL and watermarks on the default topic."""
    sim = Simulation(SimConfig(protocol=protocol, seed=seed, events=EVENTS, partitions=2, tables=4,  # type: ignore[arg-type]
                               ddl=LAYOUT_DDL, recreate_dropped=False, resolved_every=8))
    return TopicDispatch(sim, prefix=f"tpt{uuid.uuid4().hex[:6]}_")


def source(bootstrap: str, *, pattern: str | None = None, topics: tuple[str, ...] = ()) -> KafkaSource:
    return KafkaSource(KafkaSettings(bootstrap, topics=topics, topic_pattern=pattern,
                                     group_id=f"test-{uuid.uuid4().hex[:8]}"))


def run(src: KafkaSource, wh: Path, spark: Any, protocol: str, *, follow: bool = False) -> Engine:
    return Engine(src, RunOptions(warehouse=str(wh), protocol=protocol, until_caught_up=not follow,  # type: ignore[arg-type]
                                  progress=False), spark=spark)


def test_scheduled_runs_with_a_pattern_and_with_a_topic_list(kafka_bootstrap: str, spark: Any,
                                                             tmp_path: Path) -> None:
    d = dispatched(seed=5)
    produce_topics(d.records(), kafka_bootstrap, d.partitions)
    topics = d.topics()
    assert len(topics) == 6 and d.default_topic in topics  # 4 tables, the renamed one's new name, default

    by_pattern = run(source(kafka_bootstrap, pattern=f"{d.prefix}.*"), tmp_path / "p", spark, "open").run()
    assert by_pattern.error is None and by_pattern.source == f"~{d.prefix}.*"
    assert check_warehouse(spark, tmp_path / "p", d.sim.expected) == []
    state = Warehouse(tmp_path / "p").load_state()
    assert {tp.topic for tp in state.progress.cursors} == set(topics)
    # the dropped table's topic and the renamed table's old one got no watermark after their DDL
    assert len(state.progress.quiet_topics) == 2

    by_list = run(source(kafka_bootstrap, topics=tuple(topics)), tmp_path / "l", spark, "open").run()
    assert by_list.error is None
    assert check_warehouse(spark, tmp_path / "l", d.sim.expected) == []
    # a rerun finds nothing new, and the quiet topics do not hold it back
    again = run(source(kafka_bootstrap, topics=tuple(topics)), tmp_path / "l", spark, "open").run()
    assert again.steps == 0 and again.watermark == d.sim.expected.watermark


def records_read(follower: Background) -> int:
    """Records the follower's loop has read so far (0 before its loop starts)."""
    loop = getattr(follower.engine, "_loop", None)
    return 0 if loop is None else loop.counts.records


@pytest.mark.parametrize("how", ["pattern", pytest.param("list", marks=pytest.mark.soak)])  # list: `make soak`
def test_a_follower_reads_topics_that_appear_while_it_runs(kafka_bootstrap: str, spark: Any, tmp_path: Path,
                                                           how: str) -> None:
    d = dispatched(seed=8, protocol="canal-json")
    records = list(d.records())
    every = d.topics()
    # the first part: the tables created at the start, before the mid-stream CREATE's topic exists
    first = {t for t, _ in records[: len(records) // 4]}
    assert first < set(every)
    wh = tmp_path / "wh"
    produce_topics(records[: len(records) // 4], kafka_bootstrap, d.partitions)
    src = source(kafka_bootstrap, pattern=f"{d.prefix}.*") if how == "pattern" else \
        source(kafka_bootstrap, topics=tuple(every))  # listed topics that do not exist yet join when they appear
    follower = Background(run(src, wh, spark, "canal-json", follow=True))
    # The follower has read the first part (a step, or every record of it: the first part may hold
    # no complete window, so waiting for a step alone would sit out the whole deadline).
    read = poll_until(lambda: Warehouse(wh).load_state().steps > 0 or records_read(follower) >= len(records) // 4
                      or not follower.thread.is_alive(), 120, every=0.2)
    assert follower.thread.is_alive() and read, "the follower did not read the first part"
    produce_topics(records[len(records) // 4:], kafka_bootstrap, d.partitions)
    final = d.sim.expected.watermark
    poll_until(lambda: applied_ts(wh) >= final or not follower.thread.is_alive(), 180, every=0.3)
    summary = follower.stop()
    assert summary.error is None and summary.watermark == final
    assert check_warehouse(spark, wh, d.sim.expected) == []
    assert {tp.topic for tp in Warehouse(wh).load_state().progress.cursors} == set(every)
