"""Smoke test of `make bench`'s code paths at a tiny size (the benchmark itself is never part of
`make test`): every section's measuring code runs (the end-to-end section and the peer on both
streams, standard and insert-heavy), the replicated result is verified, and the report (with its
jobs-per-commit table) and chart are written. The replicator, the Structured Streaming peer and the
follower run in-process here (the bench runs them as subprocesses to sample their memory and, for
the follower, to stop it with SIGTERM); the objectstore section uses the tests' shared
S3-compatible server instead of one of its own; the RSS sampler is checked on a small child of its
own."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bench
from bench.common import DEFAULT_BUFFER_ROWS, stream_key
from bench.features import bench_features
from bench.follow import COMPACTING, bench_follow, finish_follow
from bench.follower import bench_follower, finish_follower
from bench.manytables import bench_manytables, finish_manytables, projection
from bench.objectstore import S3Target, bench_objectstore, finish_objectstore, object_store_access
from bench.peer import bench_peer, finish_peer, run_peer
from bench.ramp import bench_ramp, segment_seconds
from bench.reader import bench_reader, finish_reader
from bench.skew import bench_skew, finish_skew
from bench.streams import commits
from bench.tables import bench_tables, finish_tables
from replicator.engine.pipeline import Engine, RunOptions, RunSummary
from replicator.shards import ShardSpec
from replicator.sources.kafka import KafkaSettings, KafkaSource
from tests.integration.helpers import run_engine
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration


def in_process_runner(spark: Any) -> Callable[[str, str, str, Path, int, Path], dict[str, Any]]:
    """A catch-up run in this process on the test session's Spark, shaped as the bench's subprocess
    runner's result (its RSS and CPU figures zero)."""

    def in_process(bootstrap: str, topic: str, protocol: str, warehouse: Path, max_buffer_rows: int,
                   workdir: Path) -> dict[str, Any]:
        t0 = time.perf_counter()
        summary = run_engine(bootstrap, topic, warehouse, spark, protocol=protocol, max_buffer_rows=max_buffer_rows)
        return {"wall_s": time.perf_counter() - t0, "summary": summary.to_json(), "driver_peak_rss": 0,
                "jvm_peak_rss": 0, "driver_cpu_s": 0.0, "jvm_cpu_s": 0.0, "log": ""}

    return in_process


def test_rss_sampler_sees_a_child_and_its_peak() -> None:
    code = "import time; x = bytearray(64 << 20); x[::4096] = b'1' * len(x[::4096]); time.sleep(1.5)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    sampler = bench.RssSampler(proc.pid, interval=0.1)
    sampler.start()
    proc.wait(timeout=60)
    sampler.stop()
    assert sampler.driver_peak > 64 << 20
    assert sampler.driver_cpu >= 0.0


class InProcessFollower:
    """The engine in follow mode on a thread of this process; stop() asks it to finish its step."""

    def __init__(self, spark: Any, bootstrap: str, topic: str, protocol: str, warehouse: Path) -> None:
        source = KafkaSource(KafkaSettings(bootstrap, topic, group_id=f"test-{uuid.uuid4().hex[:8]}"))
        opts = RunOptions(warehouse=str(warehouse), protocol=protocol, until_caught_up=False,  # type: ignore[arg-type]
                          progress=False)
        self.engine = Engine(source, opts, spark=spark)
        self.summary: RunSummary | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.summary = self.engine.run()

    def running(self) -> bool:
        return self.thread.is_alive()

    def stop(self) -> dict[str, Any]:
        self.engine.request_stop()
        self.thread.join(timeout=300)
        ok = self.summary is not None and not self.thread.is_alive()
        return {"exit_code": 0 if ok else 1, "stop_s": 0.0, "summary": self.summary.to_json() if ok else None,
                "driver_peak_rss": 0, "jvm_peak_rss": 0}


