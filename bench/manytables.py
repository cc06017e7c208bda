"""Section "manytables": many tables, measured (issue 41, "past one driver"). A changefeed over N
tables (1,000 by default) starts with N CREATE TABLEs and a first write into each; what does one
table cost the driver, how far is that from what Delta itself costs, and what do shards buy?

1. **CREATE + first write.** A simulated stream whose events create N tables and insert a few rows
   into each (`--manytables-rows`, append-only tables: every first write is a fresh insert),
   replicated by ``replicator run --until-caught-up`` (a subprocess) into a warehouse of its own:
   wall time, and the apply time (from the first Delta commit of any table to the state saved
   after the last step: a catch-up's first step waits for the JVM, which this leaves out), per
   table, and the summary's Delta commits by kind with their Spark jobs.
2. **Delta's floor**, in the bench's own Spark session once the runs are over: for a sample of the
   same tables (`--manytables-floor-sample`, every k-th), a bare ``CREATE TABLE ... USING delta``
   (same columns, same table properties) and one idempotent write (an ``INSERT INTO`` of the same
   rows from an Arrow-backed view, with the commit's userMetadata set as the replicator sets it),
   per table, on as many threads (each its own session, FAIR pool) as the replicator's
   ``--apply-parallelism``, after an untimed warm-up. Per-table apply time ÷ per-table floor is the
   replicator's own overhead (target: at most 1.25x).
3. **Shards.** The same stream into a second warehouse by ``--shard 0/2`` and ``--shard 1/2`` run
   as two processes side by side: the pair's wall time, each shard's tables and steps, the
   speed-up over one process. Both share this machine's cores (and each starts its own JVM), so
   on 2 cores it is bounded well below 2x; a shard per machine is what the projection assumes.
4. **Projection.** From the measured per-table cost c (the unsharded run's apply time per table):
   a step touching T tables costs about T·c on one driver, so within a lag budget of 10 s a shard
   keeps up with 10/c tables per step and N shards, each its own driver on its own cores, with
   N·10/c (read, decode and the resolved-ts interval are not in c: the budget is for applying).

Every warehouse is checked against the simulator's expected tables; the sharded one as the union
of its shards' tables (each table in exactly one shard, every shard at the final watermark): every
table's row count from its Delta log, and every value of a sample of 100 tables (`_check`).
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import BenchConfig, log, run_args
from bench.e2e import run_replicator
from bench.streams import COMMIT_KINDS, commits

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.warehouse import Warehouse

TARGET_RATIO = 1.25
"""Per-table apply time at most this times Delta's floor (issue 41)."""
LAG_BUDGET_S = 10.0
CHECK_SAMPLE = 100
"""Tables per warehouse whose every value is compared (all of them by row count)."""
PROJECTED_SHARDS = (1, 2, 4, 8, 16)

ManyRunner = Callable[[str, str, str, Path, int, Path, "str | None"], dict[str, Any]]
"""(bootstrap, topic, protocol, warehouse, max_buffer_rows, workdir, shard "I/N" or None) -> a run
as `bench.e2e.run_replicator` returns it."""


def subprocess_runner(cfg: BenchConfig) -> ManyRunner:
    """`replicator run --until-caught-up` as a subprocess, with `--shard I/N` when given."""

    def run(bootstrap: str, topic: str, protocol: str, warehouse: Path, max_buffer_rows: int, workdir: Path,
            shard: str | None) -> dict[str, Any]:
        extra = [*run_args(cfg), *(["--shard", shard] if shard else [])]
        return run_replicator(bootstrap, topic, protocol, warehouse, max_buffer_rows, workdir, extra=extra,
                              log_tag=f"-shard-{shard.replace('/', '-of-')}" if shard else "")
    return run


