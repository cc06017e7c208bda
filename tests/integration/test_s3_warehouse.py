"""Warehouses on a real S3-compatible server (S3Proxy, tests/s3_fixtures.py): the same workloads as on
a local directory give the same tables, snapshots and progress; other readers (deltalake, polars) read
the tables straight from the store; the store's state files follow the warehouse layout. The Spark
reader into an object store, with the executors of a standalone cluster writing the tables, is in
tests/integration/test_spark_cluster.py.

In this process the shared Spark session reaches the server through `use_storage` (the endpoint) and
the AWS SDK's default chain (credentials as Java system properties: the session's JVM started before
this module set the AWS environment). Runs in subprocesses take everything from the environment, as a
user's would (tests/reliability/test_object_store.py).
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.explore import open_warehouse
from replicator.delta.rowcount import file_bytes, read_snapshot
from replicator.sim.simcheck import check_warehouse, read_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from replicator.storage import fileio_for
from replicator.storage.steplog import SEGMENT_RECORDS
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, run_engine
from tests.kafka_fixtures import new_topic
from tests.s3_fixtures import S3Server
from tests.support.cli import run_cli

pytestmark = pytest.mark.integration


@pytest.fixture()
def s3(s3_store: S3Server) -> S3Server:
    return s3_store


def _simulated(protocol: str, seed: int, events: int) -> Simulation:
    return Simulation(SimConfig(protocol=protocol, seed=seed, events=events, partitions=3, tables=4,  # type: ignore[arg-type]
                                ddl="auto"))


def _tables(spark: Any, warehouse: str | Path) -> dict[str, Any]:
    return {name: sorted(map(json.dumps, t.rows)) for name, t in read_warehouse(spark, warehouse).items()}


# Open Protocol (and its comparison with a local warehouse) only under `make soak`: CI time.
@pytest.mark.parametrize("protocol", [pytest.param("open", marks=pytest.mark.soak), "craft"])
def test_a_ddl_stream_into_s3(s3: S3Server, kafka_bootstrap: str, spark: Any, tmp_path: Path, protocol: str) -> None:
    """Exact tables; with Open Protocol also the same progress, step log and consistent snapshots
    as the same stream into a local directory. Then `replicator maintain` on the store: compacted,
    vacuumed, still exact."""
    sim = _simulated(protocol, seed=71, events=160)
    topic = new_topic(kafka_bootstrap, 3, prefix="s3-wh")
    produce(kafka_bootstrap, topic, list(sim.messages()))
    url = s3.warehouse_url(f"stream-{protocol}")
    summary = run_engine(kafka_bootstrap, topic, url, spark, protocol=protocol, max_buffer_rows=60)  # type: ignore[arg-type]
    assert check_warehouse(spark, url, sim.expected) == []
    wh = Warehouse(url)
    state = wh.load_state()
    assert summary.steps == state.steps > 1 and summary.state_write_s > 0
    # Every table lives under the warehouse URL; the step log in segments; the lease given back.
    assert all(e.path.startswith(url + "/tables/") for e in state.tables.values())
    io = fileio_for(url)
    segments = io.children(f"{url}/_replicator/windows")
    assert segments and len(segments) == -(-state.steps // SEGMENT_RECORDS)
    assert [w["step"] for w in wh.windows()] == list(range(1, state.steps + 1))
    lease = json.loads(io.read(f"{url}/_replicator/lease.json") or b"{}")
    assert lease["released"] is True and lease["pid"] == os.getpid()
    if protocol != "open":
        _maintain_on_the_store(spark, url, sim)
        return

    local = tmp_path / "local"
    run_engine(kafka_bootstrap, topic, local, spark, protocol=protocol, max_buffer_rows=60)  # type: ignore[arg-type]
    local_state = Warehouse(local).load_state()
    assert state.applied_ts == local_state.applied_ts and state.steps == local_state.steps
    assert state.progress.cursors == local_state.progress.cursors
    assert _tables(spark, url) == _tables(spark, local)
    # Consistent snapshots at every applied watermark equal the local warehouse's.
    remote, mine = open_warehouse(url, spark), open_warehouse(local, spark)
    marks = remote.watermarks()
    assert marks == mine.watermarks()
    for w in (marks[0], marks[len(marks) // 2], marks[-1]):
        got = {k: sorted(map(str, df.collect())) for k, df in remote.snapshot(w).items()}
        want = {k: sorted(map(str, df.collect())) for k, df in mine.snapshot(w).items()}
        assert got == want, f"snapshot at {w}"


def _live(path: str) -> set[str]:
    snapshot = read_snapshot(path, file_bytes)
    assert snapshot is not None
    return {name for name, _dv in snapshot.live}


def _maintain_on_the_store(spark: Any, url: str, sim: Simulation) -> None:
    """`replicator maintain` on s3a:// (one table: a VACUUM costs seconds): compacted, every file no
    version needs removed (retention 0, asked for explicitly), the tables still exact, the lease
    given back; stdout is the JSON and nothing else."""
    entry = Warehouse(url).load_state().live_tables()[0]
    paths = [entry.path]
    # its rows rewritten into 3 files (a small step writes one file per table)
    spark.read.format("delta").load(paths[0]).repartition(3).write.format("delta").mode("overwrite").save(paths[0])
    live = {p: _live(p) for p in paths}
    assert len(live[paths[0]]) == 3
    code, out, err = run_cli("maintain", "--warehouse", url, "--json", "--min-small-files", "2",
                             "--retention-hours", "0", "--allow-short-retention",
                             "--include", f"{entry.schema_name}.{entry.table}")
    assert code == 0, err
    report = json.loads(out)
    assert [t["path"] for t in report["tables"]] == paths
    compacted = [t["path"] for t in report["tables"] if t["compact"]]
    assert paths[0] in compacted and report["compacted_tables"] == len(compacted) and report["vacuum_files"] > 0
    io = fileio_for(url)
    for t in report["tables"]:
        after = _live(t["path"])
        assert len(after) == t["files_after"] and (len(after) < len(live[t["path"]]) if t["compact"] else True)
        # (S3A leaves a directory marker, `_change_data/`, where it deleted a directory's last file)
        data = {p.split(t["path"] + "/", 1)[1] for p, _ in io.files(t["path"]) if not p.endswith("/")}
        assert {p for p in data if not p.startswith("_delta_log/")} == after, "only what the last version needs"
    assert check_warehouse(spark, url, sim.expected) == []
    lease = json.loads(io.read(f"{url}/_replicator/lease.json") or b"{}")
    assert lease["released"] is True


@pytest.mark.soak  # CI time: replay is tested on local warehouses in CI, on s3a:// by `make soak`
def test_replay_in_place_and_into_a_fresh_s3_warehouse(s3: S3Server, kafka_bootstrap: str, spark: Any) -> None:
    sim = _simulated("craft", seed=73, events=120)
    topic = new_topic(kafka_bootstrap, 3, prefix="s3-replay")
    produce(kafka_bootstrap, topic, list(sim.messages()))
    url = s3.warehouse_url("replay")
    run_engine(kafka_bootstrap, topic, url, spark, protocol="craft")
    before = _tables(spark, url)
    summary = run_engine(kafka_bootstrap, topic, url, spark, protocol="craft", start="earliest")
    assert summary.already_applied == summary.rows > 0, "a replay in place re-applies nothing"
    assert _tables(spark, url) == before
    assert check_warehouse(spark, url, sim.expected) == []

    fresh = s3.warehouse_url("replay-fresh")
    run_engine(kafka_bootstrap, topic, fresh, spark, protocol="craft", start="earliest")
    assert check_warehouse(spark, fresh, sim.expected) == []


def test_deltalake_and_polars_read_the_tables_from_the_store(s3: S3Server, kafka_bootstrap: str, spark: Any) -> None:
    import polars as pl
    from deltalake import DeltaTable

    sim = _simulated("open", seed=77, events=100)
    topic = new_topic(kafka_bootstrap, 3, prefix="s3-readers")
    produce(kafka_bootstrap, topic, list(sim.messages()))
    url = s3.warehouse_url("readers")
    run_engine(kafka_bootstrap, topic, url, spark, protocol="open")
    options = {"AWS_ENDPOINT_URL": s3.endpoint, "AWS_ACCESS_KEY_ID": s3.access_key,
               "AWS_SECRET_ACCESS_KEY": s3.secret_key, "AWS_REGION": s3.region, "AWS_ALLOW_HTTP": "true"}
    state = Warehouse(url).load_state()
    checked = 0
    for entry in state.live_tables():
        path = "s3://" + entry.path.split("://", 1)[1]
        want = spark.read.format("delta").load(entry.path).count()
        table = DeltaTable(path, storage_options=options)
        assert table.version() >= 0
        by_polars = pl.read_delta(path, storage_options=options)
        assert by_polars.height == want
        assert set(by_polars.columns) == set(spark.read.format("delta").load(entry.path).columns)
        del table, by_polars
        checked += 1
    gc.collect()  # delta-rs's S3 client must not outlive the test process's interpreter (abort at exit)
    assert checked >= 2


def test_binlog_dead_letters_and_listing_on_s3(s3: S3Server, kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    """The other state a warehouse keeps, on the store: a statement binlog's applier state and its
    tables, the dead-letter table, and `replicator tables` reading both catalogs from the store."""
    from replicator.binlog_apply import BinlogApplier, load_state
    from replicator.delta.deadletter import read_dead_letters
    from replicator.formats.binlog import BinlogWriter
    from replicator.views.listing import list_tables

    url = s3.warehouse_url("other-state")
    log = tmp_path / "log.bin"
    with BinlogWriter(log) as w:
        for trans, sqls in ((1, ["CREATE TABLE k (id INT PRIMARY KEY, v TEXT)",
                                 "INSERT INTO k VALUES (1, 'a'), (2, 'b')"]),
                            (2, ["UPDATE k SET v = 'B' WHERE id = 2", "DELETE FROM k WHERE id = 1"])):
            for sql in sqls:
                w.write_query(trans, sql)
            w.write_commit(trans)
    summary = BinlogApplier(url, spark).run([log])
    assert summary.last_seq == 2
    bstate = load_state(Warehouse(url).meta / "binlog.json")
    assert bstate.applied is not None and bstate.applied.seq == 2 and bstate.epoch >= 1  # by token
    (entry,) = [t for t in bstate.tables if t.status == "live"]
    assert entry.path.startswith(url + "/binlog/")
    assert sorted(tuple(r) for r in spark.read.format("delta").load(entry.path).collect()) == [(2, "B")]

    sim = _simulated("open", seed=79, events=60)
    garbage = b"\x00not a TiCDC message\xff"
    topic = new_topic(kafka_bootstrap, 3, prefix="s3-dead")
    produce(kafka_bootstrap, topic, [(0, b"\x00" * 8, garbage), *sim.messages()])
    run_engine(kafka_bootstrap, topic, url, spark, protocol="open", on_error="skip")
    assert check_warehouse(spark, url, sim.expected) == []
    dead = read_dead_letters(spark, Warehouse(url))
    assert [(d["topic"], d["partition"], d["offset"], d["value"]) for d in dead] == [(topic, 0, 0, garbage)]

    root, rows = list_tables(url)
    assert root == url
    assert {(r.source, f"{r.schema}.{r.table}") for r in rows} == {
        ("binlog", "default.k"), *(("kafka", name) for name in sim.expected.tables)}
    assert all(r.path.startswith(url + "/") for r in rows)
