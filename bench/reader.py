"""Section "reader": `--reader spark` (read and decode on Spark executors) next to `--reader
driver` on the same topics, at growing sizes: row changes/s, driver RSS (flat with the Spark
reader: the rows stay on the executors) and JVM RSS; and the decode rate of one executor core
(what the executors run, `replicator.sources.executor.decode_batches`, timed in this process).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import BenchConfig, log, run_args
from bench.e2e import produce_stream, run_replicator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

READERS = ("driver", "spark")


def executor_decode_rate(bootstrap: str, topic: str, protocol: str, limit: int = 200_000) -> dict[str, Any]:
    """Row changes/s of one core running the executors' decode over the topic's first records
    (fetched first, not timed), as Arrow batches of 4,096 records like Spark hands them over."""
    import datetime as dt

    import pyarrow as pa

    from replicator.codec.values import DecodeOptions
    from replicator.sources import executor as ex
    from replicator.sources.kafka import KafkaSettings, KafkaSource

    source = KafkaSource(KafkaSettings(bootstrap, topic, group_id=f"bench-{uuid.uuid4().hex[:8]}"))
    recs: list[Any] = []
    try:
        source.start({p: None for p in source.partitions()})
        while not source.caught_up() and len(recs) < limit:
            recs.extend(source.poll())
    finally:
        source.close()
    recs.sort(key=lambda r: (r.partition, r.offset))
    stamp = dt.datetime.now(dt.UTC)
    schema = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                        ("timestamp", pa.timestamp("us", tz="UTC")), ("key", pa.binary()), ("value", pa.binary())])
    batches = [pa.RecordBatch.from_pydict({
        "topic": [r.topic for r in chunk], "partition": [r.partition for r in chunk],
        "offset": [r.offset for r in chunk], "timestamp": [stamp] * len(chunk),
        "key": [r.key for r in chunk], "value": [r.value for r in chunk]}, schema=schema)
        for chunk in (recs[i:i + 4096] for i in range(0, len(recs), 4096))]
    t0, cpu0 = time.perf_counter(), time.process_time()
    rows = 0
    for out in ex.decode_batches(batches, protocol=protocol, options=DecodeOptions(), watermarks={}, applied_ts=0):
        kinds = out.column("kind").to_pylist()
        rows += sum(1 for k in kinds if k == ex.ROW)
    cpu = time.process_time() - cpu0
    return {"records": len(recs), "rows": rows, "cpu_s": cpu, "wall_s": time.perf_counter() - t0,
            "rows_per_core_s": rows / cpu if cpu else 0.0}


ReaderRunner = Callable[[str, str, str, Path, int, Path, str], dict[str, Any]]


def _subprocess(cfg: BenchConfig) -> ReaderRunner:
    def run(bootstrap: str, topic: str, protocol: str, warehouse: Path, max_buffer_rows: int, workdir: Path,
            reader: str) -> dict[str, Any]:
        return run_replicator(bootstrap, topic, protocol, warehouse, max_buffer_rows, workdir,
                              extra=[*run_args(cfg), "--reader", reader])

    return run


def bench_reader(cfg: BenchConfig, bootstrap: str, scratch: Path, runner: ReaderRunner | None = None) -> dict[str, Any]:
    """Per size: one topic, replicated once per reader (subprocesses, RSS sampled; `runner`: the
    smoke test runs them in-process)."""
    run = runner or _subprocess(cfg)
    protocol = cfg.protocols[-1]
    out: dict[str, Any] = {"protocol": protocol, "partitions": cfg.partitions, "tables": cfg.tables, "sizes": {}}
    for i, events in enumerate(cfg.reader_sizes):
        log.info("reader: %d row changes (%s)", events, protocol)
        stream = produce_stream(dataclasses.replace(cfg, events=events), bootstrap, protocol, events,
                                cfg.seed + 200 + i)
        size: dict[str, Any] = {"stream": stream, "runs": {}}
        for reader in READERS:
            warehouse = scratch / f"wh-reader-{events}-{reader}"
            res = run(bootstrap, stream["topic"], protocol, warehouse, cfg.max_buffer_rows, scratch, reader)
            rate = int(stream["stats"]["row_changes"]) / res["wall_s"]
            log.info("reader %s at %d: %.1f s wall, %.0f row changes/s, driver RSS %.0f MiB", reader, events,
                     res["wall_s"], rate, res["driver_peak_rss"] / 2**20)
            size["runs"][reader] = {"run": res, "warehouse": str(warehouse), "rows_per_s": rate}
        size["ratio"] = size["runs"]["spark"]["rows_per_s"] / size["runs"]["driver"]["rows_per_s"]
        out["sizes"][str(events)] = size
    largest = out["sizes"][str(cfg.reader_sizes[-1])]
    out["decode"] = executor_decode_rate(bootstrap, largest["stream"]["topic"], protocol)
    log.info("reader: executor decode %.0f row changes/s per core", out["decode"]["rows_per_core_s"])
    return out


def finish_reader(spark: SparkSession, reader: dict[str, Any]) -> None:
    """Check every warehouse against the simulator's expected tables."""
    from replicator.sim.simcheck import check_warehouse

    for events, size in reader["sizes"].items():
        expected = size["stream"].pop("expected")
        for name, res in size["runs"].items():
            diffs = check_warehouse(spark, res["warehouse"], expected)
            res["verified"] = not diffs
            res["diffs"] = diffs[:5]
            log.info("reader %s at %s: verified=%s", name, events, res["verified"])
