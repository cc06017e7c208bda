"""`--reader spark` against `--reader driver`: the same streams (replays, DDL mid-stream, key
changes, every column type, both protocols, a bad message under stop and under skip) give the
same tables, dead letters and progress state, and both equal the simulator's expected state;
a warehouse switches readers mid-stream and continues exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.deadletter import read_dead_letters
from replicator.delta.warehouse import Warehouse
from replicator.errors import DecodeError
from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from tests.integration.helpers import produce, run_engine
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration

GARBAGE = b"\x00\x01not a TiCDC message\xff"


def _sim(protocol: str, seed: int, events: int = 1500) -> tuple[Simulation, list[tuple[int, bytes | None, bytes]]]:
    sim = Simulation(SimConfig(protocol=protocol, seed=seed, events=events, partitions=3, tables=4,  # type: ignore[arg-type]
                               ddl="auto"))
    return sim, list(sim.messages())


def _progress(wh: Path) -> dict[str, Any]:
    """What both readers must agree on: applied watermark, restart cursors, DDL ledger, the live
    tables of the catalog (name, key, columns)."""
    state = json.loads((wh / "_replicator" / "state.json").read_text())
    wire = Warehouse(wh).load_state()
    tables = sorted((e.schema_name, e.table, tuple(e.key), json.dumps(e.spec["columns"], sort_keys=True))
                    for e in wire.tables.values() if e.status == "live")
    return {"applied_ts": state["applied_ts"], "partitions": state["partitions"],
            "ddl_ledger": state["ddl_ledger"], "tables": tables}


def _dead(spark: Any, wh: Path) -> list[tuple[Any, ...]]:
    return [(d["topic"], d["partition"], d["offset"], d["key"], d["value"], d["error"])
            for d in read_dead_letters(spark, Warehouse(wh))]


@pytest.mark.parametrize("protocol", ["open", "craft"])
def test_spark_reader_equals_driver_reader(kafka_bootstrap: str, spark: Any, tmp_path: Path, protocol: str) -> None:
    sim, msgs = _sim(protocol, seed=31 if protocol == "open" else 32)
    topic = new_topic(kafka_bootstrap, 3)
    produce(kafka_bootstrap, topic, msgs)
    driver, on_spark = tmp_path / "driver", tmp_path / "spark"
    a = run_engine(kafka_bootstrap, topic, driver, spark, protocol=protocol)
    b = run_engine(kafka_bootstrap, topic, on_spark, spark, protocol=protocol, reader="spark")
    exp = sim.expected
    assert check_warehouse(spark, driver, exp) == []
    assert check_warehouse(spark, on_spark, exp) == []
    assert _progress(on_spark) == _progress(driver)
    assert (b.records, b.rows, b.replays_dropped, b.already_applied, b.watermark) == (
        a.records, a.rows, a.replays_dropped, a.already_applied, a.watermark)
    assert b.replays_dropped > 0 and b.ddl_applied == a.ddl_applied > 0
