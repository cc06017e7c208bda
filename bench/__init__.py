"""`make bench`: codec speed, end-to-end throughput next to its baselines, MERGE scaling with table
size, and resource use, all measured in ONE run on one machine.

Why: performance is a product feature (Craft exists for high-throughput clusters), and a figure
is only comparable to another taken on the same machine under the same load. So every section
runs in the same invocation, baselines next to what they are a baseline for, and the report
records the machine, the versions and the load average. Nothing is asserted: the targets of
issue 10 are reported as met or not in ``bench/results.md`` (plus ``bench/results.png``; the raw
figures go to ``bench/results.json``, which git ignores).

Sections:
1. codecs: the reference's "case 0" message (ns per decode/encode, best of N, single core) next
   to the seed's Go figures; events/s and MB/s over a simulated multi-table workload, the same
   events in both protocols; message sizes raw and zlib-compressed.
2. end to end: a simulated stream produced into a local broker started here (own temp dir, free
   ports), ``replicator run --until-caught-up`` as a subprocess (so its RSS and its JVM's can be
   sampled), checked against the simulator's expected tables; baselines in the same run: a plain
   Delta append of the same final rows, and consume-only / consume+decode throughput.
3. scale: one MERGE of a fixed 10,000-change set into tables of 100k, 1M and 10M rows, with and
   without the key-range file pruning of ``apply.py``.
4. resources: peak RSS of the driver and its JVM; data files per table after the run.
5. profile: cProfile of the engine in-process on a smaller stream, costs grouped by stage.

Run: ``make bench`` (``BENCH_ARGS="--events 100000"``) or ``python -m bench --help``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime as dt
import functools
import gc
import importlib.metadata
import json
import logging
import math
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import timeit
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicator.codec import craft, open_protocol
from replicator.events import Column, Event, Op, RowChange, TypeCode

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("bench")

GO_ENCODE_NS = 4809  # the seed's Go benchmark, case 0 (ns/op)
GO_DECODE_NS = 7944
SEED_SIZES = {"craft": 300, "open": 708, "craft_zlib": 168, "open_zlib": 223}  # the seed's size table, case 0
CASE0_DECODE_TARGET_NS = 15_000
SCALE_CHANGES = 10_000  # the fixed change set
# Rows per data file of the scale tables: between a compacted table (~1 GiB files) and one built
# by CDC MERGEs alone (a file per MERGE per table, often a few thousand rows).
SCALE_ROWS_PER_FILE = 100_000
GIB = 1 << 30


@dataclass
class BenchConfig:
    events: int = 1_000_000
    tables: int = 10
    partitions: int = 3
    protocols: tuple[str, ...] = ("open", "craft")
    sections: tuple[str, ...] = ("codec", "e2e", "scale", "features", "profile")
    scale_sizes: tuple[int, ...] = (100_000, 1_000_000, 10_000_000)
    scale_repeat: int = 3
    scale_changes: int = 10_000
    workload_events: int = 50_000
    profile_events: int = 20_000
    max_buffer_rows: int = 200_000
    seed: int = 1
    out: Path = field(default_factory=lambda: Path("bench"))
    quick: bool = False
    keep: bool = False


# ---------------------------------------------------------------------------------------------
# Machine and timing helpers


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


# ---------------------------------------------------------------------------------------------
# 1. Codecs


def case0_row() -> RowChange:
    """The reference's "case 0": one update of a.b, 8 new + 8 old columns, no flags."""

    def image(day: int, n: int) -> tuple[Column, ...]:
        return (
            Column("varchar", TypeCode.VARCHAR, 0, f"varchar{n}"),
            Column("string", TypeCode.STRING, 0, f"string{n}"),
            Column("date", TypeCode.DATE, 0, dt.date(2021, 1, day)),
            Column("timestamp", TypeCode.TIMESTAMP, 0, dt.datetime(2021, 1, day, tzinfo=dt.UTC)),
            Column("datetime", TypeCode.DATETIME, 0, dt.datetime(2021, 1, day)),
            Column("float", TypeCode.FLOAT, 0, float(n + 1)),
            Column("long", TypeCode.LONG, 0, 1000 * (n + 1)),
            Column("null", TypeCode.NULL, 0, None),
        )

    return RowChange(424316552636792833, "a", "b", Op.UPDATE, image(2, 1), image(1, 0))


def _relaxed(msg: bytes) -> bytes:
    """The reference's case-0 data writes MySQL relaxed dates ('2021/01/02'); same length."""
    return msg.replace(b"2021-01-02", b"2021/01/02").replace(b"2021-01-01", b"2021/01/01")


def _sizes(key: bytes | None, value: bytes) -> dict[str, int]:
    data = (key or b"") + value
    return {"raw": len(data), "zlib": len(zlib.compress(data))}


def workload_events(cfg: BenchConfig, n: int) -> list[tuple[int, Event]]:
    """(partition, event) of a simulated multi-table stream (rows, resolved, CREATE TABLE)."""
    from replicator.sim.simulate import SimConfig, Simulation

    sim = Simulation(SimConfig(protocol="open", seed=cfg.seed + 100, events=n, partitions=cfg.partitions,
                               tables=cfg.tables, ddl="none"))
    return list(sim.events())


def _encode_partitions(protocol: str, per_partition: Sequence[Sequence[Event]]) -> list[tuple[bytes | None, bytes]]:
    out: list[tuple[bytes | None, bytes]] = []
    for events in per_partition:
        if protocol == "open":
            out.extend(open_protocol.encode_events(events, max_batch_size=16))
        else:
            out.extend((None, v) for v in craft.encode(events, max_batch_size=16))
    return out


def _decode_all(protocol: str, messages: Sequence[tuple[bytes | None, bytes]]) -> int:
    n = 0
    if protocol == "open":
        for key, value in messages:
            n += len(open_protocol.decode(key, value))
    else:
        for _, value in messages:
            n += len(craft.decode(value))
    return n


