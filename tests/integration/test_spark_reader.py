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
from replicator.delta.writer import delta_ref
from replicator.errors import DecodeError
from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, run_engine
from tests.kafka_fixtures import new_topic
from tests.support.waiting import Deadline, poll_until
from tests.support.warehouse import applied_ts

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
    return {"applied_ts": state["applied_ts"], "positions": state["positions"],
            "ddl_ledger": state["ddl_ledger"], "tables": tables}


def _dead(spark: Any, wh: Path) -> list[tuple[Any, ...]]:
    return [(d["topic"], d["partition"], d["offset"], d["key"], d["value"], d["error"])
            for d in read_dead_letters(spark, Warehouse(wh))]


def _most_files_a_step_added(spark: Any, wh: Path) -> int:
    """The most data files one append or MERGE added to a table (delta/session.py `one_file`)."""
    most = 0
    for e in Warehouse(wh).load_state().tables.values():
        if e.status != "live":
            continue
        for h in spark.sql(f"DESCRIBE HISTORY {delta_ref(e.path)}").collect():
            m = h["operationMetrics"] or {}
            if h["operation"] == "WRITE" and (h["operationParameters"] or {}).get("mode") == "Append":
                most = max(most, int(m.get("numFiles", "0")))
            elif h["operation"] == "MERGE":
                most = max(most, int(m.get("numTargetFilesAdded", "0")))
    return most


@pytest.mark.parametrize("protocol", [pytest.param("open", marks=pytest.mark.soak), "craft"])  # open: `make soak`
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
    assert a.tables_appended > 0, "the driver reader appends fresh inserts"
    assert _most_files_a_step_added(spark, driver) == _most_files_a_step_added(spark, on_spark) == 1, \
        "a small step writes one file per table, from either reader"


def _with_garbage(msgs: list[tuple[int, bytes | None, bytes]], protocol: str) -> list[tuple[int, bytes | None, bytes]]:
    """One undecodable message a third into partition 0."""
    at = [i for i, m in enumerate(msgs) if m[0] == 0][len(msgs) // 3]
    key = b"\x00" * 8 if protocol == "open" else None  # Open Protocol: a key of an impossible batch
    return [*msgs[:at], (0, key, GARBAGE), *msgs[at:]]


@pytest.mark.parametrize("protocol", [pytest.param("open", marks=pytest.mark.soak), "craft"])  # open: `make soak`
def test_a_bad_message_under_stop_then_skip(kafka_bootstrap: str, spark: Any, tmp_path: Path, protocol: str) -> None:
    sim = Simulation(SimConfig(protocol=protocol, seed=41, events=900, partitions=1, tables=3,  # type: ignore[arg-type]
                               ddl="auto"))
    topic = new_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, _with_garbage(list(sim.messages()), protocol))
    driver, on_spark = tmp_path / "driver", tmp_path / "spark"
    errors = []
    for wh, reader in ((driver, "driver"), (on_spark, "spark")):
        with pytest.raises(DecodeError) as caught:
            run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, reader=reader)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and f"topic {topic!r} partition 0 offset" in errors[0]
    assert _progress(on_spark) == _progress(driver)
    assert _dead(spark, on_spark) == _dead(spark, driver) and len(_dead(spark, driver)) == 1
    stopped = _progress(driver)["applied_ts"]
    assert 0 < stopped < sim.expected.watermark
    for wh, reader in ((driver, "driver"), (on_spark, "spark")):
        run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, reader=reader, on_error="skip")
        assert check_warehouse(spark, wh, sim.expected) == []
    assert _progress(on_spark) == _progress(driver)
    assert _dead(spark, on_spark) == _dead(spark, driver) and len(_dead(spark, driver)) == 1


def test_switching_readers_mid_stream_continues_exactly(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    sim, msgs = _sim("craft", seed=51)
    topic = new_topic(kafka_bootstrap, 3)
    third = len(msgs) // 3
    reference = tmp_path / "reference"
    both = tmp_path / "both"
    produce(kafka_bootstrap, topic, msgs[:third])
    run_engine(kafka_bootstrap, topic, both, spark, protocol="craft", reader="driver")
    produce(kafka_bootstrap, topic, msgs[third:2 * third])
    run_engine(kafka_bootstrap, topic, both, spark, protocol="craft", reader="spark")
    produce(kafka_bootstrap, topic, msgs[2 * third:])
    run_engine(kafka_bootstrap, topic, both, spark, protocol="craft", reader="driver")
    run_engine(kafka_bootstrap, topic, reference, spark, protocol="craft")
    assert check_warehouse(spark, both, sim.expected) == []
    assert _progress(both) == _progress(reference)
    # A replay from the earliest offsets with the Spark reader re-applies nothing twice.
    summary = run_engine(kafka_bootstrap, topic, both, spark, protocol="craft", reader="spark", start="earliest")
    assert summary.already_applied > 0
    assert check_warehouse(spark, both, sim.expected) == []
    assert _progress(both) == _progress(reference)


def test_a_follower_with_the_spark_reader_applies_what_arrives(kafka_bootstrap: str, spark: Any,
                                                               tmp_path: Path) -> None:
    """Follow mode: a batch per flush interval while records arrive (a batch re-reads from the
    restart cursors what the last one could not apply yet); a stop request ends it cleanly."""
    import threading

    from replicator.engine.pipeline import Engine, RunOptions
    from replicator.sources.kafka import KafkaSettings, KafkaSource

    sim, msgs = _sim("open", seed=71, events=900)
    topic = new_topic(kafka_bootstrap, 3)
    half = len(msgs) // 2
    produce(kafka_bootstrap, topic, msgs[:half])
    wh = tmp_path / "wh"
    engine = Engine(KafkaSource(KafkaSettings(kafka_bootstrap, topic, group_id=f"test-{topic}")),
                    RunOptions(warehouse=str(wh), protocol="open", reader="spark", flush_interval_s=0.5,
                               progress=False), spark=spark)
    failure: list[BaseException] = []

    def follow() -> None:
        try:
            engine.run()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()

    deadline = Deadline(300)
    poll_until(lambda: applied_ts(wh) != 0 or bool(failure), deadline, every=0.5)
    first = applied_ts(wh)
    assert 0 < first < sim.expected.watermark, failure
    produce(kafka_bootstrap, topic, msgs[half:])
    poll_until(lambda: applied_ts(wh) >= sim.expected.watermark or bool(failure), deadline, every=0.5)
    engine.request_stop()
    thread.join(timeout=300)
    assert not thread.is_alive() and not failure, failure
    assert check_warehouse(spark, wh, sim.expected) == []
    assert engine.summary.steps >= 2

