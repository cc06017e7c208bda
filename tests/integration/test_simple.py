"""--protocol simple through a real broker into Delta: one upstream as Open Protocol and as Simple gives
identical tables; a row whose checksum does not match is dead-lettered at its position and never
applied (the run stops, or skips it with --on-error skip), and the summary counts the checksums."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.codec import codec_for, simple
from replicator.codec.checksum import ChecksumError
from replicator.delta.deadletter import read_dead_letters
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
from replicator.sim.model import SimConfig
from replicator.sim.simcheck import compare_tables, read_warehouse
from replicator.sim.sinks import produce as produce_sim
from replicator.sim.stream import Simulation
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, read_table, run_engine
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration


def test_one_upstream_as_open_and_simple_gives_identical_delta_tables(kafka_bootstrap: str, spark: Any,
                                                                      tmp_path: Path) -> None:
    config = {"seed": 11, "events": 150, "partitions": 2, "tables": 2, "ddl": "auto"}  # small: ~40 s a protocol
    tables = {}
    for protocol in ("open", "simple"):
        sim = Simulation(SimConfig(protocol=protocol, **config))  # type: ignore[arg-type]
        topic = new_topic(kafka_bootstrap, 2)
        produce_sim(sim, kafka_bootstrap, topic)
        wh = tmp_path / protocol
        summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol)
        assert summary.watermark == sim.expected.watermark, protocol
        got = read_warehouse(spark, wh)
        assert compare_tables(sim.expected, got) == [], protocol
        tables[protocol] = {name: (sorted(json.dumps(r, sort_keys=True, default=str) for r in t.rows), t.key, t.types)
                            for name, t in got.items()}
    assert tables["simple"] == tables["open"]  # rows, merge keys and Delta column types


KEY = int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY | Flag.BINARY)


def _row(ts: int, key: int, value: str, old: str | None = None) -> RowChange:
    def image(v: str) -> tuple[Column, ...]:
        return Column("id", TypeCode.LONG, KEY, key), Column("v", TypeCode.VARCHAR, int(Flag.NULLABLE), v)

    if old is None:
        return RowChange(ts, "s", "t", Op.INSERT, image(value))
    return RowChange(ts, "s", "t", Op.UPDATE, image(value), image(old))


def test_a_checksum_mismatch_is_dead_lettered_with_its_position_and_never_applied(kafka_bootstrap: str, spark: Any,
                                                                                  tmp_path: Path) -> None:
    codec = codec_for("simple")
    create = DdlEvent(10, "s", "t", 3, "CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `v` VARCHAR(8))")
    p0 = [(0, k, v) for k, v in codec.encode([create])]
    p0 += [(0, None, v) for v in simple.encode_rows([_row(12, 1, "a")], checksum=True)]
    p0 += [(0, k, v) for k, v in codec.encode([Resolved(13)])]
    bad = simple.encode_rows([_row(20, 1, "b", old="a")], checksum=True)
    assert json.loads(bad[1])["type"] == "UPDATE"
    bad[1] = bad[1].replace(b'"data":{"id":"1","v":"b"}', b'"data":{"id":"1","v":"X"}')  # corrupted in flight
    p0 += [(0, None, v) for v in bad] + [(0, k, v) for k, v in codec.encode([Resolved(40)])]
    p1 = [(1, k, v) for k, v in codec.encode([create])]
    p1 += [(1, None, v) for v in simple.encode_rows([_row(15, 2, "c")], checksum=True)]
    p1 += [(1, k, v) for k, v in codec.encode([Resolved(40)])]
    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, p0 + p1)
    bad_offset = len(p0) - 2  # the UPDATE, after its BOOTSTRAP
    wh = tmp_path / "wh"
    with pytest.raises(ChecksumError) as info:
        run_engine(kafka_bootstrap, topic, wh, spark, protocol="simple")
    assert f"topic {topic!r} partition 0 offset {bad_offset}" in str(info.value)
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="simple", on_error="skip")
    assert summary.watermark == 40
    assert summary.checksum_mismatches == 1 and summary.to_json()["checksum_mismatches"] == 1
    assert summary.checksums_verified >= 1
    assert [(r["id"], r["v"]) for r in read_table(spark, wh, "s", "t")] == [(1, "a"), (2, "c")]  # never applied
    dead = read_dead_letters(spark, Warehouse(wh))
    assert {(d["partition"], d["offset"]) for d in dead} == {(0, bad_offset)}
    assert all("ChecksumError" in str(d["error"]) for d in dead)