def test_bench_sections_at_a_tiny_size(kafka_bootstrap: str, spark: Any, s3_server: S3Server, tmp_path: Path) -> None:
    cfg = bench.BenchConfig(events=200, tables=2, partitions=2, protocols=("craft",),
                            sections=("codec", "e2e", "peer", "tables", "follower", "scale"),
                            scale_sizes=(2_000, 4_000), scale_repeat=1, scale_changes=500, workload_events=200,
                            tables_counts=(1, 2), tables_events=150, follower_seconds=3.0, follower_rate=40,
                            follower_tables=2, reader_sizes=(150,), objectstore_events=150, objectstore_pairs=1,
                            manytables_count=6, manytables_rows=3, manytables_floor_sample=4,
                            out=tmp_path / "out", quick=True)
    env_before = {k: os.environ.get(k) for k in s3_server.env()}

    in_process = in_process_runner(spark)

    results: dict[str, Any] = {"machine": bench.machine_info(), "argv": ["(smoke test)"],
                               "config": {"events": cfg.events}, "notes": []}
    results["codec"] = bench.bench_codecs(cfg, rounds=1)  # every codec path once; the figures do not matter
    def peer_in_process(bootstrap: str, topic: str, protocol: str, out: Path, max_offsets: int | None,
                        workdir: Path) -> dict[str, Any]:
        t0 = time.perf_counter()
        run = run_peer(spark, bootstrap, topic, protocol, out, max_offsets)
        return {**run, "wall_s": time.perf_counter() - t0, "driver_peak_rss": 0, "jvm_peak_rss": 0}

    def follower_in_process(bootstrap: str, topic: str, protocol: str, warehouse: Path,
                            workdir: Path) -> InProcessFollower:
        return InProcessFollower(spark, bootstrap, topic, protocol, warehouse)

    for stream in cfg.streams:  # standard, insert-heavy: the e2e section's streams and their peers
        e2e_key, peer_key = stream_key("e2e", stream), stream_key("peer", stream)
        results[e2e_key] = bench.bench_e2e(cfg, kafka_bootstrap, tmp_path, runner=in_process, stream=stream)
        results[peer_key] = bench_peer(cfg, kafka_bootstrap, results[e2e_key], tmp_path, runner=peer_in_process)
    results["tables"] = bench_tables(cfg, kafka_bootstrap, tmp_path, runner=in_process)
    results["follower"] = bench_follower(cfg, kafka_bootstrap, tmp_path, start=follower_in_process)

    def reader_in_process(bootstrap: str, topic: str, protocol: str, warehouse: Path, max_buffer_rows: int,
                          workdir: Path, reader: str) -> dict[str, Any]:
        t0 = time.perf_counter()
        summary = run_engine(bootstrap, topic, warehouse, spark, protocol=protocol, reader=reader)
        return {"wall_s": time.perf_counter() - t0, "summary": summary.to_json(), "driver_peak_rss": 0,
                "jvm_peak_rss": 0, "driver_cpu_s": 0.0, "jvm_cpu_s": 0.0, "log": ""}

    results["reader"] = bench_reader(cfg, kafka_bootstrap, tmp_path, runner=reader_in_process)

    def objectstore_in_process(bootstrap: str, topic: str, protocol: str, warehouse: str, max_buffer_rows: int,
                               workdir: Path, server: S3Target | None) -> dict[str, Any]:
        # This process on the server for an s3a:// run, as the bench's subprocess gets its environment.
        with object_store_access(spark, server) if server is not None else contextlib.nullcontext():
            t0 = time.perf_counter()
            summary = run_engine(bootstrap, topic, warehouse, spark, protocol=protocol,  # type: ignore[arg-type]
                                 max_buffer_rows=max_buffer_rows)
            wall = time.perf_counter() - t0
        return {"wall_s": wall, "summary": summary.to_json(), "driver_peak_rss": 0, "jvm_peak_rss": 0,
                "driver_cpu_s": 0.0, "jvm_cpu_s": 0.0, "log": ""}

    results["objectstore"] = bench_objectstore(cfg, kafka_bootstrap, tmp_path, s3_server,
                                               runner=objectstore_in_process)

    def many_in_process(bootstrap: str, topic: str, protocol: str, warehouse: Path, max_buffer_rows: int,
                        workdir: Path, shard: str | None) -> dict[str, Any]:
        t0 = time.perf_counter()
        summary = run_engine(bootstrap, topic, warehouse, spark, protocol=protocol, max_buffer_rows=max_buffer_rows,
                             shard=ShardSpec.parse(shard) if shard else None)
        return {"wall_s": time.perf_counter() - t0, "summary": summary.to_json(), "driver_peak_rss": 0,
                "jvm_peak_rss": 0, "driver_cpu_s": 0.0, "jvm_cpu_s": 0.0, "log": ""}

    # In-process, the two shards run one after the other (two engines on one session would share its confs).
    results["manytables"] = bench_manytables(cfg, kafka_bootstrap, tmp_path, runner=many_in_process,
                                             side_by_side=False)
    expected = {s: {p: r["stream"]["expected"] for p, r in results[stream_key("e2e", s)].items()} for s in cfg.streams}
    # One timed round of appends, the scale and features sections without their warm-up rounds and
    # the jobs per operation from one call: every code path still runs, only the timings' repeats
    # are fewer.
    bench.finish_e2e(spark, *(results[stream_key("e2e", s)] for s in cfg.streams), scratch=tmp_path, rounds=1)
    for stream in cfg.streams:
        finish_peer(spark, results[stream_key("peer", stream)], expected[stream])
    finish_tables(spark, results["tables"])
    finish_follower(spark, results["follower"])
    finish_reader(spark, results["reader"])
    finish_objectstore(spark, results["objectstore"], s3_server)
    finish_manytables(spark, results["manytables"], tmp_path, cfg.manytables_floor_sample, threads=2)
    results["scale"] = bench.bench_scale(spark, cfg, tmp_path, warm_up=False)
    results["features"] = bench_features(spark, tmp_path, repeat=1, sizes=(), jobs_samples=1, warm_up=False)
    results["load_end"], results["elapsed_s"] = [0.0, 0.0, 0.0], 1.0
    bench.write_outputs(results, cfg)

    craft = results["e2e"]["craft"]
    assert craft["verified"], craft["diffs"]
    assert craft["decode"]["rows"] == craft["run"]["summary"]["rows"] > 200  # replays come on top
    assert craft["append"]["rows"] == sum(t["rows"] for t in craft["files"].values()) > 0
    assert craft["steps"]["windows"] >= 1 and craft["steps"]["merges"] >= 2
    assert set(results["scale"]["sizes"]) == {"2000", "4000"}
    assert set(results["features"]["small"]["profiles"]) == {"compatible", "fast"}
    assert results["codec"]["sizes"]["case0"]["open"]["raw"] == 708  # the seed's size table
    peer = results["peer"]["craft"]
    # Same topic as the replicator's run; its correctness is reported, not required (it ignores resolved ts).
    assert peer["run"]["rows"] == craft["run"]["summary"]["rows"] and peer["run"]["merges"] >= 2
    assert "verified" in peer and peer["run"]["query_id"]
    heavy = results["e2e_insert_heavy"]["craft"]
    assert heavy["verified"], heavy["diffs"]
    stats, summary = heavy["stream"]["stats"], heavy["run"]["summary"]
    assert stats["inserts"] > 0.8 * stats["row_changes"] and stats["updates"] + stats["deletes"] > 0
    insert_only = {t: c for t, c in summary["tables"].items() if t != "shop.inventory"}
    assert len(insert_only) == 4 and all(c["deletes"] == c["updated"] == c["deleted"] == 0
                                         for c in insert_only.values()), summary["tables"]
    assert heavy["append"]["rows"] == sum(t["rows"] for t in heavy["files"].values()) >= stats["inserts"] * 0.8
    heavy_peer = results["peer_insert_heavy"]["craft"]
    assert heavy_peer["run"]["rows"] == summary["rows"] and "verified" in heavy_peer
    counted = commits(summary)  # the engine's commit counts by kind, once its summary carries them
    if counted is not None:
        assert sum(int(c["count"]) for c in counted.values()) >= 1
        assert all(c["jobs"] >= c["count"] for k, c in counted.items() if k in ("append", "merge")), counted
    tables = results["tables"]
    assert set(tables["runs"]) == {"1", "2"} and all(r["verified"] for r in tables["runs"].values())
    assert tables["runs"]["2"]["steps"]["ddl"] == 2 and tables["runs"]["2"]["steps"]["windows"] >= 1
    follower = results["follower"]
    assert follower["caught_up"] and follower["verified"], follower.get("diffs")
    assert follower["exit"]["exit_code"] == 0 and follower["unapplied_rows"] == 0
    assert follower["lag"]["rows"] == follower["rows_sent"] >= 120  # 40 row changes/s for 3 s
    reader = results["reader"]["sizes"]["150"]
    assert all(r["verified"] for r in reader["runs"].values()) and results["reader"]["decode"]["rows"] > 0
    objectstore = results["objectstore"]["protocols"]["craft"]
    runs = objectstore["runs"]
    assert [(r["target"], r["pair"]) for r in runs] == [("local", 1), ("s3", 1)]
    assert runs[1]["warehouse"].startswith("s3a://warehouse/") and not runs[0]["warehouse"].startswith("s3a:")
    assert all(r["verified"] for r in runs), [r["diffs"] for r in runs]
    for r in runs:  # the cost split adds up: state writes + lease renewals + Delta's side = the engine's time
        c = r["costs"]
        assert c["steps"] >= 1 and c["state_write_s"] > 0 and c["rest_s"] > 0
        assert c["state_write_s"] + c["lease_renew_s"] + c["rest_s"] == pytest.approx(c["engine_s"])
    assert objectstore["ratio"] > 0 and set(objectstore["best"]) == {"local", "s3"}
    assert {k: os.environ.get(k) for k in s3_server.env()} == env_before, "the environment is restored"
    many = results["manytables"]
    assert many["one"]["verified"] and many["sharded"]["verified"], (many["one"]["diffs"], many["sharded"]["diffs"])
    assert many["one"]["steps"]["ddl"] == 6 and many["one"]["steps"]["tables"] == 6
    shard_tables = [s["steps"]["tables"] for s in many["sharded"]["shards"].values()]
    assert sum(shard_tables) == 6 and set(many["sharded"]["shards"]) == {"0/2", "1/2"}
    assert many["floor"]["tables"] == 4 and many["floor"]["per_table_s"] > 0 and many["ratio"] > 0
    assert [k for k, _, _ in projection(many)] == [1, 2, 4, 8, 16]
    md = (cfg.out / "results.md").read_text()
    headings = ("## Targets", "## 1. Codecs", "## 2. End to end", "## 2b. End to end by stream",
                "## 2c. Spark jobs per Delta commit", "## 3. Scale", "## Table features", "## 4. Resources",
                "## 6. The peer", "## 7. Many tables", "## 8. Follower lag", "## 9. The Spark reader",
                "## 10. Object store", "## 12. Many tables, measured")
    at = [md.find(heading) for heading in headings]
    assert -1 not in at and at == sorted(at), at  # every block, in the report's order
    assert "s3a:// warehouse rows/s >= 0.6x a local warehouse's (craft" in md
    assert "6 tables: CREATE + first write per table <= 1.25x Delta's floor" in md
    assert "| shards | tables per step within 10 s |" in md
    assert "end-to-end rows/s >= half the plain-append rate (insert-heavy, craft)" in md
    assert "replicator rows/s >= 1.5x the Structured Streaming peer's (insert-heavy, craft)" in md
    assert "| | standard craft | insert-heavy craft |" in md
    # The jobs-per-commit table: a row per commit kind, or one "n/a" row from a summary without counts.
    jobs = [line.split(" | ")[2:] for line in md.splitlines() if line.startswith("| insert-heavy | craft |")]
    if counted is None:
        assert jobs == [["all", "n/a", "n/a", "n/a", "n/a", "n/a |"]]
    else:
        assert [j[0] for j in jobs] == ["append", "MERGE", "DDL"]
    assert (cfg.out / "results.png").stat().st_size > 10_000