def bench_codecs(cfg: BenchConfig) -> dict[str, Any]:
    """Section 1: case 0 ns/message, workload events/s and MB/s, message sizes."""
    row = case0_row()
    (craft_ticdc,) = craft.encode_rows([row])
    craft_msg = _relaxed(craft_ticdc)
    ((open_key, open_ticdc),) = open_protocol.encode_rows([row])
    open_value = _relaxed(open_ticdc)
    (c_ev,), (o_ev,) = craft.decode(craft_msg), open_protocol.decode(open_key, open_value)
    assert isinstance(c_ev, RowChange) and isinstance(o_ev, RowChange)
    assert sorted(c_ev.columns, key=str) == sorted(o_ev.columns, key=str)  # Open Protocol sorts by name
    t = time_ns({
        "craft decode": lambda: craft.decode(craft_msg),
        "open decode": lambda: open_protocol.decode(open_key, open_value),
        "craft encode": lambda: craft.encode_rows([row]),
        "open encode": lambda: open_protocol.encode_rows([row]),
        "craft decode_ticdc": lambda: craft.decode(craft_ticdc),
        "open decode_ticdc": lambda: open_protocol.decode(open_key, open_ticdc),
    }, 5 if cfg.quick else 9)
    case0: dict[str, dict[str, Any]] = {
        p: {"decode": t[f"{p} decode"], "encode": t[f"{p} encode"], "decode_ticdc": t[f"{p} decode_ticdc"]}
        for p in ("craft", "open")
    }
    case0["craft"]["size"] = _sizes(None, craft_msg)
    case0["open"]["size"] = _sizes(open_key, open_value)
    log.info("codec case 0: craft decode %.0f ns, open decode %.0f ns", case0["craft"]["decode"]["min_ns"],
             case0["open"]["decode"]["min_ns"])

    events = workload_events(cfg, cfg.workload_events)
    per_partition: list[list[Event]] = [[] for _ in range(cfg.partitions)]
    for p, ev in events:
        per_partition[p].append(ev)
    n_rows = sum(1 for _, ev in events if isinstance(ev, RowChange))
    workload: dict[str, Any] = {"events": len(events), "row_events": n_rows, "tables": cfg.tables}
    encoded = {protocol: _encode_partitions(protocol, per_partition) for protocol in ("open", "craft")}
    fns: dict[str, Callable[[], object]] = {}
    for protocol, messages in encoded.items():
        decoded = _decode_all(protocol, messages)
        assert decoded == len(events), (protocol, decoded, len(events))
        fns[f"{protocol} decode"] = functools.partial(_decode_all, protocol, messages)
        fns[f"{protocol} encode"] = functools.partial(_encode_partitions, protocol, per_partition)
    times = best_of(fns, 3 if cfg.quick else 5)
    for protocol, messages in encoded.items():
        nbytes = sum(len(k or b"") + len(v) for k, v in messages)
        enc, dec = times[f"{protocol} encode"], times[f"{protocol} decode"]
        enc_min, dec_min = enc["min_s"], dec["min_s"]
        compressed = sum(len(zlib.compress((k or b"") + v)) for k, v in messages)
        workload[protocol] = {
            "messages": len(messages), "bytes": nbytes, "zlib_bytes": compressed,
            "bytes_per_row": nbytes / max(n_rows, 1), "zlib_bytes_per_row": compressed / max(n_rows, 1),
            "decode_s": dec_min, "decode_median_s": dec["median_s"], "decode_wall_s": dec["wall_min_s"],
            "encode_s": enc_min, "encode_median_s": enc["median_s"], "encode_wall_s": enc["wall_min_s"],
            "decode_events_per_s": len(events) / dec_min, "decode_mb_per_s": nbytes / dec_min / 1e6,
            "decode_ns_per_event": dec_min / len(events) * 1e9,
            "encode_events_per_s": len(events) / enc_min, "encode_mb_per_s": nbytes / enc_min / 1e6,
        }
        log.info("codec workload %s: decode %.0f events/s", protocol, workload[protocol]["decode_events_per_s"])

    # A multi-row message: the first 16 row events of partition 0, one message in each protocol.
    rows16 = [ev for ev in per_partition[0] if isinstance(ev, RowChange)][:16]
    (c16,) = craft.encode_rows(rows16, max_batch_size=16)
    ((k16, v16),) = open_protocol.encode_rows(rows16, max_batch_size=16)
    crc = bench_crc(b"".join((k or b"") + v for k, v in encoded["open"])[: 1 << 20])
    sizes = {
        "case0": {"craft": case0["craft"]["size"], "open": case0["open"]["size"]},
        "batch16": {"craft": _sizes(None, c16), "open": _sizes(k16, v16), "rows": len(rows16)},
    }
    return {"case0": case0, "workload": workload, "sizes": sizes, "crc": crc}


def bench_crc(data: bytes) -> dict[str, Any]:
    """kafka-python checks the CRC-32C of every fetched record batch: its pure-Python fallback
    against the `crc32c` C extension it uses when installed (a dependency since issue 10)."""
    from kafka.record import _crc32c as pure

    out: dict[str, Any] = {"bytes": len(data)}
    fns: dict[str, Callable[[], object]] = {"pure_python": lambda: pure.crc(data)}
    try:
        import crc32c

        assert crc32c.crc32c(data) == pure.crc(data)
        fns["c_extension"] = lambda: crc32c.crc32c(data)
    except ImportError:
        pass
    for name, t in time_ns(fns, 3).items():
        out[name] = t["min_ns"] / len(data)
    return out


# ---------------------------------------------------------------------------------------------
# 2 + 4. End to end, with RSS sampling


def _proc_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    k, v = line.split(":", 1)
                    out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


