"""Sections 2 and 4, end to end and resources: a simulated stream produced into a local broker,
``replicator run --until-caught-up`` as a subprocess (its RSS and its JVM's sampled), checked
against the simulator's expected tables; baselines in the same run: a plain Delta append of the
same final rows, and consume-only / consume+decode throughput.
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import BenchConfig, log, run_args, stream_shape
from bench.procs import run_sampled
from replicator.events import RowChange

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _simulate(cfg: BenchConfig, protocol: str, events: int, seed: int, stream: str,
              options: Mapping[str, Any]) -> Any:
    from replicator.sim.simulate import SimConfig, Simulation

    tables, insert_only = stream_shape(stream, cfg.tables)
    return Simulation(SimConfig(protocol=protocol, seed=seed, events=events,  # type: ignore[arg-type]
                                partitions=cfg.partitions, tables=tables, insert_only=insert_only, ddl="none",
                                **options))


def produce_stream(cfg: BenchConfig, bootstrap: str, protocol: str, events: int, seed: int,
                   stream: str = "standard", *, options: Mapping[str, Any] | None = None,
                   label: str = "") -> dict[str, Any]:
    """Simulate `events` row changes of a `stream` (`bench.common.STREAMS`) and produce them into a
    new topic; returns topic + expected. `options`: more `SimConfig` fields (the skew section's
    dispatcher and hot table); `label`: in the topic's name, for what they make of the stream."""
    from replicator.sim.simulate import produce

    sim = _simulate(cfg, protocol, events, seed, stream, options or {})
    kind = label or ("" if stream == "standard" else stream)
    topic = f"bench-{kind + '-' if kind else ''}{protocol}-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    report = produce(sim, bootstrap, topic, progress=lambda n: log.info("produced %d records", n))
    return {"topic": topic, "records": report.total, "produce_s": time.perf_counter() - t0,
            "stats": sim.stats.to_json(), "expected": sim.expected}


def run_replicator(bootstrap: str, topic: str, protocol: str, warehouse: Path | str, max_buffer_rows: int,
                   workdir: Path, *, extra: Sequence[str] = (), env: Mapping[str, str] | None = None,
                   log_tag: str = "") -> dict[str, Any]:
    """`replicator run --until-caught-up` as a subprocess, its and its JVM's RSS sampled; `extra`:
    more `run` arguments (`bench.common.run_args`); `warehouse`: a directory or an object-store URL
    (`s3a://...`, with `env` pointing the subprocess at its store); `log_tag` tells apart the logs of
    several runs of one topic."""
    cmd = [sys.executable, "-m", "replicator", "run", "--bootstrap-servers", bootstrap, "--topic", topic,
           "--protocol", protocol, "--warehouse", str(warehouse), "--until-caught-up", "--json-summary",
           "--max-buffer-rows", str(max_buffer_rows), *extra]
    stderr_path = workdir / f"run-{topic}{log_tag}.log"
    proc, out, wall, sampler = run_sampled(cmd, workdir, stderr_path, env)
    if proc.returncode != 0:
        tail = stderr_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"replicator run exited {proc.returncode}:\n{tail}")
    summary = json.loads(out.decode().strip().splitlines()[-1])
    return {"wall_s": wall, "summary": summary, "driver_peak_rss": sampler.driver_peak,
            "jvm_peak_rss": sampler.jvm_peak, "driver_cpu_s": sampler.driver_cpu, "jvm_cpu_s": sampler.jvm_cpu,
            "log": str(stderr_path)}


def consume_rate(bootstrap: str, topic: str, protocol: str, decode: bool) -> dict[str, Any]:
    """Read the whole topic (and decode every record) as the engine does, without applying."""
    from replicator.codec import codec_for
    from replicator.codec.state import CodecState
    from replicator.codec.values import DecodeOptions
    from replicator.events import Position
    from replicator.sources.kafka import KafkaSettings, KafkaSource

    codec = codec_for(protocol)
    opts = DecodeOptions(state=CodecState())  # Simple's schemas, from the BOOTSTRAP / DDL messages read
    source = KafkaSource(KafkaSettings(bootstrap, topic, group_id=f"bench-{uuid.uuid4().hex[:8]}"))
    records = events = rows = nbytes = 0
    t0, cpu0 = time.perf_counter(), time.process_time()
    try:
        source.start({p: None for p in source.partitions()})
        while not source.caught_up():
            for rec in source.poll():
                records += 1
                nbytes += len(rec.key or b"") + len(rec.value or b"")
                if decode:
                    evs = codec.decode(rec.key, rec.value, options=opts,
                                       position=Position(rec.topic, rec.partition, rec.offset))
                    events += len(evs)
                    rows += sum(1 for e in evs if isinstance(e, RowChange))
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        source.close()
    return {"records": records, "events": events, "rows": rows, "bytes": nbytes, "elapsed_s": elapsed, "cpu_s": cpu}