def test_sections_are_registered_in_one_place() -> None:
    names = [s.name for s in bench.SECTIONS]
    assert names == ["codec", "e2e", "peer", "tables", "follower", "reader", "objectstore", "manytables", "skew",
                     "ramp", "follow", "longlog", "scale", "features", "schema", "profile"]
    assert bench.parse_args(["--quick"]).sections == tuple(names) == bench.BenchConfig().sections
    assert bench.parse_args(["--sections", "scale,codec"]).sections == ("scale", "codec")
    quick = bench.parse_args(["--quick"])
    assert (quick.tables_counts, quick.tables_events, quick.follower_seconds) == ((10, 40), 10_000, 25.0)
    full = bench.parse_args([])
    assert full.streams == ("standard", "insert-heavy") == bench.BenchConfig().streams
    assert bench.parse_args(["--streams", "insert-heavy"]).streams == ("insert-heavy",)
    assert (full.tables_counts, full.tables_events, full.follower_seconds) == ((10, 200), 100_000, 180.0)
    assert full.apply_parallelism is None and bench.run_args(full) == []
    assert (full.manytables_count, full.manytables_rows, full.manytables_floor_sample) == (1000, 5, 100)
    assert (quick.manytables_count, quick.manytables_floor_sample) == (100, 100)
    assert bench.parse_args(["--manytables-count", "40"]).manytables_floor_sample == 40
    assert (full.schema_rows, quick.schema_rows) == (10_000_000, 200_000)
    # The object store: Craft unless --protocols names others; alternating pairs, one with --quick.
    assert (full.objectstore_protocols, full.objectstore_pairs, full.objectstore_events) == (("craft",), 2, None)
    assert (quick.objectstore_protocols, quick.objectstore_pairs) == (("craft",), 1)
    assert bench.parse_args(["--protocols", "open,craft"]).objectstore_protocols == ("open", "craft")
    assert bench.parse_args(["--objectstore-events", "5000", "--objectstore-pairs", "3"]).objectstore_events == 5000
    # Skew: Open Protocol and canal-json unless --protocols names others; --quick is smaller.
    assert (full.skew_events, full.skew_buffers, full.skew_protocols, quick.skew_events) == (
        8_000, (600, 4_000, 20_000, DEFAULT_BUFFER_ROWS, 10**9), ("open", "canal-json"), 3_000)
    assert bench.parse_args(["--skew-buffers", "600,default"]).skew_buffers == (600, DEFAULT_BUFFER_ROWS)
    assert bench.parse_args(["--protocols", "craft"]).skew_protocols == ("craft",)
    # Ramp: the same protocols; four rates over 10 and 100 tables, --quick two rates over 10 tables.
    assert (full.ramp_rates, full.ramp_tables, full.ramp_seconds, full.ramp_drop_seconds, full.ramp_protocols) == (
        (500, 2_000, 5_000, 10_000), (10, 100), 60.0, 45.0, ("open", "canal-json"))
    assert (quick.ramp_rates, quick.ramp_tables, quick.ramp_seconds, quick.ramp_drop_seconds) == (
        (500, 2_000), (10,), 20.0, 15.0)
    assert bench.parse_args(["--ramp-rates", "100,200", "--ramp-tables", "3"]).ramp_rates == (100, 200)
    # ... each segment at least 2 s a table: a few steps of a follower that MERGEs 100 tables.
    assert full.ramp_table_seconds == 2.0 and bench.parse_args(["--ramp-table-seconds", "0"]).ramp_table_seconds == 0
    assert (segment_seconds(60.0, 2.0, 10), segment_seconds(60.0, 2.0, 100), segment_seconds(45.0, 0.0, 100)) == (
        60.0, 200.0, 45.0)
    # Follow: a few hundred small steps locally, fewer on s3a:// (0: none), --quick fewer still.
    assert (full.follow_steps, full.follow_s3_steps, full.follow_rows_per_step, full.follow_read_repeat) == (
        300, 80, 40, 5)
    assert (quick.follow_steps, quick.follow_s3_steps, quick.follow_read_repeat) == (120, 40, 1)
    assert bench.parse_args(["--follow-s3-steps", "0"]).follow_s3_steps == 0
    with pytest.raises(SystemExit):
        bench.parse_args(["--follow-rows-per-step", "0"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--ramp-rates", "0,100"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--skew-buffers", "600,lots"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--objectstore-pairs", "0"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--sections", "codec,nonsense"])
    with pytest.raises(SystemExit):  # the peer runs on the end-to-end topics
        bench.parse_args(["--sections", "peer"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--protocols", "avro"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--streams", "standard,updates-only"])


