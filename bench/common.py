"""What every bench section shares: its configuration, the machine description, and the timers.

Figures are only comparable when taken on the same machine under the same load, so the report
records the machine, the versions and the load average, and the timers measure process CPU time
(robust when other jobs compete for the cores) next to wall time.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import importlib.metadata
import logging
import os
import platform
import statistics
import subprocess
import time
import timeit
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicator.codec import PROTOCOLS
from replicator.engine.loop import LoopOptions

log = logging.getLogger("bench")

STREAMS: tuple[str, ...] = ("standard", "insert-heavy")
"""The end-to-end section's streams: ``standard`` (every table takes inserts, updates and deletes)
and ``insert-heavy`` (`INSERT_ONLY_TABLES` append-only tables and one mixed table), the shape where
a plain Delta append can stand in for a MERGE."""
INSERT_ONLY_TABLES = 4

DEFAULT_BUFFER_ROWS: int = LoopOptions.max_buffer_rows
"""The engine's own default `--max-buffer-rows` (`replicator.engine.loop.LoopOptions`)."""
UNBOUNDED_BUFFER_ROWS = 10**9
"""A `--max-buffer-rows` no stream of the bench reaches: the buffer never forces a step."""


def stream_key(section: str, stream: str) -> str:
    """Where a stream's figures live in the results: ``e2e`` / ``peer`` for the standard stream (the
    keys older reports and the targets read), ``e2e_insert_heavy`` / ``peer_insert_heavy`` else."""
    return section if stream == "standard" else f"{section}_{stream.replace('-', '_')}"


def stream_shape(stream: str, tables: int) -> tuple[int, int]:
    """The simulator's (tables, append-only tables) for a stream (`tables`: the standard one's)."""
    if stream == "insert-heavy":
        return INSERT_ONLY_TABLES + 1, INSERT_ONLY_TABLES
    if stream != "standard":
        raise ValueError(f"unknown stream {stream!r}: {', '.join(STREAMS)}")
    return tables, 0


@dataclass
class BenchConfig:
    """What to measure (``python -m bench`` fills it from its arguments; tests build it directly)."""

    events: int = 1_000_000
    tables: int = 10
    partitions: int = 3
    protocols: tuple[str, ...] = PROTOCOLS
    streams: tuple[str, ...] = STREAMS  # the end-to-end (and peer) streams, each on every protocol
    # names in bench.sections.SECTIONS, in its order
    sections: tuple[str, ...] = ("codec", "e2e", "peer", "tables", "follower", "reader", "objectstore",
                                 "manytables", "skew", "ramp", "follow", "longlog", "scale", "features", "schema",
                                 "profile")
    scale_sizes: tuple[int, ...] = (100_000, 1_000_000, 10_000_000)
    scale_repeat: int = 3
    scale_changes: int = 10_000
    # Schema change at lake scale: RENAME COLUMN on a table of this many rows, rewrite vs metadata-only.
    schema_rows: int = 10_000_000
    workload_events: int = 50_000
    profile_events: int = 20_000
    max_buffer_rows: int = 200_000
    # Passed to every `replicator run` as --apply-parallelism when set (None: the flag is not passed,
    # for builds whose `run` does not have it).
    apply_parallelism: int | None = None
    # The peer's Kafka records per micro-batch (None: about max_buffer_rows row events, see bench.peer).
    peer_max_offsets: int | None = None
    # Many tables: the same number of row changes over few and over many tables.
    tables_counts: tuple[int, int] = (10, 200)
    tables_events: int = 100_000
    # Follower lag: a steady stream of `follower_rate` row changes/s over `follower_tables` tables,
    # a resolved event per partition every second, for `follower_seconds`.
    follower_seconds: float = 180.0
    follower_rate: int = 500
    follower_tables: int = 10
    # The Spark reader next to the driver reader: row changes per topic (driver RSS should stay flat).
    reader_sizes: tuple[int, ...] = (250_000, 1_000_000)
    # The object store: the same stream replicated into a local warehouse and into an s3a:// one on a
    # local S3-compatible server, alternating, `objectstore_pairs` times (row changes: None = `events`).
    objectstore_events: int | None = None
    objectstore_pairs: int = 2
    objectstore_protocols: tuple[str, ...] = ("craft",)
    # Many tables, measured: a stream creating `manytables_count` tables with about `manytables_rows`
    # inserts each, replicated by one process and by `manytables_shards` shards side by side; Delta's
    # floor (CREATE TABLE + one INSERT per table) timed on `manytables_floor_sample` of the tables.
    manytables_count: int = 1000
    manytables_rows: int = 5
    manytables_shards: int = 2
    manytables_floor_sample: int = 100
    # Skew: catch-ups of an even and a skewed insert-heavy stream of `skew_events` row changes (the
    # skewed one: its hot table takes `skew_hot_share` of the changes, dispatched by table onto one
    # partition) at each --max-buffer-rows of `skew_buffers`, per protocol of `skew_protocols`.
    skew_events: int = 8_000
    skew_buffers: tuple[int, ...] = (600, 4_000, 20_000, DEFAULT_BUFFER_ROWS, UNBOUNDED_BUFFER_ROWS)
    skew_hot_share: float = 0.8
    skew_protocols: tuple[str, ...] = ("open", "canal-json")
    # Ramp: one follower per protocol and table count, fed `ramp_rates` row changes/s for
    # `ramp_seconds` each, then `ramp_drop_rate` for `ramp_drop_seconds` (the load drop); each at
    # least `ramp_table_seconds` x the table count (bench/ramp.py `segment_seconds`).
    ramp_rates: tuple[int, ...] = (500, 2_000, 5_000, 10_000)
    ramp_tables: tuple[int, ...] = (10, 100)
    ramp_protocols: tuple[str, ...] = ("open", "canal-json")
    ramp_seconds: float = 60.0
    ramp_drop_rate: int = 500
    ramp_drop_seconds: float = 45.0
    ramp_table_seconds: float = 2.0
    # Follow: a long follow compressed, `follow_steps` small steps (`follow_rows_per_step` rows each)
    # into `follow_tables` tables of a local warehouse and `follow_s3_steps` into an s3a:// one (0:
    # none); step time over the first and last `follow_window` steps; reads best of `follow_read_repeat`.
    follow_steps: int = 300
    follow_s3_steps: int = 80
    follow_rows_per_step: int = 40
    follow_tables: int = 2
    follow_window: int = 100
    follow_read_repeat: int = 5
    # the local run without compaction beside the compacting one (off: only the compacting runs, for
    # a long follow that would otherwise take twice the hours)
    follow_baseline: bool = True
    seed: int = 1
    out: Path = field(default_factory=lambda: Path("bench"))
    quick: bool = False
    keep: bool = False


