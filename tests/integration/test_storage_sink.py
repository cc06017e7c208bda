"""TiCDC's storage sink into real Delta tables: a simulated CSV changefeed in a directory, read by a
follower while its files appear and then by a catch-up run of the rest, and a canal-json changefeed
in an S3-compatible store (`s3a://`), each compared exactly with the simulator's expected tables;
and, without Spark, a backlog in the S3 store read in one pass killed at random instants inside it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from replicator.engine.pipeline import Engine, RunOptions
from replicator.sim.model import SimConfig
from replicator.sim.simcheck import compare_tables, read_warehouse
from replicator.sim.storage_sink import StorageLayout, write_storage_sink
from replicator.sim.stream import Simulation
from replicator.sources.storage_sink import StorageSinkSettings, StorageSinkSource
from replicator.storage.local import LocalFileIO
from tests.integration.helpers import Background
from tests.s3_fixtures import S3Server
from tests.support.waiting import poll_until
from tests.support.warehouse import applied_ts
from tests.unit.test_storage_sink_source import Replica, kill_inside_one_pass


# Small and cheap (each DDL and each step costs Delta commits), yet with a DDL version, a table split
# in two writers (customers), a table older than the changefeed (orders), a restart's versions and
# several checkpoints.
def _sim(seed: int) -> Simulation:
    return Simulation(SimConfig(protocol="open", events=100, seed=seed, tables=2, ddl="add_column",
                                resolved_every=4))


class Recording(LocalFileIO):
    def __init__(self) -> None:
        self.writes: list[tuple[str, bytes]] = []

    def write(self, path: str, data: bytes) -> None:
        self.writes.append((path, data))


def _engine(url: str, protocol: str, warehouse: Path, spark: Any, *, follow: bool, **kw: Any) -> Engine:
    source = StorageSinkSource(StorageSinkSettings(url, protocol=protocol, poll_interval_s=0.2))  # type: ignore[arg-type]
    opts = RunOptions(warehouse=str(warehouse), protocol=protocol, until_caught_up=not follow,  # type: ignore[arg-type]
                      progress=False, flush_interval_s=0.2, **kw)
    return Engine(source, opts, spark=spark)


def test_csv_changefeed_follower_then_catch_up(spark: Any, tmp_path: Path) -> None:
    sim, rec = _sim(seed=6), Recording()
    staging, live, wh = tmp_path / "staging", tmp_path / "live", tmp_path / "wh"
    write_storage_sink(sim, str(staging), io=rec)
    io = LocalFileIO()
    metadata = [i for i, (path, _) in enumerate(rec.writes) if path.endswith("/metadata")]
    half = metadata[len(metadata) // 2]

    def copy(writes: list[tuple[str, bytes]]) -> None:
        for path, data in writes:
            io.write(str(live / Path(path).relative_to(staging)), data)

    copy(rec.writes[:metadata[0] + 1])
    follower = Background(_engine(str(live), "csv", wh, spark, follow=True))
    copy(rec.writes[metadata[0] + 1:half + 1])
    poll_until(lambda: applied_ts(wh) != 0, 120, every=0.5)  # the follower applied a checkpoint
    summary = follower.stop()
    assert summary.error is None and summary.watermark > 0
    copy(rec.writes[half + 1:])
    final = _engine(str(live), "csv", wh, spark, follow=False).run()
    assert final.watermark == sim.expected.watermark
    assert compare_tables(sim.expected, read_warehouse(spark, wh)) == []
    # the streams of older table versions, read and applied to their end, left state.json
    from replicator.warehouse import Warehouse

    progress = Warehouse(wh).load_state().progress
    assert progress.ended_versions
    for tp in progress.cursors:
        schema, table, version = tp.topic.split("#")[0].split("/")[:3]
        assert version == "meta" or int(version) > progress.ended_versions.get(f"{schema}/{table}", -1), tp


def test_canal_json_changefeed_in_s3(s3_store: S3Server, spark: Any, tmp_path: Path) -> None:
    sim = _sim(seed=9)
    url = s3_store.warehouse_url("storage-sink")
    write_storage_sink(sim, url, StorageLayout(protocol="canal-json"))
    summary = _engine(url, "canal-json", tmp_path / "wh", spark, follow=False).run()
    assert summary.watermark == sim.expected.watermark and summary.dead_letters == 0
    assert compare_tables(sim.expected, read_warehouse(spark, tmp_path / "wh")) == []


def test_a_bad_record_is_a_dead_letter_naming_its_stream_and_line(spark: Any, tmp_path: Path) -> None:
    from replicator.delta.deadletter import read_dead_letters
    from replicator.warehouse import Warehouse

    sink = tmp_path / "sink"
    write_storage_sink(Simulation(SimConfig(protocol="open", events=30, seed=2, tables=2, ddl="none")), str(sink))
    data = min(p for p in sink.rglob("CDC*.csv") if not p.name.startswith("CDC_"))
    lines = data.read_bytes().split(b"\r\n")
    lines[0] = b'"I","broken"'
    data.write_bytes(b"\r\n".join(lines))
    summary = _engine(str(sink), "csv", tmp_path / "wh", spark, follow=False, on_error="skip").run()
    assert summary.dead_letters == 1
    (dead,) = read_dead_letters(spark, Warehouse(str(tmp_path / "wh")))
    assert dead["topic"] == data.parent.parent.relative_to(sink).as_posix() and dead["value"] == b'"I","broken"'
    assert f"{data} line 1" in str(dead["error"])


def test_kills_inside_one_pass_over_a_backlog_in_s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The source reading an `s3a://` bucket (listings by prefix and delimiter, absent keys) whose
    whole changefeed is one pass: applied in steps at the streams' intermediate resolved events,
    killed at random instants between and inside them (the warehouse and progress as last saved:
    the engine's loop in miniature, no Spark), resumed from the cursors, exact. The same with
    `replicator run` and kill -9: tests/reliability/test_storage_sink_kills.py (soak)."""
    from replicator.storage.options import StorageOptions
    from replicator.storage.s3 import S3FileIO

    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    io = S3FileIO(StorageOptions(endpoint=s3_server.endpoint, region=s3_server.region))
    sim = Simulation(SimConfig(protocol="open", events=400, seed=12, tables=4, ddl="all"))
    url = s3_server.warehouse_url("storage-sink-kills")
    write_storage_sink(sim, url, io=io)
    kill_inside_one_pass(Replica(url, "csv", io), sim, random.Random(5), most=300, kills=6)