def warehouse_files(spark: SparkSession, warehouse: Path) -> dict[str, Any]:
    """Per live table: files in the current snapshot, and parquet / deletion-vector / log files
    on disk (the small-file picture after a CDC run)."""
    from replicator.delta.writer import delta_ref
    from replicator.warehouse import Warehouse

    state = Warehouse(str(warehouse)).load_state()
    tables: dict[str, Any] = {}
    for entry in state.tables.values():
        if entry.status != "live":
            continue
        detail = spark.sql(f"DESCRIBE DETAIL {delta_ref(entry.path)}").collect()[0]
        root = Path(entry.path)
        files = [p for p in root.rglob("*") if p.is_file()]
        tables[f"{entry.schema_name}.{entry.table}"] = {
            "live_files": int(detail["numFiles"]),
            "live_bytes": int(detail["sizeInBytes"]),
            "parquet_on_disk": sum(1 for p in files if p.suffix == ".parquet" and "_delta_log" not in p.parts
                                   and "_change_data" not in p.parts),
            "cdf_files": sum(1 for p in files if "_change_data" in p.parts),
            "dv_files": sum(1 for p in files if p.name.startswith("deletion_vector_")),
            "log_commits": sum(1 for p in files if "_delta_log" in p.parts and p.suffix == ".json"),
            "rows": spark.read.format("delta").load(entry.path).count(),
        }
    return tables


