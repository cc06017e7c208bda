"""canal-json end to end: real broker, real Delta. One simulated upstream (replays, key changes, DDL
mid-stream, tables interleaved across partitions) as Open Protocol, Craft and canal-json, whose DDL
TiCDC puts on partition 0 only: the three warehouses equal the simulator's truth and each other,
column types included. And a partition-0-only DDL between rows of its table on the other partitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.codec import codec_for
from replicator.delta.deadletter import read_dead_letters
from replicator.errors import DecodeError
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
from replicator.sim.model import SimConfig
from replicator.sim.simcheck import compare_tables, read_warehouse
from replicator.sim.sinks import produce as produce_sim
from replicator.sim.stream import Simulation
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, read_table, run_engine
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration


def test_one_upstream_as_open_and_canal_json_gives_identical_delta_tables(kafka_bootstrap: str, spark: Any,
                                                                      tmp_path: Path) -> None:
    # Craft against its own expected tables: tests/integration/test_engine_random.py and the demo.
    config = {"seed": 7, "events": 400, "partitions": 3, "tables": 4, "ddl": "auto"}
    tables = {}
    for protocol in ("open", "canal-json"):
        sim = Simulation(SimConfig(protocol=protocol, **config))  # type: ignore[arg-type]
        topic = new_topic(kafka_bootstrap, 3)
        produce_sim(sim, kafka_bootstrap, topic)
        wh = tmp_path / protocol
        summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol)
        assert summary.watermark == sim.expected.watermark, protocol
        assert summary.replays_dropped > 0, protocol
        got = read_warehouse(spark, wh)
        assert compare_tables(sim.expected, got) == [], protocol
        tables[protocol] = {name: (sorted(json.dumps(r, sort_keys=True, default=str) for r in t.rows), t.key, t.types)
                            for name, t in got.items()}
    assert tables["canal-json"] == tables["open"]  # rows, merge keys and Delta column types


KEY = int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY | Flag.BINARY)


def _row(ts: int, key: int, extra: int | None = None) -> RowChange:
    cols = (Column("id", TypeCode.LONG, KEY, key), Column("v", TypeCode.VARCHAR, 0, f"v{key}"))
    if extra is not None:
        cols += (Column("c", TypeCode.LONG, int(Flag.BINARY), extra),)
    return RowChange(ts, "s", "t", Op.INSERT, cols)


def test_partition_zero_ddl_is_exact_for_rows_of_its_table_on_every_partition(kafka_bootstrap: str, spark: Any,
                                                                               tmp_path: Path) -> None:
    codec = codec_for("canal-json")
    create = DdlEvent(10, "s", "t", 3, "CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `v` VARCHAR(8))")
    add = DdlEvent(20, "s", "t", 5, "ALTER TABLE `s`.`t` ADD COLUMN `c` INT")
    partitions: dict[int, list[Any]] = {
        0: [create, _row(12, 1), Resolved(13), add, _row(22, 2, 22), Resolved(40)],
        1: [Resolved(13), _row(15, 3), _row(25, 4, 25), _row(26, 3, 26), Resolved(40)],
        2: [_row(18, 5), Resolved(19), _row(30, 6, 30), Resolved(40)],
    }
    # Partitions 1 and 2 first: they are past the DDL before partition 0 is read at all.
    records = [(p, key, value) for p in (1, 2, 0) for key, value in codec.encode(partitions[p])]
    topic = new_topic(kafka_bootstrap, 3)
    produce(kafka_bootstrap, topic, records)
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json")
    assert summary.watermark == 40
    rows = read_table(spark, wh, "s", "t")
    assert [(r["id"], r["v"], r["c"]) for r in rows] == [
        (1, "v1", None), (2, "v2", 22), (3, "v3", 26), (4, "v4", 25), (5, "v5", None), (6, "v6", 30)]


def test_a_message_without_the_extension_is_dead_lettered_and_never_applied(kafka_bootstrap: str, spark: Any,
                                                                           tmp_path: Path) -> None:
    codec = codec_for("canal-json")
    create = DdlEvent(10, "s", "t", 3, "CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `v` VARCHAR(8))")
    plain = json.loads(codec.encode_rows([_row(15, 99)])[0][1])
    del plain["_tidb"]  # what TiCDC writes without enable-tidb-extension=true
    bad = json.dumps(plain).encode()
    records = [(0, k, v) for k, v in codec.encode([create, _row(12, 1), Resolved(40)])]
    records += [(1, None, bad)] + [(1, k, v) for k, v in codec.encode([_row(16, 2), Resolved(40)])]
    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, records)
    wh = tmp_path / "wh"
    with pytest.raises(DecodeError) as info:
        run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json")
    assert "enable-tidb-extension=true" in str(info.value)
    assert f"topic {topic!r} partition 1 offset 0" in str(info.value)
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", on_error="skip")
    assert summary.watermark == 40
    assert [r["id"] for r in read_table(spark, wh, "s", "t")] == [1, 2]
    [dead] = read_dead_letters(spark, Warehouse(wh))
    assert (dead["partition"], dead["offset"], dead["value"]) == (1, 0, bad)
    assert "enable-tidb-extension=true" in str(dead["error"])