def produce_many(cfg: BenchConfig, bootstrap: str, protocol: str) -> dict[str, Any]:
    """N append-only tables, created at the start of the stream, `manytables_rows` inserts per table
    on average (spread at random: a few tables may get none and stay empty)."""
    from replicator.sim.simulate import SimConfig, Simulation, produce

    n = cfg.manytables_count
    sim = Simulation(SimConfig(protocol=protocol, seed=cfg.seed + 1000, events=n * cfg.manytables_rows,  # type: ignore[arg-type]
                               partitions=cfg.partitions, tables=n, insert_only=n, ddl="none"))
    topic = f"bench-many-{n}-{protocol}-{uuid.uuid4().hex[:8]}"
    t0 = time.perf_counter()
    report = produce(sim, bootstrap, topic)
    expected = sim.expected
    return {"topic": topic, "records": report.total, "produce_s": time.perf_counter() - t0,
            "stats": sim.stats.to_json(), "tables_with_rows": sum(1 for rows in expected.tables.values() if rows),
            "expected": expected}


def step_seconds(wh: Warehouse) -> dict[str, Any]:
    """The run's steps from its step log: count, DDLs, the steps' seconds (the first step's
    ``recorded_at`` to the state saved after the last), and ``apply_s``: from the first Delta commit
    of any of its tables (the mtime of a ``_delta_log/...0.json``, a local warehouse) to that same
    end. A catch-up's first step starts as soon as the stream is read and waits there for the JVM,
    so only ``apply_s`` leaves the JVM's start-up out (and, by one commit, the first CREATE's time)."""
    from bench.e2e import ddl_count

    records = wh.windows()
    state = wh.load_state()
    tables = state.live_tables()
    if not records:
        return {"steps": 0, "ddl": 0, "seconds": 0.0, "apply_s": 0.0, "tables": len(tables)}
    start = dt.datetime.fromisoformat(records[0]["recorded_at"])
    end = dt.datetime.fromisoformat(state.updated_at) if state.updated_at else start
    first = [(Path(e.path) / "_delta_log" / f"{0:020d}.json").stat().st_mtime for e in tables]
    first_commit = dt.datetime.fromtimestamp(min(first), dt.UTC) if first else start
    return {"steps": len(records), "ddl": sum(ddl_count(r) for r in records),
            "seconds": (end - start).total_seconds(), "apply_s": max((end - first_commit).total_seconds(), 0.0),
            "tables": len(tables)}


def _sum_commits(*summaries: dict[str, Any]) -> dict[str, dict[str, float]] | None:
    out: dict[str, dict[str, float]] = {}
    for summary in summaries:
        counted = commits(summary)
        if counted is None:
            return None
        for kind, c in counted.items():
            acc = out.setdefault(kind, {"count": 0, "jobs": 0, "seconds": 0.0})
            for k in acc:
                acc[k] += c[k]
    return out