def merged(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The tables a step log record MERGEd rows into (a step may also hold DDLs)."""
    return [t for t in record["tables"].values() if int(t.get("upserts", 0)) + int(t.get("deletes", 0))]


def ddl_count(record: dict[str, Any]) -> int:
    """The DDLs a step log record applied (`ddls`; `ddl` alone in records of older runs)."""
    return len(record.get("ddls") or ([record["ddl"]] if record.get("ddl") else []))


def step_counts(warehouse: Path) -> dict[str, Any]:
    """How the run applied: DDLs, steps that MERGEd rows, MERGEs and rows per MERGE (a MERGE has a
    cost of its own, so few large ones are what a catch-up should do)."""
    from replicator.warehouse import Warehouse

    records = Warehouse(str(warehouse)).windows()
    windows = [r for r in records if merged(r)]
    per_merge = [int(t.get("upserts", 0)) + int(t.get("deletes", 0)) for r in windows for t in merged(r)]
    return {"ddl": sum(ddl_count(r) for r in records), "windows": len(windows),
            "merges": len(per_merge), "rows_per_merge": statistics.median(per_merge) if per_merge else 0}


def append_baseline(spark: SparkSession, warehouse: Path, scratch: Path) -> dict[str, Any]:
    """A plain Delta append of the same final rows (same schema, same table properties) into
    fresh tables: what writing the result costs without CDC. Reading the rows back is not timed."""
    from pyspark.sql.types import StructField, StructType

    from replicator.delta.writer import TableWriter
    from replicator.warehouse import Warehouse

    applier = TableWriter(spark)
    state = Warehouse(str(warehouse)).load_state()
    rows = 0
    elapsed = 0.0
    for entry in state.tables.values():
        if entry.status != "live":
            continue
        table = spark.read.format("delta").load(entry.path)
        # The table's own types (Arrow alone cannot tell TIMESTAMP_NTZ from TIMESTAMP).
        schema = StructType([StructField(f.name, f.dataType, f.nullable) for f in table.schema.fields])
        arrow = table.toArrow()
        path = str(scratch / f"append-{entry.uid}")
        t0 = time.perf_counter()
        applier.create_table(path, entry.table_spec)
        spark.createDataFrame(arrow, schema=schema).write.format("delta").mode("append").save(path)
        elapsed += time.perf_counter() - t0
        rows += arrow.num_rows
    return {"rows": rows, "elapsed_s": elapsed, "rows_per_s": rows / elapsed if elapsed else 0.0}


Runner = Callable[[str, str, str, Path, int, Path], dict[str, Any]]


def bench_e2e(cfg: BenchConfig, bootstrap: str, scratch: Path, runner: Runner | None = None,
              stream: str = "standard") -> dict[str, Any]:
    """Section 2 (Spark-free part): per protocol, produce a `stream` (`bench.common.STREAMS`), run
    the replicator, consume baselines. `runner` is `run_replicator` (a subprocess) unless given; the
    smoke test passes an in-process one."""
    runner = runner or functools.partial(run_replicator, extra=run_args(cfg))
    standard = stream == "standard"
    out: dict[str, Any] = {}
    for i, protocol in enumerate(cfg.protocols):
        name = _name({"stream_kind": stream}, protocol)
        log.info("e2e %s: simulating %d row changes into the broker", name, cfg.events)
        produced = produce_stream(cfg, bootstrap, protocol, cfg.events, cfg.seed + i + (0 if standard else 100),
                                  stream)
        warehouse = scratch / (f"wh-{protocol}" if standard else f"wh-{stream}-{protocol}")
        log.info("e2e %s: replicator run --until-caught-up", name)
        run = runner(bootstrap, produced["topic"], protocol, warehouse, cfg.max_buffer_rows, scratch)
        log.info("e2e %s: %.1f s wall", name, run["wall_s"])
        out[protocol] = {"stream_kind": stream, "stream": produced, "run": run, "warehouse": str(warehouse)}
    # Baselines: best of N passes, round-robin over the protocols so that load bursts hit both.
    passes: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for _ in range(1 if cfg.quick else 3):
        for protocol, res in out.items():
            for decode in (False, True):
                passes.setdefault((protocol, decode), []).append(
                    consume_rate(bootstrap, res["stream"]["topic"], protocol, decode))
    for (protocol, decode), runs in passes.items():
        out[protocol]["decode" if decode else "consume"] = min(runs, key=lambda r: float(r["elapsed_s"]))
    return out


def finish_e2e(spark: SparkSession, *streams: dict[str, Any], scratch: Path, rounds: int = 2) -> None:
    """Section 2 (Spark part, after the subprocesses): verify, append baseline, file counts, for
    every stream's runs (each `bench_e2e`'s result) at once, so that their appends share the
    warm-up and are timed round-robin (a later stream's appends would otherwise run warmer)."""
    from replicator.sim.simcheck import check_warehouse

    runs = [(_name(res, protocol), res) for e2e in streams for protocol, res in e2e.items()]
    for name, res in runs:
        warehouse = Path(res["warehouse"])
        diffs = check_warehouse(spark, warehouse, res["stream"].pop("expected"))
        res["verified"] = not diffs
        res["diffs"] = diffs[:5]
        res["files"] = warehouse_files(spark, warehouse)
        res["steps"] = step_counts(warehouse)
        log.info("e2e %s: verified=%s", name, res["verified"])
    if not runs:
        return
    # The bench's Spark session is fresh: one untimed append first, so that the timed ones do not
    # pay for class loading and JIT; then the best of N, round-robin over the streams and protocols.
    append_baseline(spark, Path(runs[0][1]["warehouse"]), scratch / "append-warm-up")
    for i in range(rounds):
        for name, res in runs:
            a = append_baseline(spark, Path(res["warehouse"]), scratch / f"append-{name.replace(' ', '-')}-{i}")
            if "append" not in res or a["elapsed_s"] < res["append"]["elapsed_s"]:
                res["append"] = a
    for name, res in runs:
        log.info("e2e %s: plain append %.0f rows/s", name, res["append"]["rows_per_s"])


def _name(res: dict[str, Any], protocol: str) -> str:
    """A run's name in logs and scratch paths: the protocol, after its stream unless standard."""
    kind = res.get("stream_kind", "standard")
    return protocol if kind == "standard" else f"{kind} {protocol}"