def _descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of every descendant of `pid` (one scan of /proc/*/stat)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        name = stat[stat.find("(") + 1:stat.rfind(")")]
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append((int(entry), name))
    out: list[tuple[int, str]] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process (/proc/<pid>/stat fields 14 and 15)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler(threading.Thread):
    """Samples VmRSS/VmHWM and CPU time of a process and of its java descendants until stopped.
    VmHWM is the kernel's own peak, so sampling every 0.5 s loses nothing but the last half second
    (CPU time likewise loses at most the last half second)."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.driver_peak = 0
        self.jvm_peak = 0
        self.driver_cpu = 0.0
        self.jvm_cpu = 0.0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            st = _proc_status(self.pid)
            self.driver_peak = max(self.driver_peak, st.get("VmHWM", 0), st.get("VmRSS", 0))
            self.driver_cpu = max(self.driver_cpu, _cpu_seconds(self.pid) or 0.0)
            for pid, name in _descendants(self.pid):
                if name == "java":
                    js = _proc_status(pid)
                    self.jvm_peak = max(self.jvm_peak, js.get("VmHWM", 0), js.get("VmRSS", 0))
                    self.jvm_cpu = max(self.jvm_cpu, _cpu_seconds(pid) or 0.0)
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)


def _simulate(cfg: BenchConfig, protocol: str, events: int, seed: int) -> Any:
    from replicator.sim.simulate import SimConfig, Simulation

    return Simulation(SimConfig(protocol=protocol, seed=seed, events=events,  # type: ignore[arg-type]
                                partitions=cfg.partitions, tables=cfg.tables, ddl="none"))


def produce_stream(cfg: BenchConfig, bootstrap: str, protocol: str, events: int, seed: int) -> dict[str, Any]:
    """Simulate `events` row changes and produce them into a new topic; returns topic + expected."""
    from replicator.sim.simulate import produce

    sim = _simulate(cfg, protocol, events, seed)
    topic = f"bench-{protocol}-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    report = produce(sim, bootstrap, topic, progress=lambda n: log.info("produced %d records", n))
    return {"topic": topic, "records": report.total, "produce_s": time.perf_counter() - t0,
            "stats": sim.stats.to_json(), "expected": sim.expected}


def run_replicator(bootstrap: str, topic: str, protocol: str, warehouse: Path, max_buffer_rows: int,
                   workdir: Path) -> dict[str, Any]:
    """`replicator run --until-caught-up` as a subprocess, its and its JVM's RSS sampled."""
    cmd = [sys.executable, "-m", "replicator", "run", "--bootstrap-servers", bootstrap, "--topic", topic,
           "--protocol", protocol, "--warehouse", str(warehouse), "--until-caught-up", "--json-summary",
           "--max-buffer-rows", str(max_buffer_rows)]
    stderr_path = workdir / f"run-{topic}.log"
    t0 = time.perf_counter()
    with open(stderr_path, "wb") as err:
        # cwd: an empty dir, so `-m` puts nothing unexpected on sys.path.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, cwd=workdir)
        sampler = RssSampler(proc.pid)
        sampler.start()
        try:
            out, _ = proc.communicate()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            sampler.stop()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = stderr_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"replicator run exited {proc.returncode}:\n{tail}")
    summary = json.loads(out.decode().strip().splitlines()[-1])
    return {"wall_s": wall, "summary": summary, "driver_peak_rss": sampler.driver_peak,
            "jvm_peak_rss": sampler.jvm_peak, "driver_cpu_s": sampler.driver_cpu, "jvm_cpu_s": sampler.jvm_cpu,
            "log": str(stderr_path)}


def consume_rate(bootstrap: str, topic: str, protocol: str, decode: bool) -> dict[str, Any]:
    """Read the whole topic (and decode every record) as the engine does, without applying."""
    from replicator.codec.values import DecodeOptions
    from replicator.engine.pipeline import decoder_for
    from replicator.events import Position
    from replicator.sources.kafka import KafkaSettings, KafkaSource

    dec = decoder_for(protocol)
    opts = DecodeOptions()
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
                    evs = dec(rec.key, rec.value, opts, Position(rec.topic, rec.partition, rec.offset))
                    events += len(evs)
                    rows += sum(1 for e in evs if isinstance(e, RowChange))
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        source.close()
    return {"records": records, "events": events, "rows": rows, "bytes": nbytes, "elapsed_s": elapsed, "cpu_s": cpu}


def warehouse_files(spark: SparkSession, warehouse: Path) -> dict[str, Any]:
    """Per live table: files in the current snapshot, and parquet / deletion-vector / log files
    on disk (the small-file picture after a CDC run)."""
    from replicator.delta.merge import delta_ref
    from replicator.delta.warehouse import Warehouse

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


def step_counts(warehouse: Path) -> dict[str, Any]:
    """How the run applied: DDL steps, window steps, MERGEs and rows per MERGE (a MERGE has a
    cost of its own, so few large ones are what a catch-up should do)."""
    from replicator.delta.warehouse import Warehouse

    records = Warehouse(str(warehouse)).windows()
    windows = [r for r in records if r.get("kind") == "window"]
    per_merge = [int(t.get("upserts", 0)) + int(t.get("deletes", 0)) for r in windows for t in r["tables"].values()]
    return {"ddl": sum(1 for r in records if r.get("kind") == "ddl"), "windows": len(windows),
            "merges": len(per_merge), "rows_per_merge": statistics.median(per_merge) if per_merge else 0}


def append_baseline(spark: SparkSession, warehouse: Path, scratch: Path) -> dict[str, Any]:
    """A plain Delta append of the same final rows (same schema, same table properties) into
    fresh tables: what writing the result costs without CDC. Reading the rows back is not timed."""
    from pyspark.sql.types import StructField, StructType

    from replicator.delta.merge import DeltaApplier
    from replicator.delta.warehouse import Warehouse

    applier = DeltaApplier(spark)
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


def bench_e2e(cfg: BenchConfig, bootstrap: str, scratch: Path, runner: Runner = run_replicator) -> dict[str, Any]:
    """Section 2 (Spark-free part): per protocol, produce, run the replicator, consume baselines.
    `runner` is `run_replicator` (a subprocess); the smoke test passes an in-process one."""
    out: dict[str, Any] = {}
    for i, protocol in enumerate(cfg.protocols):
        log.info("e2e %s: simulating %d row changes into the broker", protocol, cfg.events)
        stream = produce_stream(cfg, bootstrap, protocol, cfg.events, cfg.seed + i)
        warehouse = scratch / f"wh-{protocol}"
        log.info("e2e %s: replicator run --until-caught-up", protocol)
        run = runner(bootstrap, stream["topic"], protocol, warehouse, cfg.max_buffer_rows, scratch)
        log.info("e2e %s: %.1f s wall", protocol, run["wall_s"])
        out[protocol] = {"stream": stream, "run": run, "warehouse": str(warehouse)}
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


def finish_e2e(spark: SparkSession, e2e: dict[str, Any], scratch: Path, rounds: int = 2) -> None:
    """Section 2 (Spark part, after the subprocesses): verify, append baseline, file counts."""
    from replicator.sim.simcheck import check_warehouse

    for protocol, res in e2e.items():
        warehouse = Path(res["warehouse"])
        diffs = check_warehouse(spark, warehouse, res["stream"].pop("expected"))
        res["verified"] = not diffs
        res["diffs"] = diffs[:5]
        res["files"] = warehouse_files(spark, warehouse)
        res["steps"] = step_counts(warehouse)
        log.info("e2e %s: verified=%s", protocol, res["verified"])
    # The bench's Spark session is fresh: one untimed append first, so that the timed ones do not
    # pay for class loading and JIT; then the best of N, round-robin over the protocols.
    first = next(iter(e2e.values()))
    append_baseline(spark, Path(first["warehouse"]), scratch / "append-warm-up")
    for i in range(rounds):
        for protocol, res in e2e.items():
            a = append_baseline(spark, Path(res["warehouse"]), scratch / f"append-{protocol}-{i}")
            if "append" not in res or a["elapsed_s"] < res["append"]["elapsed_s"]:
                res["append"] = a
    for protocol, res in e2e.items():
        log.info("e2e %s: plain append %.0f rows/s", protocol, res["append"]["rows_per_s"])


# ---------------------------------------------------------------------------------------------
# 3. Scale: MERGE a fixed change set into growing tables


def _scale_spec() -> Any:
    from replicator.delta.typemap import ColumnSpec, TableSpec

    return TableSpec("bench", "scale", (
        ColumnSpec("id", "BIGINT", nullable=False), ColumnSpec("grp", "INT"), ColumnSpec("name", "STRING"),
        ColumnSpec("amount", "DECIMAL(12,2)"), ColumnSpec("updated_at", "TIMESTAMP"), ColumnSpec("payload", "STRING"),
    ), ("id",))


def scale_changes(size: int, n: int = SCALE_CHANGES) -> list[Any]:
    """A CDC-like change set on recent keys: 60% updates and 20% deletes of distinct keys among the
    newest 50,000 (or all, if fewer), 20% inserts of new keys after the last one."""
    import random
    from decimal import Decimal

    from replicator.engine.window import Change

    rnd = random.Random(size)
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    window = min(size, 50_000)
    n_ins = n // 5
    n_del = n // 5
    touched = rnd.sample(range(size - window, size), n - n_ins)
    out: list[Change] = []
    for j, k in enumerate(touched):
        if j < n_del:
            out.append(Change((k,), True, None))
        else:
            out.append(Change((k,), False, {"id": k, "grp": k % 97, "name": f"upd-{k}", "amount": Decimal("1.25"),
                                            "updated_at": when, "payload": "u" * 40}))
    for k in range(size, size + n_ins):
        out.append(Change((k,), False, {"id": k, "grp": k % 97, "name": f"new-{k}", "amount": Decimal("2.50"),
                                        "updated_at": when, "payload": "n" * 40}))
    return out


def _load_scale_table(spark: SparkSession, path: str, size: int) -> None:
    """`size` rows with ascending ids, written in id order, SCALE_ROWS_PER_FILE rows per file (a
    table built up by inserts over time: key ranges of files barely overlap)."""
    from replicator.delta.merge import DeltaApplier

    DeltaApplier(spark).create_table(path, _scale_spec())
    parts = max(1, math.ceil(size / SCALE_ROWS_PER_FILE))
    df = spark.range(0, size, 1, parts).selectExpr(
        "id", "CAST(id % 97 AS INT) AS grp", "CONCAT('name-', CAST(id AS STRING)) AS name",
        "CAST(id % 100000 / 100 AS DECIMAL(12,2)) AS amount",
        "timestamp_seconds(1735689600 + id % 86400) AS updated_at",
        "repeat('p', 40) AS payload")
    df.write.format("delta").mode("append").save(path)


def bench_scale(spark: SparkSession, cfg: BenchConfig, scratch: Path) -> dict[str, Any]:
    """Section 3: per size, the same kind of change set MERGEd with key-range pruning off
    ("before") and on ("after"), alternating, each from the same table version (RESTORE between)."""
    from replicator.delta.merge import DeltaApplier, delta_ref

    spec = _scale_spec()
    applier = DeltaApplier(spark)
    results: dict[str, Any] = {"changes": cfg.scale_changes, "rows_per_file": SCALE_ROWS_PER_FILE, "sizes": {}}
    for size in cfg.scale_sizes:
        path = str(scratch / f"scale-{size}")
        t0 = time.perf_counter()
        _load_scale_table(spark, path, size)
        load_s = time.perf_counter() - t0
        base = applier.table_version(path)
        changes = scale_changes(size, cfg.scale_changes)
        times: dict[str, list[float]] = {"before": [], "after": []}
        cpu: dict[str, list[float]] = {"before": [], "after": []}
        warm_up = size == cfg.scale_sizes[0]  # the session's first MERGEs pay for class loading and JIT
        for rep in range(-1 if warm_up else 0, cfg.scale_repeat):
            for mode in ("before", "after") if rep % 2 == 0 else ("after", "before"):
                applier.key_range_pruning = mode == "after"
                c0 = _jvm_cpu()
                t0 = time.perf_counter()
                res = applier.merge(path, f"bench-{size}-{mode}-{rep}", spec, changes, 1, {"bench": mode})
                if rep >= 0:
                    times[mode].append(time.perf_counter() - t0)
                    cpu[mode].append(_jvm_cpu() - c0)
                assert not res.skipped
                spark.sql(f"RESTORE TABLE {delta_ref(path)} TO VERSION AS OF {base}").collect()
        applier.key_range_pruning = True
        results["sizes"][str(size)] = {
            "load_s": load_s, "files": math.ceil(size / SCALE_ROWS_PER_FILE),
            "before_s": statistics.median(times["before"]), "after_s": statistics.median(times["after"]),
            "before_cpu_s": statistics.median(cpu["before"]), "after_cpu_s": statistics.median(cpu["after"]),
            "before_all": times["before"], "after_all": times["after"],
        }
        log.info("scale %d rows: MERGE before %.2f s, after %.2f s", size, results["sizes"][str(size)]["before_s"],
                 results["sizes"][str(size)]["after_s"])
        shutil.rmtree(path, ignore_errors=True)
    sizes = [str(s) for s in cfg.scale_sizes]
    if len(sizes) >= 2:
        big, mid = results["sizes"][sizes[-1]], results["sizes"][sizes[-2]]
        results["growth"] = {"from": int(sizes[-2]), "to": int(sizes[-1]),
                             "before": big["before_s"] / mid["before_s"], "after": big["after_s"] / mid["after_s"],
                             "before_cpu": big["before_cpu_s"] / max(mid["before_cpu_s"], 1e-9),
                             "after_cpu": big["after_cpu_s"] / max(mid["after_cpu_s"], 1e-9)}
    return results


def _jvm_cpu() -> float:
    """CPU seconds used so far by this process's JVM (its Spark driver): a MERGE's work, robust
    to other jobs competing for the cores (0 when no JVM child is found)."""
    return sum(_cpu_seconds(pid) or 0.0 for pid, name in _descendants(os.getpid())
               if name == "java" and "org.apache.spark.deploy.SparkSubmit" in _cmdline(pid))


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------------------------------------
# 5. Profile of the engine in-process

# (label, source file suffix, function names): cumulative time of those functions.
_STAGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Spark / Delta (JVM, waited on via py4j)", "py4j/clientserver.py", ("send_command",)),
    ("decode", "replicator/engine/pipeline.py", ("_decode_record",)),
    ("Kafka fetch (kafka-python)", "replicator/sources/kafka.py", ("poll",)),
    ("Arrow source build (apply.source_table)", "replicator/delta/merge.py", ("source_table",)),
    ("collapse to last change per key", "replicator/engine/window.py", ("collapse",)),
    ("windowing (offer, next_step, commit)", "replicator/engine/window.py", ("offer", "next_step", "commit")),
    ("restart cursors", "replicator/engine/window.py", ("restart_cursors",)),
    ("column check", "replicator/engine/pipeline.py", ("_check_columns",)),
)


def _stage_times(stats: pstats.Stats) -> dict[str, float]:
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    return {label: sum(v[3] for (f, _, fn), v in raw.items() if f.endswith(suffix) and fn in funcs)
            for label, suffix, funcs in _STAGES}


def profile_engine(spark: SparkSession, cfg: BenchConfig, bootstrap: str, scratch: Path) -> dict[str, Any]:
    """cProfile of one in-process `run --until-caught-up` per protocol on a smaller stream."""
    from replicator.engine.pipeline import Engine, RunOptions
    from replicator.sources.kafka import KafkaSettings, KafkaSource

    out: dict[str, Any] = {"events": cfg.profile_events}
    for i, protocol in enumerate(cfg.protocols):
        stream = produce_stream(cfg, bootstrap, protocol, cfg.profile_events, cfg.seed + 50 + i)
        source = KafkaSource(KafkaSettings(bootstrap, stream["topic"], group_id=f"bench-{uuid.uuid4().hex[:8]}"))
        opts = RunOptions(warehouse=str(scratch / f"prof-{protocol}"), protocol=protocol,  # type: ignore[arg-type]
                          until_caught_up=True, progress=False, max_buffer_rows=cfg.max_buffer_rows)
        engine = Engine(source, opts, spark=spark)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        prof.enable()
        summary = engine.run()
        prof.disable()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        stats = pstats.Stats(prof)
        top = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:12]  # type: ignore[attr-defined]
        out[protocol] = {
            "wall_s": wall, "python_cpu_s": cpu, "rows": summary.rows, "steps": summary.steps,
            "rows_per_s": summary.rows / wall,
            "stages": _stage_times(stats),
            "top_tottime": [{"function": f"{Path(f).name}:{ln}({fn})", "tottime_s": tt, "calls": nc}
                            for (f, ln, fn), (_, nc, tt, _, _) in top],
        }
        log.info("profile %s: %.1f s wall, %.1f s Python CPU", protocol, wall, cpu)
    return out


# ---------------------------------------------------------------------------------------------
# Report


def _fmt(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


def _yes(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**not met**")


def targets(results: dict[str, Any], cfg: BenchConfig) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for issue 10's and issue 4's targets."""
    out: list[tuple[str, str, bool | None]] = []
    e2e = results.get("e2e", {})
    for protocol, res in e2e.items():
        rate = res["run"]["summary"]["rows"] / res["run"]["wall_s"]
        half = res["append"]["rows_per_s"] / 2
        out.append((f"end-to-end rows/s >= half the plain-append rate ({protocol})",
                    f"{_fmt(rate)} vs {_fmt(half)} rows/s", rate >= half))
    codec = results.get("codec")
    if codec:
        c, o = codec["workload"]["craft"], codec["workload"]["open"]
        out.append(("Craft decode faster than Open Protocol per event (workload)",
                    f"{_fmt(c['decode_ns_per_event'])} vs {_fmt(o['decode_ns_per_event'])} ns/event",
                    c["decode_ns_per_event"] < o["decode_ns_per_event"]))
        d0 = codec["case0"]["craft"]["decode"]["min_ns"]
        out.append(("Craft case-0 decode < 15 µs (pure Python, one core)", f"{d0 / 1000:.2f} µs",
                    d0 < CASE0_DECODE_TARGET_NS))
    scale = results.get("scale")
    if scale and "growth" in scale:
        g = scale["growth"]
        out.append((f"MERGE 10k into {g['to']:,} rows <= 2x into {g['from']:,} rows",
                    f"{g['after']:.2f}x (before the fix: {g['before']:.2f}x)", g["after"] <= 2.0))
    for protocol, res in e2e.items():
        peak = res["run"]["driver_peak_rss"]
        full = cfg.events >= 1_000_000
        out.append((f"driver RSS < 2 GiB for the 1M run ({protocol})",
                    f"{_mib(peak)} at {cfg.events:,} events", (peak < 2 * GIB) if full else None))
    return out


def render_markdown(results: dict[str, Any], cfg: BenchConfig) -> str:
    m = results["machine"]
    lines = [
        "# replicator benchmark results",
        "",
        f"Measured in one run of `python -m bench {' '.join(results['argv'])}` on {m['date']} "
        f"(git `{m['git']}`), total {results['elapsed_s'] / 60:.1f} min.",
        "",
        f"- **Machine:** {m['cores']} cores ({m['cpu']}), {m['ram_gib']} GiB RAM, {m['os']}",
        f"- **Load average (1/5/15 min):** {' / '.join(map(str, m['load_start']))} at start, "
        f"{' / '.join(map(str, results['load_end']))} at the end (other jobs shared the machine; "
        "best-of-N figures are the least disturbed)",
        f"- **Versions:** Python {m['python']}, PySpark {m['pyspark']}, delta-spark {m['delta-spark']}, "
        f"kafka-python {m['kafka-python']} (crc32c {m['crc32c']}), pyarrow {m['pyarrow']}, {m['java']}",
        "",
        "## Targets",
        "",
        "| target | measured | |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {t} | {v} | {_yes(ok)} |" for t, v, ok in targets(results, cfg)]
    codec = results.get("codec")
    if codec:
        c0 = codec["case0"]
        lines += [
            "",
            "## 1. Codecs",
            "",
            "Case 0 (the reference's message: one update of `a.b`, 8 new + 8 old columns), ns per message, "
            "pure Python on one core: best of N rounds of process CPU time (median; best wall-clock round), "
            "rounds interleaved across the codecs. The reference's case-0 data writes relaxed dates "
            "('2021/01/02 00:00:00'); the last row decodes the same message as TiCDC writes it. The Go figures "
            "are the seed's own (another machine).",
            "",
            "| | Craft (Python) | Open Protocol (Python) | Craft (seed, Go) |",
            "| --- | ---: | ---: | ---: |",
        ]
        for op, label, go in (("decode", "decode", _fmt(GO_DECODE_NS)), ("encode", "encode", _fmt(GO_ENCODE_NS)),
                              ("decode_ticdc", "decode, dates as TiCDC writes them ('-')", "")):
            cr, op_ = c0["craft"][op], c0["open"][op]
            lines.append(f"| {label} | {_fmt(cr['min_ns'])} ({_fmt(cr['median_ns'])}; {_fmt(cr['wall_min_ns'])}) | "
                         f"{_fmt(op_['min_ns'])} ({_fmt(op_['median_ns'])}; {_fmt(op_['wall_min_ns'])}) | {go} |")
        w = codec["workload"]
        lines += [
            "",
            f"Multi-table workload: the same {w['events']:,} events ({w['row_events']:,} row changes over "
            f"{w['tables']} tables, plus resolved and CREATE TABLE events) encoded in both protocols "
            "(16 rows per message); best of N interleaved rounds of process CPU time:",
            "",
            "| | Craft | Open Protocol | Craft / Open |",
            "| --- | ---: | ---: | ---: |",
        ]
        cw, ow = w["craft"], w["open"]
        for label, key, digits in (("decode events/s", "decode_events_per_s", 0), ("decode MB/s", "decode_mb_per_s", 1),
                                   ("decode ns/event", "decode_ns_per_event", 0),
                                   ("encode events/s", "encode_events_per_s", 0), ("encode MB/s", "encode_mb_per_s", 1),
                                   ("bytes per row event", "bytes_per_row", 0),
                                   ("zlib bytes per row event", "zlib_bytes_per_row", 0)):
            lines.append(f"| {label} | {_fmt(cw[key], digits)} | {_fmt(ow[key], digits)} | "
                         f"{cw[key] / ow[key]:.2f} |")
        crc = codec.get("crc", {})
        if "c_extension" in crc:
            lines += [
                "",
                f"Kafka fetch: kafka-python checks each record batch's CRC-32C. Pure-Python fallback "
                f"{crc['pure_python']:.1f} ns/byte vs the `crc32c` C extension {crc['c_extension']:.3f} ns/byte "
                f"(now a dependency): for this workload's Open Protocol messages "
                f"({w['open']['bytes_per_row']:,.0f} bytes per row event) the fallback alone would cost "
                f"{crc['pure_python'] * w['open']['bytes_per_row'] / 1000:.0f} µs per row event, more than decoding.",
            ]
        s = codec["sizes"]
        lines += [
            "",
            "Message sizes in bytes (Open Protocol: key + value; zlib level 6 per message):",
            "",
            "| message | Craft | Open Protocol | Craft zlib | Open Protocol zlib |",
            "| --- | ---: | ---: | ---: | ---: |",
            f"| case 0 (this codec) | {s['case0']['craft']['raw']} | {s['case0']['open']['raw']} | "
            f"{s['case0']['craft']['zlib']} | {s['case0']['open']['zlib']} |",
            f"| case 0 (seed's table) | {SEED_SIZES['craft']} | {SEED_SIZES['open']} | {SEED_SIZES['craft_zlib']} | "
            f"{SEED_SIZES['open_zlib']} |",
            f"| {s['batch16']['rows']} rows of the workload, one message | {s['batch16']['craft']['raw']} | "
            f"{s['batch16']['open']['raw']} | {s['batch16']['craft']['zlib']} | {s['batch16']['open']['zlib']} |",
        ]
    e2e = results.get("e2e")
    if e2e:
        lines += [
            "",
            "## 2. End to end",
            "",
            f"{cfg.events:,} simulated row changes over {cfg.tables} tables and {cfg.partitions} partitions (plus "
            "the stream's at-least-once replays), produced into a local Kafka broker started by the bench; "
            f"`replicator run --until-caught-up --max-buffer-rows {cfg.max_buffer_rows:,}` as a subprocess "
            "(wall time includes Python and JVM start-up). Baselines in the same run: a plain Delta append of "
            "the same final rows into fresh tables (same schema and table properties; create + append timed; "
            "best of N after an untimed warm-up), reading the topic alone, and reading + decoding it (no apply). "
            f"A cold Spark session start took {results.get('spark_start_s', 0.0):.1f} s in the bench process.",
            "",
            "| | " + " | ".join(e2e) + " |",
            "| --- | " + " | ".join("---:" for _ in e2e) + " |",
        ]

        def row(label: str, fn: Callable[[dict[str, Any]], str]) -> None:
            lines.append(f"| {label} | " + " | ".join(fn(r) for r in e2e.values()) + " |")

        def rate(r: dict[str, Any]) -> float:
            return float(r["run"]["summary"]["rows"]) / float(r["run"]["wall_s"])

        def rate_warm(r: dict[str, Any]) -> float:
            warm = float(r["run"]["wall_s"]) - float(results.get("spark_start_s", 0.0))
            return float(r["run"]["summary"]["rows"]) / max(warm, 1e-9)

        row("Kafka records / row events read",
            lambda r: f"{r['stream']['records']:,} / {r['run']['summary']['rows']:,}")
        row("replicated: wall time", lambda r: f"{r['run']['wall_s']:.1f} s")
        row("replicated: engine time (summary)", lambda r: f"{r['run']['summary']['elapsed_s']:.1f} s")
        row("replicated: steps (DDL + windows) / MERGEs / median changes per MERGE",
            lambda r: f"{r['steps']['ddl']} + {r['steps']['windows']} / {r['steps']['merges']} / "
                      f"{r['steps']['rows_per_merge']:,.0f}")
        row("**replicated rows/s** (row events / wall)", lambda r: f"**{_fmt(rate(r))}**")
        row("final rows", lambda r: f"{r['append']['rows']:,}")
        row("plain append: time", lambda r: f"{r['append']['elapsed_s']:.1f} s")
        row("**plain append rows/s**", lambda r: f"**{_fmt(r['append']['rows_per_s'])}**")
        row("replicated rows/s without start-up (wall − cold Spark start)",
            lambda r: _fmt(rate_warm(r)))
        row("read only: records/s (best of N)", lambda r: _fmt(r['consume']['records'] / r['consume']['elapsed_s']))
        row("read + decode: row events/s (best of N)",
            lambda r: _fmt(r['decode']['rows'] / r['decode']['elapsed_s']))
        row("read + decode: CPU per row event", lambda r: f"{r['decode']['cpu_s'] / r['decode']['rows'] * 1e6:.1f} µs")
        row("**ratio** replicated ÷ append", lambda r: f"**{rate(r) / r['append']['rows_per_s']:.2f}**")
        row("ratio replicated ÷ read + decode",
            lambda r: f"{rate(r) / (r['decode']['rows'] / r['decode']['elapsed_s']):.2f}")
        row("result equals the simulator's expected tables", lambda r: "yes" if r["verified"] else "NO")
        resources_at = len(lines)
        lines += [
            "",
            "## 4. Resources (the end-to-end runs of section 2)",
            "",
            "| | " + " | ".join(e2e) + " |",
            "| --- | " + " | ".join("---:" for _ in e2e) + " |",
        ]
        row("peak RSS, Python driver", lambda r: _mib(r["run"]["driver_peak_rss"]))
        row("peak RSS, its JVM", lambda r: _mib(r["run"]["jvm_peak_rss"]))
        row("CPU time, Python driver", lambda r: f"{r['run']['driver_cpu_s']:.0f} s")
        row("CPU time, its JVM", lambda r: f"{r['run']['jvm_cpu_s']:.0f} s")

        def files(r: dict[str, Any], key: str) -> str:
            vals = [t[key] for t in r["files"].values()]
            return f"{sum(vals):,} (per table {min(vals)}–{max(vals)})" if vals else "-"

        row("data files in the current snapshots", lambda r: files(r, "live_files"))
        row("data files on disk (incl. superseded)", lambda r: files(r, "parquet_on_disk"))
        row("deletion-vector files", lambda r: files(r, "dv_files"))
        row("change-data-feed files", lambda r: files(r, "cdf_files"))
        row("Delta commits", lambda r: files(r, "log_commits"))
        resources = lines[resources_at:]
        del lines[resources_at:]
    else:
        resources = []
    scale = results.get("scale")
    if scale:
        lines += [
            "",
            f"## 3. Scale: MERGE of {scale['changes']:,} changes into a growing table",
            "",
            f"A fixed change set ({scale['changes']:,} changes: 60% updates and 20% deletes among the newest 50,000 "
            "keys, 20% inserts of new keys) applied by the engine's own `DeltaApplier.merge` into a table of N rows "
            f"(ids ascending, {scale['rows_per_file']:,} rows per file, deletion vectors on; the bench's own "
            "Spark session, whose JVM CPU time per MERGE is shown too). *Before*: the ON clause "
            "is the key equality only; *after*: it also bounds the key to the change set's [min, max], so Delta "
            "skips files by their statistics. Median of the rounds (each from the same table version).",
            "",
            "| table rows | data files | MERGE before | MERGE after | JVM CPU before | JVM CPU after | load time |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for size, r in scale["sizes"].items():
            lines.append(f"| {int(size):,} | {r.get('files', '-')} | {r['before_s']:.2f} s | {r['after_s']:.2f} s | "
                         f"{r.get('before_cpu_s', 0.0):.2f} s | {r.get('after_cpu_s', 0.0):.2f} s | "
                         f"{r['load_s']:.1f} s |")
        if "growth" in scale:
            g = scale["growth"]
            lines += ["", f"Growth {g['from']:,} → {g['to']:,} rows, wall time: **{g['before']:.2f}x** before, "
                          f"**{g['after']:.2f}x** after (JVM CPU time: {g.get('before_cpu', 0.0):.2f}x before, "
                          f"{g.get('after_cpu', 0.0):.2f}x after)."]
    lines += resources
    prof = results.get("profile")
    if prof:
        protos = [p for p in cfg.protocols if p in prof]
        lines += [
            "",
            "## 5. Where the end-to-end time goes",
            "",
            f"cProfile of the engine in-process (`Engine.run`, --until-caught-up) on {prof['events']:,} row changes; "
            "cumulative seconds per stage (stages nest: decode and Kafka fetch run between MERGEs, the JVM "
            "figure is time spent waiting on Spark).",
            "",
            "| stage | " + " | ".join(protos) + " |",
            "| --- | " + " | ".join("---:" for _ in protos) + " |",
            "| wall | " + " | ".join(f"{prof[p]['wall_s']:.1f} s" for p in protos) + " |",
            "| Python CPU (driver) | " + " | ".join(f"{prof[p]['python_cpu_s']:.1f} s" for p in protos) + " |",
        ]
        for label, _, _ in _STAGES:
            lines.append(f"| {label} | " + " | ".join(f"{prof[p]['stages'][label]:.2f} s" for p in protos) + " |")
    if results.get("features"):
        from bench.features import render_markdown as render_features

        lines += ["", render_features(results["features"])]
    notes = results.get("notes")
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    lines += ["", "Raw figures: `bench/results.json` (not committed). Re-run: `make bench` "
                  "(`make bench BENCH_ARGS=\"--events 100000\"`; `--quick` for a short smoke run).", ""]
    return "\n".join(lines)


def render_chart(results: dict[str, Any], path: Path) -> None:
    """Four panels: case-0 ns, workload decode rate, e2e vs baselines, MERGE time vs table size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    codec = results.get("codec")
    ax = axes[0][0]
    if codec:
        c0 = codec["case0"]
        labels = ["decode", "encode"]
        x = range(len(labels))
        for off, (name, vals) in zip((-0.27, 0.0, 0.27), (
                ("Craft (Python)", [c0["craft"][k]["min_ns"] for k in labels]),
                ("Open Protocol (Python)", [c0["open"][k]["min_ns"] for k in labels]),
                ("Craft (seed, Go)", [GO_DECODE_NS, GO_ENCODE_NS])), strict=True):
            bars = ax.bar([i + off for i in x], vals, width=0.27, label=name)
            ax.bar_label(bars, labels=[f"{v / 1000:.1f}" for v in vals], fontsize=8)
        ax.set_xticks(list(x), labels)
        ax.set_ylabel("ns per message (labels: µs)")
        ax.set_title("Case 0: one update, 8+8 columns")
        ax.legend(fontsize=8)
    ax = axes[0][1]
    if codec:
        w = codec["workload"]
        names = ["Craft", "Open Protocol"]
        dec = [w["craft"]["decode_events_per_s"], w["open"]["decode_events_per_s"]]
        enc = [w["craft"]["encode_events_per_s"], w["open"]["encode_events_per_s"]]
        b1 = ax.bar([-0.2, 0.8], dec, width=0.4, label="decode")
        b2 = ax.bar([0.2, 1.2], enc, width=0.4, label="encode")
        ax.bar_label(b1, labels=[f"{v:,.0f}" for v in dec], fontsize=8)
        ax.bar_label(b2, labels=[f"{v:,.0f}" for v in enc], fontsize=8)
        ax.set_xticks([0, 1], names)
        ax.set_ylabel("events/s (one core)")
        ax.set_title(f"Multi-table workload ({w['events']:,} events)")
        ax.legend(fontsize=8)
    ax = axes[1][0]
    e2e = results.get("e2e")
    if e2e:
        protos = list(e2e)
        series = {
            "replicated (run --until-caught-up)": [e2e[p]["run"]["summary"]["rows"] / e2e[p]["run"]["wall_s"]
                                                   for p in protos],
            "plain Delta append of final rows": [e2e[p]["append"]["rows_per_s"] for p in protos],
            "read + decode only": [e2e[p]["decode"]["rows"] / e2e[p]["decode"]["elapsed_s"] for p in protos],
        }
        width = 0.8 / len(series)
        for j, (name, vals) in enumerate(series.items()):
            bars = ax.bar([i - 0.4 + width * (j + 0.5) for i in range(len(protos))], vals, width=width, label=name)
            ax.bar_label(bars, labels=[f"{v:,.0f}" for v in vals], fontsize=8)
        ax.set_xticks(range(len(protos)), protos)
        ax.set_yscale("log")
        ax.set_ylabel("rows/s (log)")
        ax.set_title(f"End to end, {results['config']['events']:,} row changes")
        ax.legend(fontsize=8)
    ax = axes[1][1]
    scale = results.get("scale")
    if scale:
        sizes = [int(s) for s in scale["sizes"]]
        for mode, label in (("before_s", "ON key equality only (before)"),
                            ("after_s", "with key-range pruning (after)")):
            vals = [scale["sizes"][str(s)][mode] for s in sizes]
            ax.plot(sizes, vals, marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("table rows (log)")
        ax.set_ylabel("MERGE seconds (10,000 changes)")
        ax.set_ylim(bottom=0)
        ax.set_title("MERGE time vs table size")
        ax.legend(fontsize=8)
    fig.suptitle(f"replicator bench — {results['machine']['cores']} cores, {results['machine']['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


# ---------------------------------------------------------------------------------------------
# Main


@contextlib.contextmanager
def _scratch(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="replicator-bench-"))
    try:
        yield path
    finally:
        if keep:
            log.info("kept %s", path)
        else:
            shutil.rmtree(path, ignore_errors=True)


def run(cfg: BenchConfig, argv: Sequence[str]) -> dict[str, Any]:
    """Every section in one invocation; returns the raw results (also written to cfg.out)."""
    started = time.perf_counter()
    results: dict[str, Any] = {"machine": machine_info(), "argv": list(argv),
                               "config": _jsonable(asdict(cfg)), "notes": []}
    if "codec" in cfg.sections:
        log.info("section 1: codecs")
        results["codec"] = bench_codecs(cfg)
    need_broker = "e2e" in cfg.sections or "profile" in cfg.sections
    need_spark = need_broker or "scale" in cfg.sections or "features" in cfg.sections
    with _scratch(cfg.keep) as scratch, contextlib.ExitStack() as stack:
        bootstrap = ""
        if need_broker:
            from replicator.sim.localkafka import running_broker

            bootstrap = stack.enter_context(running_broker(scratch / "kafka"))
        if "e2e" in cfg.sections:
            log.info("section 2: end to end")
            results["e2e"] = bench_e2e(cfg, bootstrap, scratch)
        if need_spark:
            from replicator.delta.spark import get_spark, stop_spark

            t0 = time.perf_counter()
            spark = get_spark("replicator-bench")
            spark.range(1).collect()
            results["spark_start_s"] = time.perf_counter() - t0
            stack.callback(stop_spark)
            if "e2e" in results:
                finish_e2e(spark, results["e2e"], scratch, rounds=1 if cfg.quick else 2)
            if "scale" in cfg.sections:
                log.info("section 3: scale")
                results["scale"] = bench_scale(spark, cfg, scratch)
            if "features" in cfg.sections:  # bench/features.py
                from bench.features import bench_features

                results["features"] = bench_features(spark, scratch, repeat=3 if cfg.quick else 7,
                                                     sizes=cfg.scale_sizes[-2:-1] or cfg.scale_sizes[:1])
            if "profile" in cfg.sections:
                log.info("section 5: profile")
                results["profile"] = profile_engine(spark, cfg, bootstrap, scratch)
    results["load_end"] = [round(x, 2) for x in os.getloadavg()]
    results["elapsed_s"] = time.perf_counter() - started
    return results


def write_outputs(results: dict[str, Any], cfg: BenchConfig) -> None:
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "results.json").write_text(json.dumps(_jsonable(results), indent=1, default=str) + "\n")
    (cfg.out / "results.md").write_text(render_markdown(results, cfg))
    render_chart(results, cfg.out / "results.png")


def parse_args(argv: Sequence[str]) -> BenchConfig:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0] if __doc__
                                else None)
    p.add_argument("--events", type=int, default=None, help="row changes for the end-to-end run (default 1,000,000; "
                   "20,000 with --quick)")
    p.add_argument("--quick", action="store_true", help="short smoke run: fewer rounds, smaller workloads and tables")
    p.add_argument("--out", type=Path, default=Path("bench"), help="output directory (default bench/)")
    p.add_argument("--protocols", default="open,craft", help="end-to-end protocols (default open,craft)")
    p.add_argument("--sections", default="codec,e2e,scale,features,profile", help="which sections (default all)")
    p.add_argument("--table-features", choices=["compatible", "fast"], default=None,
                   help="profile of the replicator's tables (sets REPLICATOR_TABLE_FEATURES for the runs)")
    p.add_argument("--scale-sizes", help="table sizes for the MERGE scale section (default 100000,1000000,10000000; "
                   "--quick: 100000,300000,1000000)")
    p.add_argument("--scale-repeat", type=int, default=None, help="MERGE rounds per size and mode (default 3)")
    p.add_argument("--profile-events", type=int, default=None, help="row changes for the profiled run (default 20,000)")
    p.add_argument("--max-buffer-rows", type=int, default=200_000, help="passed to replicator run (default 200,000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the scratch directory (broker log, warehouses)")
    a = p.parse_args(list(argv))
    cfg = BenchConfig(out=a.out, quick=a.quick, max_buffer_rows=a.max_buffer_rows, seed=a.seed, keep=a.keep)
    cfg.events = a.events if a.events is not None else (20_000 if a.quick else 1_000_000)
    cfg.protocols = tuple(x.strip() for x in a.protocols.split(",") if x.strip())
    cfg.sections = tuple(x.strip() for x in a.sections.split(",") if x.strip())
    if a.table_features:
        os.environ["REPLICATOR_TABLE_FEATURES"] = a.table_features
    sections = {"codec", "e2e", "scale", "features", "profile"}
    unknown = set(cfg.sections) - sections | set(cfg.protocols) - {"open", "craft"}
    if unknown:
        p.error(f"unknown section or protocol: {', '.join(sorted(unknown))}")
    if a.scale_sizes:
        cfg.scale_sizes = tuple(int(x) for x in a.scale_sizes.split(","))
    elif a.quick:
        cfg.scale_sizes = (100_000, 300_000, 1_000_000)
    if any(s < cfg.scale_changes for s in cfg.scale_sizes):
        p.error(f"--scale-sizes must each be >= {cfg.scale_changes} (the change set)")
    cfg.scale_repeat = a.scale_repeat or (1 if a.quick else 3)
    cfg.workload_events = 10_000 if a.quick else 50_000
    cfg.profile_events = a.profile_events or min(cfg.events, 20_000)
    return cfg


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cfg = parse_args(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s bench %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("kafka").setLevel(logging.ERROR)
    results = run(cfg, args)
    write_outputs(results, cfg)
    sys.stdout.write((cfg.out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
