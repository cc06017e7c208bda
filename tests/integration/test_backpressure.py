"""Backpressure end to end (real broker, real Delta): a catch-up of a skewed canal-json stream (TiCDC's
table dispatcher, one hot table taking most changes, so one partition carries most rows) with a
small --max-buffer-rows. The tables equal the simulator's truth, and a step forced by the full
buffer carries much of it instead of one resolved window (before pausing: 48 steps of median 19
rows for this stream at this bound)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.warehouse import Warehouse
from replicator.sim.model import SimConfig
from replicator.sim.simcheck import compare_tables, read_warehouse
from replicator.sim.sinks import produce as produce_sim
from replicator.sim.stream import Simulation
from tests.integration.helpers import run_engine
from tests.kafka_fixtures import kafka_bootstrap, new_topic  # noqa: F401  (kafka_bootstrap is a fixture)

pytestmark = pytest.mark.integration

BUFFER = 300


def test_a_skewed_catch_up_with_a_small_buffer_is_exact_and_makes_full_steps(
        kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:  # noqa: F811
    sim = Simulation(SimConfig(protocol="canal-json", seed=5, events=1500, partitions=3, tables=4, ddl="none",
                               dispatcher="table", hot_share=0.8))
    topic = new_topic(kafka_bootstrap, 3)
    produce_sim(sim, kafka_bootstrap, topic)
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", max_buffer_rows=BUFFER)
    assert summary.watermark == sim.expected.watermark
    assert compare_tables(sim.expected, read_warehouse(spark, wh)) == []
    rows = [sum(t.get("upserts", 0) + t.get("deletes", 0) for t in r.get("tables", {}).values() if isinstance(t, dict))
            for r in Warehouse(wh).windows()]
    rows = [n for n in rows if n]
    assert statistics.median(rows) >= BUFFER / 3, rows