def test_skew_section_at_a_tiny_size(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    """The skew section's code paths (issue 49): catch-ups of an even and a skewed stream at two
    buffer sizes, verified, the report and its targets; the replicator in-process."""
    cfg = bench.BenchConfig(partitions=3, protocols=("canal-json",), skew_events=700,
                            skew_buffers=(600, DEFAULT_BUFFER_ROWS), skew_protocols=("canal-json",), sections=("skew",),
                            out=tmp_path / "out", quick=True)

    in_process = in_process_runner(spark)

    results: dict[str, Any] = {"machine": bench.machine_info(), "argv": ["(smoke test)"], "config": {}, "notes": []}
    results["skew"] = bench_skew(cfg, kafka_bootstrap, tmp_path, runner=in_process)
    finish_skew(spark, results["skew"])
    results["load_end"], results["elapsed_s"] = [0.0, 0.0, 0.0], 1.0
    bench.write_outputs(results, cfg)

    skew = results["skew"]["protocols"]["canal-json"]
    records = {kind: s["records_per_partition"] for kind, s in skew["streams"].items()}
    assert max(records["skewed"]) > 0.6 * sum(records["skewed"]) > 0, records  # the hot table's partition
    assert max(records["even"]) < 0.5 * sum(records["even"]), records
    for kind in ("even", "skewed"):
        small, default = skew["runs"][kind]["600"], skew["runs"][kind][str(DEFAULT_BUFFER_ROWS)]
        assert small["verified"] and default["verified"], (small["diffs"], default["diffs"])
        # a full buffer spills what is complete (--spill-rows): steps larger than the buffer
        assert small["row_steps"] >= 1 and small["rows_per_step"] > 0 and small["fill"] is not None
        assert default["ratio_apply"] == pytest.approx(1.0) and default["fill"] is not None
        assert small["apply_s"] > 0 and small["apply_rows_per_s"] > 0 and small["steps"] >= small["row_steps"]
    md = (cfg.out / "results.md").read_text()
    assert "## 13. Skew" in md
    assert "catch-up with a 600-row buffer >= 0.5x the default buffer's rate (skewed partitions, canal-json" in md


def test_ramp_section_at_a_tiny_size(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    """The ramp section's code paths (issue 49): one follower (in-process) over two rates and a drop,
    lag per segment, step times, the knee, the row counts, the report and its target."""
    cfg = bench.BenchConfig(partitions=3, ramp_rates=(30, 90), ramp_tables=(2,), ramp_protocols=("open",),
                            ramp_seconds=2.0, ramp_drop_rate=30, ramp_drop_seconds=2.0, ramp_table_seconds=0.0,
                            sections=("ramp",),
                            out=tmp_path / "out", quick=True)

    def follower_in_process(bootstrap: str, topic: str, protocol: str, warehouse: Path,
                            workdir: Path) -> InProcessFollower:
        return InProcessFollower(spark, bootstrap, topic, protocol, warehouse)

    results: dict[str, Any] = {"machine": bench.machine_info(), "argv": ["(smoke test)"], "config": {}, "notes": []}
    results["ramp"] = bench_ramp(cfg, kafka_bootstrap, tmp_path, start=follower_in_process)
    results["load_end"], results["elapsed_s"] = [0.0, 0.0, 0.0], 1.0
    bench.write_outputs(results, cfg)

    ramp = results["ramp"]["runs"]
    assert [(r["protocol"], r["tables"]) for r in ramp] == [("open", 2)]
    run = ramp[0]
    assert run["caught_up"] and run["unapplied_rows"] == 0 and run["counts"]["ok"], run["counts"]
    assert run["counts"]["rows"] > 0 and run["exit"]["exit_code"] == 0
    assert [(s["kind"], s["rate"]) for s in run["segments"]] == [("ramp", 30), ("ramp", 90), ("drop", 30)]
    assert all(s["lag"]["rows"] > 0 for s in run["segments"])  # a 2 s segment may see no step begin
    assert sum(s["steps"] for s in run["segments"]) >= 2 and any(s["median_step_s"] > 0 for s in run["segments"])
    assert sum(s["lag"]["rows"] for s in run["segments"]) <= run["rows_sent"]
    assert run["knee"]["rate"] in (None, 30, 90) and run["segments"][-1]["recovered"] is not None
    md = (cfg.out / "results.md").read_text()
    assert "## 14. Follower ramp" in md and "| open | 2 |" in md
    assert "follower ramp, at and below the knee: p99 lag after the first minute" in md


def test_follow_section_at_a_tiny_size(kafka_bootstrap: str, spark: Any, s3_server: S3Server,
                                       tmp_path: Path) -> None:
    """The follow section's code paths (issue 51, item 1): many small steps into a local and an
    s3a:// warehouse, each table's files, reads before and after OPTIMIZE, the replicator's own
    records, verified, the report and its targets; the replicator in-process."""
    cfg = bench.BenchConfig(partitions=2, follow_steps=6, follow_s3_steps=3, follow_rows_per_step=12,
                            follow_window=3, follow_read_repeat=1, sections=("follow",), out=tmp_path / "out",
                            quick=True)

    def follow_in_process(bootstrap: str, topic: str, protocol: str, warehouse: str, max_buffer_rows: int,
                          workdir: Path, server: S3Target | None, compaction: bool) -> dict[str, Any]:
        with object_store_access(spark, server) if server is not None else contextlib.nullcontext():
            t0 = time.perf_counter()
            summary = run_engine(bootstrap, topic, warehouse, spark, protocol=protocol,  # type: ignore[arg-type]
                                 max_buffer_rows=max_buffer_rows, compaction=compaction, min_small_files=3,
                                 spill_rows=0)  # as the bench's runs: a step each full buffer
            wall = time.perf_counter() - t0
        return {"wall_s": wall, "summary": summary.to_json(), "driver_peak_rss": 0, "jvm_peak_rss": 0,
                "driver_cpu_s": 0.0, "jvm_cpu_s": 0.0, "log": ""}

    results: dict[str, Any] = {"machine": bench.machine_info(), "argv": ["(smoke test)"], "config": {}, "notes": []}
    results["follow"] = bench_follow(cfg, kafka_bootstrap, tmp_path, s3_server, runner=follow_in_process)
    finish_follow(spark, results["follow"], s3_server, cfg.follow_read_repeat)
    results["load_end"], results["elapsed_s"] = [0.0, 0.0, 0.0], 1.0
    bench.write_outputs(results, cfg)

    targets = results["follow"]["targets"]
    assert set(targets) == {"local", COMPACTING, "s3"} and targets["s3"]["warehouse"].startswith("s3a://warehouse/")
    assert results["follow"]["targets"][COMPACTING]["run"]["summary"]["compactions"] >= 1
    assert results["follow"]["targets"]["local"]["run"]["summary"]["compactions"] == 0
    for name, fig in targets.items():
        assert fig["verified"], (name, fig["diffs"])
        steps = fig["step_time"]["steps"]
        assert steps >= 3 and fig["records"]["steplog_records"] == steps and fig["records"]["steplog_bytes"] > 0
        assert fig["records"]["state_bytes"] > 0
        tables = fig["tables"]
        assert {t["kind"] for t in tables.values()} == {"insert-only", "mixed"}, tables
        for t in tables.values():
            before, after = t["before"], t["after"]
            assert before["version"] >= 1 and before["log_commits"] >= before["version"]
            assert before["data_files"] >= before["live_files"] >= 1 and before["log_files"] >= before["log_commits"]
            assert after["live_files"] <= before["live_files"] and after["data_files"] >= before["data_files"]
            assert t["same_after"] and t["rows"] > 0 and t["spark_ratio"] > 0 and t["optimize_s"] > 0
            assert t["deltalake_before"].get("value") == t["rows"], t["deltalake_before"]
            if t["kind"] == "insert-only":  # an append per step that wrote it: a file each, unless compacted
                assert before["cdf_files"] == 0
                assert fig["compaction"] or before["live_files"] >= before["version"] - 1
            else:
                assert before["cdf_files"] >= 1
    local = targets["local"]
    assert local["step_time"]["steps"] >= 5 and local["step_time"]["window"] >= 1
    assert local["step_time"]["ratio_median"] > 0 and local["step_time"]["first_median_s"] > 0
    md = (cfg.out / "results.md").read_text()
    assert "## 15. A long follow, compressed" in md and "| local | shop.customers | insert-only |" in md
    assert "follow, local: a full Spark read <= 1.2x the same table's after OPTIMIZE" in md


def test_longlog_section_at_a_tiny_size(spark: Any, tmp_path: Path) -> None:
    """The longlog section's worker (issue 51) in this process, on the shared session's log store
    (the replicator's), over a log written ahead to a checkpoint; and its report beside Delta's."""
    from bench.longlog import STORES, _worker, render_markdown

    res = _worker("replicator", tmp_path, [100])
    assert res["store"] == STORES["replicator"]
    (row,) = res["rows"]
    # CREATE, INSERT, 97 copies, the checkpointing INSERT (version 100), 10 timed: 1 + 10 + 2 rows
    assert (row["commits"], row["rows"]) == (100, 12) and row["log_files"] >= 4 * 98 and row["insert_s"] > 0
    delta = {"store": STORES["delta"], "rows": [dict(row, insert_s=row["insert_s"] * 2)]}
    md = render_markdown({"commits": [100], "inserts": 8, "stores": {"delta": delta, "replicator": res}})
    assert "## 16. A long `_delta_log`" in md and "| 100 |" in md and "**2.0x**" in md
