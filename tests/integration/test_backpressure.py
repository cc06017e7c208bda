"""Backpressure end to end (real broker, real Delta): a catch-up of a skewed canal-json stream (TiCDC's
table dispatcher, one hot table taking most changes, so one partition carries most rows) with a
small --max-buffer-rows pauses and resumes partitions many times, and the tables still equal the
simulator's truth. (How much fuller the steps get is measured by `make bench`, section skew.)"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from replicator.events import TP
from replicator.sim.model import SimConfig
from replicator.sim.simcheck import compare_tables, read_warehouse
from replicator.sim.sinks import produce as produce_sim
from replicator.sim.stream import Simulation
from replicator.sources.kafka import KafkaSource
from tests.integration.helpers import run_engine
from tests.kafka_fixtures import kafka_bootstrap, new_topic  # noqa: F401  (kafka_bootstrap is a fixture)

pytestmark = pytest.mark.integration


def test_a_skewed_catch_up_with_a_small_buffer_pauses_and_stays_exact(
        kafka_bootstrap: str, spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    sim = Simulation(SimConfig(protocol="canal-json", seed=5, events=1500, partitions=3, tables=4, ddl="auto",
                               dispatcher="table", hot_share=0.8))
    topic = new_topic(kafka_bootstrap, 3)
    produce_sim(sim, kafka_bootstrap, topic)
    paused: list[frozenset[TP]] = []
    real = KafkaSource.pause_only

    def recorded(self: KafkaSource, partitions: Collection[TP]) -> None:
        paused.append(frozenset(partitions))
        real(self, partitions)

    monkeypatch.setattr(KafkaSource, "pause_only", recorded)
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", max_buffer_rows=300)
    assert summary.watermark == sim.expected.watermark
    assert compare_tables(sim.expected, read_warehouse(spark, wh)) == []
    assert sum(1 for p in paused if p) >= 3 and frozenset() in paused  # paused, and resumed


def test_a_small_buffer_spills_and_steps_about_as_the_default_buffer_does(
        kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:  # noqa: F811
    """With --spill-rows (the default) a full buffer's complete rows wait in the warehouse's spill
    instead of forcing a step: the run makes about as many steps as the default buffer does (a DDL
    still cuts them), far fewer than without spilling, and every table equals the simulator's."""
    sim = Simulation(SimConfig(protocol="canal-json", seed=7, events=1500, partitions=3, tables=4, ddl="auto",
                               dispatcher="table", hot_share=0.8))
    topic = new_topic(kafka_bootstrap, 3)
    produce_sim(sim, kafka_bootstrap, topic)
    runs = {}
    for label, kw in (("default", {}), ("spilled", {"max_buffer_rows": 100}),
                      ("unspilled", {"max_buffer_rows": 100, "spill_rows": 0})):
        wh = tmp_path / label
        runs[label] = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", **kw)
        assert runs[label].watermark == sim.expected.watermark, label
        assert compare_tables(sim.expected, read_warehouse(spark, wh)) == [], label
        spill = wh / "_replicator" / "spill"
        assert not spill.exists() or not any(p.is_file() for p in spill.rglob("*")), label  # applied: deleted
    steps = {label: s.steps for label, s in runs.items()}
    assert steps["spilled"] <= 2 * steps["default"] + 2, steps
    assert steps["unspilled"] >= 3 * steps["spilled"], steps