def run_args(cfg: BenchConfig) -> list[str]:
    """Extra `replicator run` arguments every run of the bench gets (--apply-parallelism when set)."""
    return [] if cfg.apply_parallelism is None else ["--apply-parallelism", str(cfg.apply_parallelism)]


def machine_info() -> dict[str, Any]:
    """Cores, RAM, CPU model, versions and load: what a reader needs to compare two reports."""
    mem_kb = 0
    with contextlib.suppress(OSError), open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    cpu = platform.processor() or ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "-"

    java = "-"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        java = (out.stderr or out.stdout).splitlines()[0].strip()
    commit = "-"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                timeout=10, cwd=Path(__file__).resolve().parent.parent).stdout.strip() or "-"
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "ram_gib": round(mem_kb / (1 << 20), 1),
        "cpu": cpu,
        "os": platform.platform(),
        "python": platform.python_version(),
        "pyspark": version("pyspark"),
        "delta-spark": version("delta-spark"),
        "kafka-python": version("kafka-python"),
        "pyarrow": version("pyarrow"),
        "crc32c": version("crc32c"),
        "java": java,
        "git": commit,
        "load_start": [round(x, 2) for x in os.getloadavg()],
    }


def time_ns(fns: Mapping[str, Callable[[], object]], repeat: int) -> dict[str, dict[str, float]]:
    """ns per call of each fn, timeit-style: autorange picks each loop count (>= 0.2 s), then
    `repeat` rounds, round-robin over the fns so that bursts of other load hit them alike.

    Each round is timed twice: process CPU time (what one core spends; robust when other jobs
    compete for the cores) and wall time. `min_ns` is the best CPU-time round, `median_ns` the
    median one, `wall_min_ns` the best wall-clock round.
    """
    loops = {k: timeit.Timer(f).autorange()[0] for k, f in fns.items()}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    wall: dict[str, list[float]] = {k: [] for k in fns}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: collections are not part of the measured call
    try:
        for _ in range(repeat):
            for k, fn in fns.items():
                n = loops[k]
                w0, c0 = time.perf_counter(), time.process_time()
                for _ in range(n):
                    fn()
                c1, w1 = time.process_time(), time.perf_counter()
                cpu[k].append((c1 - c0) / n * 1e9)
                wall[k].append((w1 - w0) / n * 1e9)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {k: {"min_ns": min(cpu[k]), "median_ns": statistics.median(cpu[k]), "wall_min_ns": min(wall[k]),
                "loops": loops[k], "repeat": repeat} for k in fns}


def best_of(fns: Mapping[str, Callable[[], object]], repeat: int) -> dict[str, dict[str, float]]:
    """Seconds per call of long-running fns, `repeat` rounds round-robin: best and median process
    CPU time, and best wall time (see `time_ns`)."""
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    wall: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            cpu[k].append(time.process_time() - c0)
            wall[k].append(time.perf_counter() - w0)
    return {k: {"min_s": min(cpu[k]), "median_s": statistics.median(cpu[k]), "wall_min_s": min(wall[k])}
            for k in fns}


def fmt(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def rate(run: dict[str, Any]) -> float:
    """Row events per second of wall time of a run (a replicator's or the peer's)."""
    rows = run["summary"]["rows"] if "summary" in run else run["rows"]
    return float(rows) / max(float(run["wall_s"]), 1e-9)
