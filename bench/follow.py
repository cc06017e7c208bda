"""Section "follow": a long follow compressed into minutes, and what it leaves behind (issue 51,
item 1, "measure it first").

A follower commits to every busy table at each step; nothing compacts the small files this makes
or vacuums the files MERGEs replace, and the step log keeps a record per step. This section makes
thousands of small steps quickly and measures the warehouse they leave:

- **The steps.** A catch-up (``replicator run --until-caught-up``, a subprocess, as `bench.e2e`
  runs it) with a tiny ``--max-buffer-rows`` (`follow_rows_per_step`, 40) over a canal-json stream
  whose partitions each carry a resolved event about every transaction (``resolved_every=1``): a
  step is forced whenever the buffer is full, and applies what is complete, so one step is one
  small window per table, as a quiet follower's step is (docs/windows.md, "How big a step is").
  The stream has `follow_tables` tables (2), the first half insert-only (appends), the rest a
  mix of inserts, updates and deletes (MERGEs), every table's rows on every partition; about
  `follow_steps` × `follow_rows_per_step` row changes into a local warehouse, and
  `follow_s3_steps` × that into an ``s3a://`` warehouse on a local S3-compatible server (S3Proxy,
  started by the section; fewer steps, each costs more there).
- **Step time**: from the step log, the interval between one step's ``recorded_at`` (taken as the
  step starts) and the next one's: a step's whole cycle (read, apply, commit, state saved). The
  first `WARM_UP_STEPS` are left out (the JVM's start, the tables' CREATEs; a quarter of a shorter
  run); then the first and the last `follow_window` steps (at most a third of the rest each):
  median and mean, last ÷ first; and the same over the steps of the most frequent composition
  (which tables each step appended to or MERGEd into), like for like: the target's figure.
- **Per table, from the Delta log and a listing of the table's directory** (no Spark, any store):
  commits, live data files and bytes (the snapshot, `replicator.delta.rowcount.read_snapshot`),
  data files on disk (live + replaced by MERGEs, not vacuumed), change-data files
  (``_change_data/``), deletion-vector files, files in ``_delta_log`` and the latest checkpoint's
  bytes.
- **Reads**: a full read of each table, in the bench's Spark session (count and the XOR of an
  `xxhash64` of every column), and with deltalake (`DeltaTable(...).to_pyarrow_table()`, its
  rows). A byte copy of the table gets a manual ``OPTIMIZE`` (timed, the bench's session:
  `replicator.runtime.spark`); then the table and the copy, each at its latest version, are read
  in turns, ABBA, `follow_read_repeat` times each, and the best of each compared: before ÷ after.
  Reading the table before its OPTIMIZE and after it timed the warming JVM too, and reading the
  version before it (`versionAsOf`) timed rebuilding an old snapshot.
- **The replicator's own records**: the step log's bytes (one file locally, segments on an object
  store) and records, the time `Warehouse.windows()` takes to read them all, state.json's bytes.

Every table is checked against the simulator's expected rows at the end (Spark). Targets (issue
51, "done when", measured before any maintenance exists): the last steps cost <= 1.1x the first,
and a full read <= 1.2x the same table's after OPTIMIZE.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import itertools
import os
import shutil
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import BenchConfig, log, run_args
from bench.e2e import run_replicator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from bench.objectstore import S3Target

PROTOCOL = "canal-json"
"""One row per Kafka message: a tiny buffer bound is a bound in messages too."""
WARM_UP_STEPS = 10
"""Steps left out of the step-time figures: the JVM's start and the tables' CREATEs."""
STEP_RATIO_TARGET = 1.1
READ_RATIO_TARGET = 1.2
MAINTENANCE_SHARE_TARGET = 0.1
FILES_BOUND_SMALL = 8  # the default --min-small-files the runs use
COMPACTING = "local, compacting"
"""The local run again, on the same stream, with a follower's compaction between steps."""

FollowRunner = Callable[[str, str, str, str, int, Path, "S3Target | None", bool], dict[str, Any]]
"""(bootstrap, topic, protocol, warehouse (a directory or an s3a:// URL), max_buffer_rows, workdir,
the server of an s3a:// warehouse or None, whether the run compacts between steps as a follower
does) -> the run (`bench.e2e.run_replicator`'s figures)."""