def bench_manytables(cfg: BenchConfig, bootstrap: str, scratch: Path, runner: ManyRunner | None = None,
                     side_by_side: bool = True) -> dict[str, Any]:
    """Section "manytables" (Spark-free part): produce the stream, replicate it unsharded, then by
    `manytables_shards` shards side by side (`side_by_side=False`: one after the other, for an
    in-process runner; the pair's wall time is then their sum)."""
    from replicator.shards import ShardSpec
    from replicator.warehouse import Warehouse

    run = runner or subprocess_runner(cfg)
    protocol = cfg.protocols[0]
    n, shards = cfg.manytables_count, cfg.manytables_shards
    log.info("manytables: %d tables, %d rows each on average (%s)", n, cfg.manytables_rows, protocol)
    stream = produce_many(cfg, bootstrap, protocol)
    out: dict[str, Any] = {"tables": n, "rows_per_table": cfg.manytables_rows, "protocol": protocol,
                           "partitions": cfg.partitions, "stream": stream, "shards": shards,
                           "side_by_side": side_by_side}
    one_wh = scratch / f"wh-many-{n}"
    res = run(bootstrap, stream["topic"], protocol, one_wh, cfg.max_buffer_rows, scratch, None)
    steps = step_seconds(Warehouse(str(one_wh)))
    out["one"] = {"warehouse": str(one_wh), "run": res, "steps": steps, "commits": commits(res["summary"]),
                  "wall_per_table_s": res["wall_s"] / n, "step_per_table_s": steps["apply_s"] / n}
    log.info("manytables: one process %.1f s wall, steps %.1f s, from the first commit %.1f s (%.3f s per table)",
             res["wall_s"], steps["seconds"], steps["apply_s"], steps["apply_s"] / n)

    sharded_wh = scratch / f"wh-many-{n}-shards"
    labels = [f"{i}/{shards}" for i in range(shards)]
    runs: dict[str, dict[str, Any]] = {}
    errors: list[BaseException] = []

    def one(label: str) -> None:
        try:
            runs[label] = run(bootstrap, stream["topic"], protocol, sharded_wh, cfg.max_buffer_rows, scratch, label)
        except BaseException as exc:  # re-raised below, on the calling thread
            errors.append(exc)

    t0 = time.perf_counter()
    if side_by_side:
        threads = [threading.Thread(target=one, args=(label,)) for label in labels]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for label in labels:
            one(label)
    pair_wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    per_shard: dict[str, Any] = {}
    for i, label in enumerate(labels):
        s = step_seconds(Warehouse(str(sharded_wh), shard=ShardSpec(i, shards)))
        per_shard[label] = {"run": runs[label], "steps": s,
                            "step_per_table_s": s["apply_s"] / s["tables"] if s["tables"] else 0.0}
    out["sharded"] = {"warehouse": str(sharded_wh), "wall_s": pair_wall, "shards": per_shard,
                      "commits": _sum_commits(*(r["run"]["summary"] for r in per_shard.values()))}
    out["speedup"] = res["wall_s"] / pair_wall if pair_wall else 0.0
    log.info("manytables: %d shards %.1f s wall (pair), speed-up %.2fx", shards, pair_wall, out["speedup"])
    return out


def _floor(spark: SparkSession, sample: list[tuple[Any, Any]], scratch: Path, threads: int) -> dict[str, Any]:
    """Delta's floor: CREATE TABLE + one idempotent INSERT per table of `sample` ((spec, Arrow rows
    with their Spark schema) pairs), on `threads` sessions; returns the timed figures."""
    from replicator.delta.features import DEFAULT_PROFILE, create_properties
    from replicator.delta.session import USER_METADATA
    from replicator.delta.typemap import quote_string
    from replicator.delta.writer import LOG_PROPERTIES, column_ddl, delta_ref
    from replicator.mysql.tokens import quote_ident
    from replicator.runtime.spark import APPLY_POOL

    profile = os.environ.get("REPLICATOR_TABLE_FEATURES", DEFAULT_PROFILE)
    local = threading.local()

    def session() -> SparkSession:
        s = getattr(local, "session", None)
        if s is None:
            s = spark.newSession()
            s.sparkContext.setLocalProperty("spark.scheduler.pool", APPLY_POOL)
            local.session = s
        return s

    def write(job: tuple[str, Any, Any, int]) -> float:
        path, spec, data, ts = job
        s = session()
        t0 = time.perf_counter()
        cols = ", ".join(column_ddl(c) for c in spec.columns)
        props = ", ".join(f"{quote_string(k)} = {quote_string(v)}" for k, v in
                          {**create_properties(profile, (c.name for c in spec.columns)), **LOG_PROPERTIES}.items())
        s.sql(f"CREATE TABLE {delta_ref(path)} ({cols}) USING delta TBLPROPERTIES ({props})").collect()
        arrow, schema = data
        if arrow.num_rows:
            view = f"floor_{uuid.uuid4().hex[:12]}"
            s.createDataFrame(arrow, schema=schema).createOrReplaceTempView(view)
            s.conf.set(USER_METADATA, f'{{"applied_ts": {ts}}}')
            try:
                names = ", ".join(quote_ident(c.name) for c in spec.columns)
                s.sql(f"INSERT INTO {delta_ref(path)} ({names}) SELECT {names} FROM {quote_ident(view)}").collect()
            finally:
                s.conf.unset(USER_METADATA)
                s.catalog.dropTempView(view)
        return time.perf_counter() - t0

    with ThreadPoolExecutor(threads, thread_name_prefix="bench-floor") as pool:
        warm = [(str(scratch / f"warm-{i}"), spec, data, 1) for i, (spec, data) in enumerate(sample[:2 * threads])]
        list(pool.map(write, warm))  # untimed: class loading, JIT, the sessions
        jobs = [(str(scratch / f"t{i}"), spec, data, 1) for i, (spec, data) in enumerate(sample)]
        t0 = time.perf_counter()
        each = list(pool.map(write, jobs))
        elapsed = time.perf_counter() - t0
    return {"tables": len(jobs), "threads": threads, "elapsed_s": elapsed, "per_table_s": elapsed / max(len(jobs), 1),
            "sum_s": sum(each), "warm_up_tables": len(warm), "profile": profile}


