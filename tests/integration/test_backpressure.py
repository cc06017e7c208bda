"""Backpressure and spilling end to end (real broker, real Delta): a catch-up of a skewed canal-json
stream (TiCDC's table dispatcher, one hot table taking most changes, so one partition carries most
rows) with a small --max-buffer-rows pauses and resumes partitions many times and spills what is
complete, and the tables still equal the simulator's truth. (How much faster that is: `make
bench`, section skew.)"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from replicator.changes import ChangeSummary
from replicator.events import TP
from replicator.sim.model import SimConfig
from replicator.sim.simcheck import compare_tables, read_warehouse
from replicator.sim.sinks import produce as produce_sim
from replicator.sim.stream import Simulation
from replicator.sources.kafka import KafkaSource
from replicator.sources.spark_reader import SparkBatch
from replicator.sources.spill import SpillFiles
from replicator.sources.spill_index import TypedRows
from replicator.tables import TableName
from tests.integration.helpers import run_engine
from tests.kafka_fixtures import kafka_bootstrap, new_topic  # noqa: F401  (kafka_bootstrap is a fixture)

pytestmark = pytest.mark.integration


def test_a_skewed_catch_up_with_a_small_buffer_pauses_spills_and_stays_exact(
        kafka_bootstrap: str, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A 100-row buffer pauses partitions, and (--spill-rows, the default) moves its complete rows
    to the warehouse's spill (decoded as they are spilled) instead of forcing a step: the run steps
    as the default buffer's does (its DDLs cut the same steps; unit-tested: without spilling,
    several times as many), every table equals the simulator's, and nothing is left in the spill."""
    sim = Simulation(SimConfig(protocol="canal-json", seed=7, events=1500, partitions=3, tables=4, ddl="auto",
                               dispatcher="table", hot_share=0.8))
    topic = new_topic(kafka_bootstrap, 3)
    produce_sim(sim, kafka_bootstrap, topic)
    paused: list[frozenset[TP]] = []
    real = KafkaSource.pause_only

    def recorded(self: KafkaSource, partitions: Collection[TP]) -> None:
        paused.append(frozenset(partitions))
        real(self, partitions)

    monkeypatch.setattr(KafkaSource, "pause_only", recorded)
    typed: list[TypedRows | None] = []
    real_typed = SpillFiles.typed

    def typed_of(self: SpillFiles, table: TableName) -> TypedRows | None:
        typed.append(real_typed(self, table))
        return typed[-1]

    monkeypatch.setattr(SpillFiles, "typed", typed_of)
    summaries: list[ChangeSummary | None] = []
    real_summary = SparkBatch.summary

    def summary_of(self: SparkBatch, *args: Any) -> ChangeSummary | None:
        summaries.append(real_summary(self, *args))
        return summaries[-1]

    monkeypatch.setattr(SparkBatch, "summary", summary_of)
    steps = {}
    for label, buffer in (("spilled", 100), ("default", None)):
        wh = tmp_path / label
        kw = {} if buffer is None else {"max_buffer_rows": buffer}
        summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", **kw)
        assert summary.watermark == sim.expected.watermark, label
        assert compare_tables(sim.expected, read_warehouse(spark, wh)) == [], label
        assert not (wh / "_replicator" / "spill").exists(), label
        steps[label] = summary.steps
        if label == "spilled":
            assert sum(1 for p in paused if p) >= 3 and frozenset() in paused  # paused, and resumed
            # tables created in the buffer: their rows decoded as they were spilled, under their CREATE's spec
            assert any(t is not None for t in typed), typed
            # and their spans written without a Spark job counting them: the driver's index did
            assert any(s is not None and s.rows for s in summaries), summaries
    assert steps["spilled"] <= steps["default"] + 1, steps