def subprocess_runner(cfg: BenchConfig) -> FollowRunner:
    """`replicator run --until-caught-up` as a subprocess; an s3a:// run gets the server's environment."""

    def run(bootstrap: str, topic: str, protocol: str, warehouse: str, max_buffer_rows: int, workdir: Path,
            server: S3Target | None, compaction: bool) -> dict[str, Any]:
        tag = "-" + warehouse.rstrip("/").rsplit("/", 1)[-1]
        # --spill-rows 0: each full buffer is a step, as a follower's interval makes one
        extra = [*run_args(cfg), "--compaction" if compaction else "--no-compaction", "--spill-rows", "0"]
        return run_replicator(bootstrap, topic, protocol, warehouse, max_buffer_rows, workdir, extra=extra,
                              env=server.env() if server is not None else None, log_tag=tag)

    return run


def _produce(cfg: BenchConfig, bootstrap: str, events: int, seed: int, label: str) -> dict[str, Any]:
    from replicator.sim.simulate import SimConfig, Simulation, produce

    tables = max(cfg.follow_tables, 2)
    sim = Simulation(SimConfig(protocol=PROTOCOL, seed=seed, events=events, partitions=cfg.partitions,
                               tables=tables, insert_only=tables // 2, ddl="none", resolved_every=1,
                               max_txn_rows=max(1, min(8, cfg.follow_rows_per_step // 4))))
    topic = f"bench-follow-{label}-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    report = produce(sim, bootstrap, topic)
    stats = sim.stats.to_json()
    return {"topic": topic, "records": report.total, "produce_s": time.perf_counter() - t0, "stats": stats,
            "expected": sim.expected, "insert_only": insert_only_tables(tables)}


def insert_only_tables(tables: int) -> list[str]:
    """The stream's insert-only tables: the simulator's first ``tables // 2`` (its templates in order)."""
    from replicator.sim.templates import TEMPLATES

    return [f"{TEMPLATES[i].schema}.{TEMPLATES[i].table}" for i in range(min(tables // 2, len(TEMPLATES)))]


def bench_follow(cfg: BenchConfig, bootstrap: str, scratch: Path, server: S3Target | None,
                 runner: FollowRunner | None = None) -> dict[str, Any]:
    """Section "follow" (Spark-free part): produce each target's stream and replicate it in many
    small steps; `server`: the S3-compatible server of the s3a:// run (None: local only)."""
    run = runner or subprocess_runner(cfg)
    out: dict[str, Any] = {"protocol": PROTOCOL, "rows_per_step": cfg.follow_rows_per_step,
                           "tables": max(cfg.follow_tables, 2), "partitions": cfg.partitions,
                           "window": cfg.follow_window, "warm_up_steps": WARM_UP_STEPS, "targets": {}}
    # the same stream with and without a follower's compaction between steps, side by side
    plan = [("local", cfg.follow_steps, False)] if cfg.follow_baseline else []
    plan.append((COMPACTING, cfg.follow_steps, True))
    if server is not None and cfg.follow_s3_steps > 0:
        plan.append(("s3", cfg.follow_s3_steps, True))
    streams: dict[int, dict[str, Any]] = {}
    for target, steps, compaction in plan:
        events = steps * cfg.follow_rows_per_step
        # the local runs replicate the same stream (one topic), the s3a:// run another
        seed = cfg.seed + 500 + (target == "s3")
        if seed not in streams:
            log.info("follow %s: simulating %d row changes into the broker", target, events)
            streams[seed] = _produce(cfg, bootstrap, events, seed, "s3" if target == "s3" else "local")
        produced = dict(streams[seed])
        warehouse = (server.warehouse_url(f"follow-{uuid.uuid4().hex[:8]}") if target == "s3" and server
                     else str(scratch / f"wh-follow-{'compacting' if compaction else 'local'}"))
        log.info("follow %s: replicator run --until-caught-up --max-buffer-rows %d into %s", target,
                 cfg.follow_rows_per_step, warehouse)
        load_start = os.getloadavg()[0]
        res = run(bootstrap, produced["topic"], PROTOCOL, warehouse, cfg.follow_rows_per_step, scratch,
                  server if target == "s3" else None, compaction)
        # First vs last steps compare like with like only on a machine as loaded at the end as at the start.
        res["load_start"], res["load_end"] = load_start, os.getloadavg()[0]
        log.info("follow %s: %d steps in %.1f s", target, int(res["summary"].get("steps", 0)), res["wall_s"])
        out["targets"][target] = {"planned_steps": steps, "events": events, "stream": produced, "run": res,
                                  "warehouse": warehouse, "compaction": compaction}
    return out


# -- what a warehouse holds ------------------------------------------------------------------------

def warm_up_steps(steps: int) -> int:
    """Steps left out of the step times: `WARM_UP_STEPS`, a quarter of a run shorter than 4x that."""
    return WARM_UP_STEPS if steps >= 4 * WARM_UP_STEPS else max(1, steps // 4)


def composition(record: dict[str, Any]) -> str:
    """What a step wrote, per table: "append", "merge" or "none" (DDL only), table uids sorted: steps
    of one composition do the same work, so only they compare like with like."""
    tables = record.get("tables", {})
    return ",".join(f"{uid}:{tables[uid].get('write', 'none')}" for uid in sorted(tables)) or "-"


def _windows(cycles: list[float], window: int) -> dict[str, Any]:
    """Medians and means of the first and last `window` of `cycles` (at most a third each), last ÷ first."""
    n = min(window, len(cycles) // 3)
    out: dict[str, Any] = {"measured": len(cycles), "window": n}
    if n < 1:
        return out
    first, last = cycles[:n], cycles[-n:]
    out.update(first_median_s=statistics.median(first), first_mean_s=statistics.fmean(first),
               last_median_s=statistics.median(last), last_mean_s=statistics.fmean(last),
               all_median_s=statistics.median(cycles))
    out["ratio_median"] = out["last_median_s"] / out["first_median_s"] if out["first_median_s"] else 0.0
    out["ratio_mean"] = out["last_mean_s"] / out["first_mean_s"] if out["first_mean_s"] else 0.0
    return out


def step_cycles(records: list[dict[str, Any]], window: int) -> dict[str, Any]:
    """Step times from the step log: each step's ``recorded_at`` to the next one's, the first
    `warm_up_steps` left out; the first and last `window` steps (at most a third of the rest each).

    ``like``: the same over the steps of the most frequent composition only (`composition`). A
    stream whose tables start at different times makes its first steps cheaper than its last (an
    append-only step against an append-and-MERGE one), which the plain figure counts as growth."""
    ordered = sorted(records, key=lambda r: int(r["step"]))
    starts = [dt.datetime.fromisoformat(r["recorded_at"]).timestamp() for r in ordered]
    warm_up = warm_up_steps(len(records))
    cycles = [b - a for a, b in itertools.pairwise(starts)][warm_up:]
    kinds = [composition(r) for r in ordered[warm_up:len(starts) - 1]]
    out: dict[str, Any] = {"steps": len(records), "warm_up": warm_up, **_windows(cycles, window)}
    if kinds:
        common = max(set(kinds), key=kinds.count)
        same = [c for c, k in zip(cycles, kinds, strict=True) if k == common]
        out["like"] = {"composition": common, **_windows(same, window)}
    return out


def table_files(path: str) -> dict[str, Any]:
    """A table's files, from its Delta log (the snapshot) and a listing of its directory (any store)."""
    from replicator.delta.rowcount import file_bytes, log_version, read_snapshot
    from replicator.storage import fileio_for

    snapshot = read_snapshot(path, measure=file_bytes)
    live = snapshot.live if snapshot is not None else {}
    root = path.rstrip("/") + "/"
    out = {"version": snapshot.version if snapshot is not None else log_version(path),
           "live_files": len({p for p, _ in live}), "live_bytes": sum(live.values()), "data_files": 0, "data_bytes": 0,
           "cdf_files": 0, "cdf_bytes": 0, "dv_files": 0, "log_files": 0, "log_bytes": 0, "log_commits": 0,
           "checkpoints": 0, "checkpoint_bytes": 0}
    latest = -1
    for full, size in fileio_for(path).files(path):
        rel = full[len(root):] if full.startswith(root) else full.rsplit(path.rstrip("/"), 1)[-1].lstrip("/")
        name = rel.rsplit("/", 1)[-1]
        if rel.startswith("_delta_log/"):
            out["log_files"] += 1
            out["log_bytes"] += size
            if name.endswith(".json") and name[:20].isdigit():
                out["log_commits"] += 1
            elif ".checkpoint." in name and name.endswith(".parquet"):
                out["checkpoints"] += 1
                if int(name[:20]) > latest:
                    latest, out["checkpoint_bytes"] = int(name[:20]), size
        elif rel.startswith("_change_data/"):
            out["cdf_files"] += 1
            out["cdf_bytes"] += size
        elif name.startswith("deletion_vector_"):
            out["dv_files"] += 1
        elif name.endswith(".parquet"):
            out["data_files"] += 1
            out["data_bytes"] += size
    return out


def own_records(warehouse: str) -> dict[str, Any]:
    """The replicator's own records: the step log (bytes, records, the time to read it all) and state.json."""
    from replicator.warehouse import Warehouse

    wh = Warehouse(warehouse)
    meta = wh.meta.path.rstrip("/")
    sizes = {full[len(meta) + 1:]: size for full, size in wh.io.files(meta) if full.startswith(meta + "/")}
    log_files = {k: v for k, v in sizes.items() if k == "windows.jsonl" or k.startswith("windows/")}
    t0 = time.perf_counter()
    records = wh.windows()
    read_s = time.perf_counter() - t0
    return {"steplog_bytes": sum(log_files.values()), "steplog_files": len(log_files), "steplog_records": len(records),
            "steplog_read_s": read_s, "state_bytes": sizes.get("state.json", 0)}


# -- reads, before and after OPTIMIZE --------------------------------------------------------------

def _timed(fn: Callable[[], Any], repeat: int) -> dict[str, Any]:
    times: list[float] = []
    value: Any = None
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - t0)
    return {"first_s": times[0], "best_s": min(times), "value": value}


def _alternated(first: Callable[[], Any], second: Callable[[], Any],
                repeat: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both reads timed in turns, ABBA (first, second, second, first, ...): a JVM that warms up or
    a machine that slows down during the reads weighs on both alike, which reading one version
    `repeat` times and then the other does not."""
    times: tuple[list[float], list[float]] = ([], [])
    values: list[Any] = [None, None]
    fns = (first, second)
    for i in range(max(repeat, 1)):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            t0 = time.perf_counter()
            values[k] = fns[k]()
            times[k].append(time.perf_counter() - t0)
    a, b = ({"first_s": t[0], "best_s": min(t), "value": v} for t, v in zip(times, values, strict=True))
    return a, b


def spark_reader(spark: SparkSession, path: str) -> Callable[[], list[Any]]:
    """A full read of the table: count and the XOR of an xxhash64 of every column (order-free)."""
    from pyspark.sql import functions as F

    def read() -> list[Any]:
        df = spark.read.format("delta").load(path)
        row = df.agg(F.count(F.lit(1)).alias("n"), F.bit_xor(F.xxhash64(*df.columns)).alias("h")).collect()[0]
        return [int(row["n"]), int(row["h"] or 0)]

    return read


def deltalake_reader(path: str, options: dict[str, str] | None) -> Callable[[], int]:
    """A full read with deltalake (the table opened, every file read into Arrow): its rows."""
    from deltalake import DeltaTable

    uri = "s3://" + path.split("://", 1)[1] if path.startswith("s3a://") else path

    def read() -> int:
        table = DeltaTable(uri, storage_options=options)
        rows = table.to_pyarrow_table().num_rows
        del table
        return int(rows)

    return read


def _deltalake_options(server: S3Target | None) -> dict[str, str] | None:
    if server is None:
        return None
    env = server.env()
    return {"AWS_ENDPOINT_URL": server.endpoint, "AWS_ACCESS_KEY_ID": env["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": env["AWS_SECRET_ACCESS_KEY"], "AWS_REGION": env.get("AWS_REGION", "us-east-1"),
            "AWS_ALLOW_HTTP": "true"}


def copy_table(path: str, dest: str) -> None:
    """A byte copy of a Delta table's directory (its log's paths are relative: the copy is the same
    table, history included), on any store."""
    from replicator.storage import fileio_for, is_url

    if not is_url(path):
        shutil.copytree(path, dest)
        return
    io, root = fileio_for(path), path.rstrip("/") + "/"
    for full, _size in list(io.files(path)):
        data = io.read(full)
        if data is not None:
            io.write(io.join(dest, full[len(root):]), data)


def measure_table(spark: SparkSession, path: str, repeat: int, dl_options: dict[str, str] | None) -> dict[str, Any]:
    """One table: its files; a copy of it OPTIMIZEd and its files; then full reads of the table
    and of the copy in turns (`_alternated`), each at its latest version. Reading the table and
    then the same table after an OPTIMIZE timed the JVM's warming up too, and reading the version
    before it (`versionAsOf`) timed rebuilding an old snapshot (issue 51, docs/benchmarks.md)."""
    from replicator.delta.writer import delta_ref
    from replicator.storage import fileio_for

    out: dict[str, Any] = {"path": path, "before": table_files(path)}
    copy = path.rstrip("/") + "-optimized"
    fileio_for(copy).remove_tree(copy)
    copy_table(path, copy)
    try:
        t0 = time.perf_counter()
        spark.sql(f"OPTIMIZE {delta_ref(copy)}").collect()
        out["optimize_s"] = time.perf_counter() - t0
        out["after"] = table_files(copy)
        out["spark_before"], out["spark_after"] = _alternated(spark_reader(spark, path), spark_reader(spark, copy),
                                                              repeat)
        try:
            out["deltalake_before"], out["deltalake_after"] = _alternated(
                deltalake_reader(path, dl_options), deltalake_reader(copy, dl_options), repeat)
        except Exception as exc:  # a feature deltalake cannot read is a figure too
            out["deltalake_before"] = out["deltalake_after"] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        finally:
            gc.collect()  # delta-rs's S3 client must not outlive the interpreter (abort at exit)
    finally:
        fileio_for(copy).remove_tree(copy)
    out["rows"] = out["spark_before"]["value"][0]
    out["same_after"] = out["spark_before"]["value"] == out["spark_after"]["value"]
    for reader in ("spark", "deltalake"):
        before, after = out[f"{reader}_before"], out[f"{reader}_after"]
        out[f"{reader}_ratio"] = (before["best_s"] / after["best_s"]
                                  if "best_s" in before and "best_s" in after and after["best_s"] else None)
    return out


def merge_times(spark: SparkSession, path: str, warm_up: int, window: int) -> dict[str, Any]:
    """A table's MERGEs as Delta timed them (`operationMetrics.executionTimeMs`, the history), the
    first `warm_up` left out, over the first and last `window` (at most a third each): whether the
    MERGE itself grows, or the rest of a step (issue 51: a step on s3a:// grew where the local one
    did not)."""
    from replicator.delta.writer import delta_ref

    rows = spark.sql(f"DESCRIBE HISTORY {delta_ref(path)}").select("version", "operation", "operationMetrics").collect()
    times = [float(r["operationMetrics"]["executionTimeMs"]) / 1000 for r in sorted(rows, key=lambda r: r["version"])
             if r["operation"] == "MERGE" and r["operationMetrics"] and "executionTimeMs" in r["operationMetrics"]]
    return {"merges": len(times), **_windows(times[warm_up:], window)}


@contextlib.contextmanager
def _access(spark: SparkSession, server: S3Target | None) -> Iterator[None]:
    if server is None:
        yield
        return
    from bench.objectstore import object_store_access

    with object_store_access(spark, server):
        yield


def finish_follow(spark: SparkSession, res: dict[str, Any], server: S3Target | None, repeat: int) -> None:
    """Section "follow" (Spark part): per target, the steps, each table's files and reads before and
    after OPTIMIZE, the replicator's records, and every table checked against its stream."""
    from replicator.sim.simcheck import check_warehouse
    from replicator.warehouse import Warehouse

    for target, fig in res["targets"].items():
        s3 = server if target == "s3" else None
        with _access(spark, s3):
            warehouse = fig["warehouse"]
            wh = Warehouse(warehouse)
            records = wh.windows()
            fig["step_time"] = step_cycles(records, res["window"])
            fig["records"] = own_records(warehouse)
            insert_only = set(fig["stream"].get("insert_only", []))
            tables: dict[str, Any] = {}
            for entry in wh.load_state().live_tables():
                name = f"{entry.schema_name}.{entry.table}"
                log.info("follow %s: measuring %s", target, name)
                t = measure_table(spark, entry.path, repeat, _deltalake_options(s3))
                t["kind"] = "insert-only" if name in insert_only else "mixed"
                t["merge_time"] = merge_times(spark, entry.path, fig["step_time"]["warm_up"], res["window"])
                tables[name] = t
            fig["tables"] = tables
            diffs = check_warehouse(spark, warehouse, fig["stream"].pop("expected"))
            fig["verified"], fig["diffs"] = not diffs, diffs[:5]
        st = fig["step_time"]
        log.info("follow %s: %d steps, step %.2f s first -> %.2f s last (x%.2f); verified=%s", target, st["steps"],
                 st.get("first_median_s", 0.0), st.get("last_median_s", 0.0), st.get("ratio_median", 0.0),
                 fig["verified"])


# -- targets and the report ------------------------------------------------------------------------

def follow_targets(res: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """Issue 51's: the last steps <= 1.1x the first; a full read <= 1.2x the table's after OPTIMIZE."""
    out: list[tuple[str, str, bool | None]] = []
    for target, fig in res["targets"].items():
        st = fig.get("step_time", {})
        like = st.get("like", {})
        if "ratio_median" in like:
            out.append((f"follow, {target}: the last {like['window']} steps <= {STEP_RATIO_TARGET:g}x the first, "
                        f"like for like ({like['measured']} of {st['steps']} steps wrote the same tables alike)",
                        f"{like['ratio_median']:.2f}x ({like['first_median_s']:.2f} s -> "
                        f"{like['last_median_s']:.2f} s; all steps {st.get('ratio_median', 0.0):.2f}x)",
                        like["ratio_median"] <= STEP_RATIO_TARGET))
        elif "ratio_median" in st:
            out.append((f"follow, {target}: the last {st['window']} steps <= {STEP_RATIO_TARGET:g}x the first "
                        f"({st['steps']} steps)",
                        f"{st['ratio_median']:.2f}x ({st['first_median_s']:.2f} s -> {st['last_median_s']:.2f} s)",
                        st["ratio_median"] <= STEP_RATIO_TARGET))
        if fig.get("compaction"):
            summary, wall = fig["run"]["summary"], fig["run"]["wall_s"]
            share = float(summary.get("compaction_s", 0.0)) / wall if wall else 0.0
            spent = float(summary.get("compaction_s", 0.0))
            out.append((f"follow, {target}: compaction between steps <= {MAINTENANCE_SHARE_TARGET:g} of the wall "
                        "time", f"{share:.3f} ({summary.get('compactions', 0)} compactions, {spent:.1f} s of "
                        f"{wall:.0f} s)", share <= MAINTENANCE_SHARE_TARGET))
            live = [(name, t["before"]["live_files"]) for name, t in fig.get("tables", {}).items()]
            if live:
                name, most = max(live, key=lambda x: x[1])
                bound = 2 * FILES_BOUND_SMALL + 2
                out.append((f"follow, {target}: live files per table <= {bound} (twice --min-small-files, plus a "
                            "step's)", f"most {most} ({name})", most <= bound))
        ratios = [(name, t["spark_ratio"]) for name, t in fig.get("tables", {}).items() if t.get("spark_ratio")]
        if ratios:
            name, worst = max(ratios, key=lambda x: x[1])
            out.append((f"follow, {target}: a full Spark read <= {READ_RATIO_TARGET:g}x the same table's after "
                        "OPTIMIZE", f"worst {worst:.2f}x ({name})", worst <= READ_RATIO_TARGET))
    return out


def _s(fig: dict[str, Any]) -> str:
    if "error" in fig:
        return "error"
    return f"{fig['best_s']:.2f} s"


def _x(ratio: float | None) -> str:
    return "–" if ratio is None else f"{ratio:.1f}x"


def _checkpoint(files: dict[str, Any]) -> str:
    """The latest checkpoint's size, and how many there are."""
    if not files["checkpoints"]:
        return "none"
    return f"{_kib(files['checkpoint_bytes'])} ({files['checkpoints']})"


def _compaction(fig: dict[str, Any]) -> str:
    if not fig.get("compaction"):
        return "off"
    s, wall = fig["run"]["summary"], fig["run"]["wall_s"]
    return (f"{s.get('compactions', 0)}, {s.get('compaction_s', 0.0):.1f} s, "
            f"{s.get('compaction_s', 0.0) / wall if wall else 0.0:.3f}")


def _merges(fig: dict[str, Any]) -> str:
    if "ratio_median" not in fig:
        return f"{fig.get('merges', 0)}" if fig else "–"
    return (f"{fig['merges']}: {fig['first_median_s']:.2f} s → {fig['last_median_s']:.2f} s, "
            f"**{fig['ratio_median']:.2f}x**")


def _kib(n: int) -> str:
    return f"{n / 1024:,.0f} KiB"


def render_markdown(res: dict[str, Any]) -> str:
    """The section's block of ``results.md``."""
    lines = [
        "## 15. A long follow, compressed: files, step time, reads, records",
        "",
        f"`replicator run --until-caught-up --max-buffer-rows {res['rows_per_step']}` (a subprocess) over a "
        f"{res['protocol']} stream of {res['tables']} tables (half insert-only, half inserts, updates and deletes; "
        f"{res['partitions']} partitions, a resolved event about every transaction): a step every "
        f"~{res['rows_per_step']} rows, one small window per table. `local` runs with `--no-compaction` (what "
        f"every run did before issue 51), `{COMPACTING}` replicates the same stream compacting between steps as a "
        "follower does (`--compaction`), as does `s3`; no vacuum. Step time: one "
        "step's `recorded_at` to the next's (read + apply + commit + state), the first "
        f"{res['warm_up_steps']} steps (a quarter of a shorter run) left out; first / last: the first and "
        f"last {res['window']} steps (at most "
        "a third of the rest each), medians; like for like: the same over the steps that wrote the same tables "
        "the same way (append or MERGE) as most steps did. Reads: a full read (Spark: count + XOR of xxhash64 "
        "of every column; "
        "deltalake: `to_pyarrow_table()`), best of the repeats, then `OPTIMIZE` (the bench's session) and the same "
        "reads; ratio: before ÷ after.",
        "",
        "| warehouse | steps | wall | load 1 min, start → end | step first → last (median) | last ÷ first | "
        "like for like: steps, first → last, ÷ | compaction (tables, s, share) | step log | records | "
        "`windows()` | state.json | verified |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for target, fig in res["targets"].items():
        st, rec = fig.get("step_time", {}), fig.get("records", {})
        steps = f"{st['first_median_s']:.2f} s → {st['last_median_s']:.2f} s" if "ratio_median" in st else "–"
        ratio = f"**{st['ratio_median']:.2f}x**" if "ratio_median" in st else "–"
        like = st.get("like", {})
        same = (f"{like['measured']:,}, {like['first_median_s']:.2f} s → {like['last_median_s']:.2f} s, "
                f"**{like['ratio_median']:.2f}x**" if "ratio_median" in like else "–")
        verified = "not checked" if "verified" not in fig else ("yes" if fig["verified"] else "NO")
        lines.append(f"| {target} | {st.get('steps', fig['run']['summary'].get('steps', 0)):,} | "
                     f"{fig['run']['wall_s']:.0f} s | {fig['run'].get('load_start', 0.0):.1f} → "
                     f"{fig['run'].get('load_end', 0.0):.1f} | {steps} | {ratio} | {same} | {_compaction(fig)} | "
                     f"{_kib(rec.get('steplog_bytes', 0))} "
                     f"({rec.get('steplog_files', 0)} files) | {rec.get('steplog_records', 0):,} | "
                     f"{rec.get('steplog_read_s', 0.0) * 1000:.0f} ms | {rec.get('state_bytes', 0):,} B | "
                     f"{verified} |")
    lines += ["", "| warehouse | table | kind | rows | commits | live data files | data files on disk | "
                  "change-data files | `_delta_log` files | latest checkpoint (count) | "
                  "Spark read before → after OPTIMIZE | ÷ | deltalake before → after | ÷ | OPTIMIZE | "
                  "MERGEs: Delta's time, first → last (median) |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
              "| ---: |"]
    for target, fig in res["targets"].items():
        for name, t in fig.get("tables", {}).items():
            b, a = t["before"], t["after"]
            lines.append(
                f"| {target} | {name} | {t['kind']} | {t['rows']:,} | {b['version']} | {b['live_files']:,} "
                f"→ {a['live_files']:,} | {b['data_files']:,} | {b['cdf_files']:,} | {b['log_files']:,} | "
                f"{_checkpoint(b)} | {_s(t['spark_before'])} → {_s(t['spark_after'])} | "
                f"**{_x(t['spark_ratio'])}** | {_s(t['deltalake_before'])} → {_s(t['deltalake_after'])} | "
                f"**{_x(t['deltalake_ratio'])}** | {t['optimize_s']:.1f} s | {_merges(t.get('merge_time', {}))} |")
    for target, fig in res["targets"].items():
        if fig.get("diffs"):
            lines += ["", f"First differences ({target}): " + "; ".join(f"`{d}`" for d in fig["diffs"][:5])]
    return "\n".join(lines)