def _read(spark: SparkSession, entries: list[Any], threads: int = 4) -> dict[str, Any]:
    """Every entry's table, read back (`ActualTable`s by schema.table), on a few threads."""
    from replicator.sim.simcheck import read_delta_table

    def one(entry: Any) -> tuple[str, Any]:
        return f"{entry.schema_name}.{entry.table}", read_delta_table(spark, entry.path, entry.table_spec.key)

    with ThreadPoolExecutor(threads) as pool:
        return dict(pool.map(one, entries))


def _check(spark: SparkSession, whs: list[Warehouse], expected: Any, sample: int = CHECK_SAMPLE) -> list[str]:
    """Differences between the union of `whs`' live tables and `expected` (each table in one
    warehouse's state only; every state at the stream's final watermark): the set of tables and
    every table's row count (from its Delta log, no Spark: the tables are append-only, so a row
    lost or doubled shows), and every value of `sample` tables spread over them, read back with
    Spark (reading all of 2,000 tables that way takes longer than the runs)."""
    from replicator.delta.rowcount import count_rows
    from replicator.sim.simcheck import compare_tables

    diffs: list[str] = []
    entries: list[Any] = []
    seen: set[str] = set()
    for wh in whs:
        state = wh.load_state()
        if state.applied_ts < expected.watermark:
            diffs.append(f"{wh.meta}: applied watermark {state.applied_ts} behind the stream's {expected.watermark}")
        for entry in state.live_tables():
            name = f"{entry.schema_name}.{entry.table}"
            if name in seen:
                diffs.append(f"{name}: in more than one shard's state")
            seen.add(name)
            entries.append(entry)
    missing = sorted(set(expected.tables) - seen)
    diffs += [f"{name}: not replicated" for name in missing[:5]]
    for entry in entries:
        name = f"{entry.schema_name}.{entry.table}"
        rows, want = count_rows(entry.path), len(expected.tables.get(name, ()))
        if rows != want:
            diffs.append(f"{name}: {rows} rows in its Delta log, {want} upstream")
    k = max(1, len(entries) // max(1, sample))
    picked = entries[::k][:sample]
    names = {f"{e.schema_name}.{e.table}" for e in picked}
    part = replace(expected, tables={n: rows for n, rows in expected.tables.items() if n in names})
    return diffs + compare_tables(part, _read(spark, picked))


def finish_manytables(spark: SparkSession, res: dict[str, Any], scratch: Path, floor_sample: int,
                      threads: int | None = None) -> None:
    """Section "manytables" (Spark part): check both warehouses, then measure Delta's floor on a
    sample of the replicated tables (their rows read back untimed) on `threads` threads (None: the
    replicator's default apply parallelism; pass `--apply-parallelism` when the runs had it)."""
    from replicator.engine.schedule import DEFAULT_APPLY_PARALLELISM
    from replicator.shards import ShardSpec
    from replicator.warehouse import Warehouse

    expected = res["stream"].pop("expected")
    one = Warehouse(res["one"]["warehouse"])
    diffs = _check(spark, [one], expected)
    res["one"]["verified"], res["one"]["diffs"] = not diffs, diffs[:5]
    shards = int(res["shards"])
    diffs = _check(spark, [Warehouse(res["sharded"]["warehouse"], shard=ShardSpec(i, shards)) for i in range(shards)],
                   expected)
    res["sharded"]["verified"], res["sharded"]["diffs"] = not diffs, diffs[:5]
    log.info("manytables: verified one process=%s, %d shards (union)=%s", res["one"]["verified"], shards,
             res["sharded"]["verified"])

    entries = sorted(one.load_state().live_tables(), key=lambda e: (e.schema_name, e.table))
    k = max(1, len(entries) // max(1, floor_sample))
    picked = entries[::k][:floor_sample]
    sample = []
    for entry in picked:
        df = spark.read.format("delta").load(entry.path)
        sample.append((entry.table_spec, (df.toArrow(), df.schema)))
    threads = threads or DEFAULT_APPLY_PARALLELISM
    floor = _floor(spark, sample, scratch / "many-floor", threads)
    floor["rows"] = sum(int(data[0].num_rows) for _, data in sample)
    res["floor"] = floor
    step = float(res["one"]["step_per_table_s"])
    res["ratio"] = step / floor["per_table_s"] if floor["per_table_s"] else 0.0
    log.info("manytables: floor %.3f s per table (%d tables, %d threads); step ÷ floor %.2fx", floor["per_table_s"],
             floor["tables"], threads, res["ratio"])


def projection(res: dict[str, Any]) -> list[tuple[int, float, float]]:
    """(shards, tables per step within the lag budget, seconds of a step over all N tables) from
    the unsharded run's per-table apply time (module doc)."""
    c = float(res["one"]["step_per_table_s"])
    n = int(res["tables"])
    return [(k, k * LAG_BUDGET_S / c if c else 0.0, n * c / k) for k in PROJECTED_SHARDS]


def _verdict(r: dict[str, Any]) -> str:
    return "not checked" if "verified" not in r else ("yes" if r["verified"] else "NO")


def render_markdown(res: dict[str, Any]) -> str:
    """## 12: the section's block of ``results.md``."""
    n, one, sharded = int(res["tables"]), res["one"], res["sharded"]
    stats = res["stream"]["stats"]
    shards = int(res["shards"])
    lines = [
        f"## 12. Many tables, measured: CREATE + first write of {n:,} tables, Delta's floor, shards",
        "",
        f"A simulated stream ({res['protocol']}, {res['partitions']} partitions) that creates {n:,} append-only "
        f"tables and inserts about {res['rows_per_table']} rows into each ({stats['row_changes']:,} row changes, "
        f"{res['stream']['tables_with_rows']:,} tables with rows, {res['stream']['records']:,} Kafka records), "
        "replicated by `replicator run --until-caught-up` (a subprocess) into a warehouse of its own. Apply time: "
        "from the first Delta commit of any table to the state saved after the last step (a catch-up's first step "
        "starts once the stream is read and waits for the JVM; the steps' time from the step log includes that "
        "wait). Delta's floor: in the "
        "bench's own session after the runs, a bare `CREATE TABLE ... USING delta` (same columns and table "
        "properties) and one idempotent `INSERT INTO` of the same rows (userMetadata set, as the replicator "
        "commits) per table, for a sample of the tables, on as many threads (own sessions, FAIR pool) as the "
        "replicator's apply parallelism, after an untimed warm-up.",
        "",
        "| | one process | " + f"{shards} shards ({'side by side' if res.get('side_by_side', True) else 'in turn'})"
        + " |",
        "| --- | ---: | ---: |",
        f"| wall time | {one['run']['wall_s']:.1f} s | {sharded['wall_s']:.1f} s (the pair) |",
        f"| **wall per table** | **{one['wall_per_table_s']:.3f} s** | {sharded['wall_s'] / n:.3f} s |",
        f"| steps (DDLs) / steps' time / apply time | {one['steps']['steps']} ({one['steps']['ddl']:,}) / "
        f"{one['steps']['seconds']:.1f} s / {one['steps']['apply_s']:.1f} s | "
        + "; ".join(f"{k}: {s['steps']['steps']} ({s['steps']['ddl']:,}) / {s['steps']['seconds']:.1f} s / "
                    f"{s['steps']['apply_s']:.1f} s" for k, s in sharded["shards"].items()) + " |",
        f"| **apply time per table** | **{one['step_per_table_s']:.3f} s** | "
        + "; ".join(f"{k}: {s['step_per_table_s']:.3f} s ({s['steps'].get('tables', 0):,} tables)"
                    for k, s in sharded["shards"].items()) + " |",
        "| peak RSS: Python driver / JVM | "
        f"{one['run']['driver_peak_rss'] / (1 << 20):,.0f} / {one['run']['jvm_peak_rss'] / (1 << 20):,.0f} MiB | "
        + "; ".join(f"{s['run']['driver_peak_rss'] / (1 << 20):,.0f} / {s['run']['jvm_peak_rss'] / (1 << 20):,.0f} MiB"
                    for s in sharded["shards"].values()) + " |",
    ]

    def kinds(counted: dict[str, dict[str, float]] | None) -> str:
        if counted is None:
            return "n/a"
        parts = []
        for kind, label in COMMIT_KINDS:
            c = counted.get(kind)
            if c and c["count"]:
                parts.append(f"{label} {c['count']:,.0f} × {c['jobs'] / c['count']:.1f} jobs, "
                             f"{c['seconds'] / c['count']:.2f} s")
        return "; ".join(parts) or "none"

    lines += [
        f"| Delta commits by kind: count × jobs per commit, s per commit | {kinds(one['commits'])} | "
        f"{kinds(sharded['commits'])} |",
        f"| result equals the simulator's expected tables | {_verdict(one)} | {_verdict(sharded)} (union) |",
    ]
    floor = res.get("floor")
    if floor:
        lines += [
            "",
            f"Delta's floor: {floor['tables']:,} of the tables ({floor['rows']:,} rows), {floor['threads']} threads: "
            f"{floor['elapsed_s']:.1f} s, **{floor['per_table_s']:.3f} s per table**. Apply time per table ÷ floor: "
            f"**{res['ratio']:.2f}x** (target ≤ {TARGET_RATIO:g}x).",
        ]
    lines += [
        "",
        f"{shards} shards ÷ one process (wall): **{res['speedup']:.2f}x**. "
        + (f"Both shards ran as processes side by side on this machine's {os.cpu_count()} cores, each with its own "
           "JVM and Spark: they compete for the same cores, so this is no measure of what a shard per machine buys."
           if res.get("side_by_side", True) else "The shards ran one after the other (in-process): no speed-up "
           "is to be had."),
        "",
        f"Projection to a cluster, from the per-table apply time c = {one['step_per_table_s']:.3f} s measured here "
        f"(one driver, {os.cpu_count()} cores): each shard its own driver on its own cores, a step touching T tables "
        f"costs about T·c on its shard, and the whole {LAG_BUDGET_S:g} s lag budget goes to applying (read, decode and "
        "the resolved-ts interval come on top; tables spread evenly over the shards by their hash).",
        "",
        f"| shards | tables per step within {LAG_BUDGET_S:g} s | step over all {n:,} tables |",
        "| ---: | ---: | ---: |",
    ]
    lines += [f"| {k} | {t:,.0f} | {s:.1f} s |" for k, t, s in projection(res)]
    for label, r in (("one process", one), ("shards", sharded)):
        if r.get("diffs"):
            lines += ["", f"First differences ({label}): " + "; ".join(f"`{d}`" for d in r["diffs"][:5])]
    return "\n".join(lines)
