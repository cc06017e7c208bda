"""Bench section "features": what the table-feature profiles and the MERGE confs cost.

1. small: a 100-row MERGE (60 updates, 20 deletes, 20 inserts) into a 5,000-row table next to a
   plain 100-row append into the same kind of table, in the same run, per profile (`compatible`,
   `fast`) and per MERGE conf lever (Delta's default vs the applier's `MERGE_CONF`), median of N.
2. large: a 10,000-change MERGE into 1M (and, when asked, 10M) row tables with and without
   deletion vectors: when `fast` (deletion vectors) pays.

Run alone: `python -m bench.features [--repeat 7] [--sizes 1000000,10000000]` (writes
bench/features.json and prints markdown), or as a section of `python -m bench`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import logging
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicator.delta.features import PROFILES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.delta.writer import TableWriter

log = logging.getLogger("bench")

SMALL_ROWS = 5_000
SMALL_CHANGES = 100
LARGE_CHANGES = 10_000
# Issue target: on the default profile a small MERGE costs at most this many plain appends.
SMALL_TARGET_RATIO = 4.0
ROWS_PER_FILE = 100_000


def _spec() -> Any:
    from replicator.tables import ColumnSpec, TableSpec

    return TableSpec("bench", "features", (
        ColumnSpec("id", "BIGINT", nullable=False), ColumnSpec("grp", "INT"), ColumnSpec("name", "STRING"),
        ColumnSpec("amount", "DECIMAL(12,2)"), ColumnSpec("updated_at", "TIMESTAMP"), ColumnSpec("payload", "STRING"),
    ), ("id",))


def changes(size: int, n: int, seed: int = 0) -> list[Any]:
    """60% updates and 20% deletes of distinct recent keys, 20% inserts of new keys."""
    import random

    from replicator.changes import Change

    rnd = random.Random(size * 31 + seed)
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    window = min(size, 50_000)
    n_ins = n // 5
    touched = rnd.sample(range(size - window, size), n - n_ins)
    out: list[Change] = []
    for j, k in enumerate(touched):
        if j < n // 5:
            out.append(Change((k,), True, None))
        else:
            out.append(Change((k,), False, {"id": k, "grp": k % 97, "name": f"upd-{k}", "amount": Decimal("1.25"),
                                            "updated_at": when, "payload": "u" * 40}))
    base = size + 1_000_000 * (seed + 1)
    for k in range(base, base + n_ins):
        out.append(Change((k,), False, {"id": k, "grp": k % 97, "name": f"new-{k}", "amount": Decimal("2.50"),
                                        "updated_at": when, "payload": "n" * 40}))
    return out


def load_table(spark: SparkSession, applier: TableWriter, path: str, size: int) -> None:
    """`size` rows in id order, ROWS_PER_FILE rows per file (as the scale section builds them)."""
    applier.create_table(path, _spec())
    parts = max(1, math.ceil(size / ROWS_PER_FILE))
    df = spark.range(0, size, 1, parts).selectExpr(
        "id", "CAST(id % 97 AS INT) AS grp", "CONCAT('name-', CAST(id AS STRING)) AS name",
        "CAST(id % 100000 / 100 AS DECIMAL(12,2)) AS amount",
        "timestamp_seconds(1735689600 + id % 86400) AS updated_at", "repeat('p', 40) AS payload")
    df.write.format("delta").mode("append").save(path)


def _spark_jobs(spark: SparkSession, fn: Callable[[], None]) -> int:
    """Run `fn` and count the Spark jobs it started (the fixed cost that dominates small writes)."""
    sc = spark.sparkContext
    group = f"bench-features-{time.monotonic_ns()}"
    sc.setJobGroup(group, "bench features")
    try:
        fn()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        sc.setLocalProperty("spark.job.description", None)  # type: ignore[arg-type]
    return len(sc.statusTracker().getJobIdsForGroup(group))


def _median(fn: Callable[[int], None], repeat: int) -> tuple[float, list[float]]:
    fn(-1)  # warm-up: class loading and JIT of this code path
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def _interleaved(fns: dict[str, Callable[[int], None]], repeat: int, warm_up: bool = True) -> dict[str, list[float]]:
    """Each of `fns` once per round, round after round (after one warm-up call each unless
    `warm_up` is False), so that the machine's drift over the run falls on all of them alike;
    seconds per call."""
    for fn in fns.values() if warm_up else ():
        fn(-1)  # warm-up: class loading and JIT of this code path
    times: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(repeat):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn(i)
            times[name].append(time.perf_counter() - t0)
    return times


def bench_small(spark: SparkSession, scratch: Path, repeat: int, jobs_samples: int = 3,
                warm_up: bool = True) -> dict[str, Any]:
    """Per profile: a 100-row MERGE with the applier's confs and with Delta's and Spark's defaults
    vs a 100-row append, interleaved round by round; medians and Spark jobs per operation (the
    fewest of `jobs_samples` calls)."""
    from replicator.delta.writer import TableWriter

    spec = _spec()
    out: dict[str, Any] = {"rows": SMALL_ROWS, "changes": SMALL_CHANGES, "repeat": repeat,
                           "target_ratio": SMALL_TARGET_RATIO, "profiles": {}}
    for profile in PROFILES:
        tuned = TableWriter(spark, table_features=profile)
        plain = TableWriter(spark, table_features=profile)
        plain.merge_conf, plain.small_merge_conf = {}, {}
        path = str(scratch / f"small-{profile}")
        load_table(spark, tuned, path, SMALL_ROWS)
        append_src = tuned.source_table(spec, [c for c in changes(SMALL_ROWS, SMALL_CHANGES) if not c.delete])
        schema = spark.read.format("delta").load(path).schema
        renamed = append_src.drop_columns(["_op"]).rename_columns([c.name for c in spec.columns])
        apath = str(scratch / f"append-{profile}")
        load_table(spark, tuned, apath, SMALL_ROWS)
        seq = iter(range(1, 1_000_000))

        def merge(_: int, applier: TableWriter, path: str = path, seq: Any = seq) -> None:
            n = next(seq)
            applier.merge(path, f"bench-{n}", spec, changes(SMALL_ROWS, SMALL_CHANGES, n), 1, {"bench": n})

        def append(_: int, renamed: Any = renamed, schema: Any = schema, apath: str = apath) -> None:
            spark.createDataFrame(renamed, schema=schema).write.format("delta").mode("append").save(apath)

        ops: dict[str, Callable[[int], None]] = {
            "merge": functools.partial(merge, applier=tuned),
            "merge_default_delta": functools.partial(merge, applier=plain), "append": append}
        times = _interleaved(ops, repeat, warm_up)
        res: dict[str, Any] = {}
        for name, ts in times.items():
            res[f"{name}_s"], res[f"{name}_all"] = statistics.median(ts), ts
            # The fewest of the calls: one in ten commits also writes a checkpoint (more jobs).
            res[f"{name}_jobs"] = min(_spark_jobs(spark, functools.partial(ops[name], -1))
                                      for _ in range(jobs_samples))
        res["rows_appended"] = renamed.num_rows
        res["ratio"] = res["merge_s"] / res["append_s"]
        res["ratio_default_delta"] = res["merge_default_delta_s"] / res["append_s"]
        out["profiles"][profile] = res
        log.info("features %s: MERGE %.2f s, %d jobs (Delta defaults %.2f s, %d jobs), append %.2f s, %d jobs, "
                 "ratio %.1f", profile, res["merge_s"], res["merge_jobs"], res["merge_default_delta_s"],
                 res["merge_default_delta_jobs"], res["append_s"], res["append_jobs"], res["ratio"])
        shutil.rmtree(path, ignore_errors=True)
        shutil.rmtree(apath, ignore_errors=True)
    return out


def bench_large(spark: SparkSession, scratch: Path, sizes: Sequence[int], repeat: int) -> dict[str, Any]:
    """10,000-change MERGE with and without deletion vectors, each from the same version (RESTORE)."""
    from replicator.delta.writer import TableWriter, delta_ref

    spec = _spec()
    out: dict[str, Any] = {"changes": LARGE_CHANGES, "repeat": repeat, "sizes": {}}
    for size in sizes:
        row: dict[str, Any] = {}
        for profile in PROFILES:
            applier = TableWriter(spark, table_features=profile)
            path = str(scratch / f"large-{profile}-{size}")
            t0 = time.perf_counter()
            load_table(spark, applier, path, size)
            row[f"{profile}_load_s"] = time.perf_counter() - t0
            base = applier.table_version(path)
            change_set = changes(size, LARGE_CHANGES)

            def one(i: int, applier: TableWriter = applier, path: str = path, base: int = base,
                    change_set: list[Any] = change_set) -> None:
                res = applier.merge(path, f"bench-large-{i}", spec, change_set, 1, {"bench": "large"})
                assert not res.skipped
                spark.sql(f"RESTORE TABLE {delta_ref(path)} TO VERSION AS OF {base}").collect()

            row[f"{profile}_s"], row[f"{profile}_all"] = _median(one, repeat)
            shutil.rmtree(path, ignore_errors=True)
        out["sizes"][str(size)] = row
        log.info("features %d rows: MERGE compatible %.2f s, fast (deletion vectors) %.2f s "
                 "(each timing includes a RESTORE)", size, row["compatible_s"], row["fast_s"])
    return out


def bench_features(spark: SparkSession, scratch: Path, *, repeat: int = 7,
                   sizes: Sequence[int] = (1_000_000,), large_repeat: int = 2, jobs_samples: int = 3,
                   warm_up: bool = True) -> dict[str, Any]:
    """The whole section (what `python -m bench` calls). `jobs_samples` < 3 and `warm_up=False`
    only where the figures do not matter (the smoke test)."""
    return {"small": bench_small(spark, scratch, repeat, jobs_samples, warm_up),
            "large": bench_large(spark, scratch, sizes, large_repeat) if sizes else None}


def render_markdown(res: dict[str, Any]) -> str:
    """The section's part of bench/results.md."""
    small = res["small"]
    lines = ["## Table features: MERGE vs append, per profile", "",
             f"{small['changes']}-row MERGE into a {small['rows']:,}-row table vs appending its "
             f"{small['changes']} rows' inserts and updates, same run, interleaved round by round, median of "
             f"{small['repeat']}; Spark jobs per operation in brackets. Target: MERGE / append at most "
             f"{small.get('target_ratio', SMALL_TARGET_RATIO):.0f}x.", "",
             "| profile | MERGE (applier confs) | MERGE (Delta and Spark defaults) | append | MERGE / append "
             "| defaults / append |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, p in small["profiles"].items():
        jobs = {k: f" ({p[k + '_jobs']})" if k + "_jobs" in p else ""
                for k in ("merge", "merge_default_delta", "append")}
        default_ratio = p.get("ratio_default_delta", p["merge_default_delta_s"] / p["append_s"])
        lines.append(f"| {name} | {p['merge_s']:.2f} s{jobs['merge']} | {p['merge_default_delta_s']:.2f} s"
                     f"{jobs['merge_default_delta']} | {p['append_s']:.2f} s{jobs['append']} | {p['ratio']:.1f}x "
                     f"| {default_ratio:.1f}x |")
    large = res.get("large")
    if large:
        lines += ["", f"{large['changes']:,}-change MERGE (incl. a RESTORE), median of {large['repeat']}:", "",
                  "| table rows | compatible (no deletion vectors) | fast (deletion vectors) |",
                  "| ---: | ---: | ---: |"]
        for size, row in large["sizes"].items():
            lines.append(f"| {int(size):,} | {row['compatible_s']:.2f} s | {row['fast_s']:.2f} s |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.features", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=7, help="rounds of the 100-row MERGE / append (default 7)")
    p.add_argument("--sizes", default="1000000", help="table sizes of the large MERGE ('' to skip)")
    p.add_argument("--large-repeat", type=int, default=2)
    p.add_argument("--out", type=Path, default=Path("bench") / "features.json")
    a = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s bench %(message)s", datefmt="%H:%M:%S")
    from replicator.runtime.spark import get_spark, stop_spark

    spark = get_spark("replicator-bench-features")
    sizes = [int(x) for x in a.sizes.split(",") if x.strip()]
    with tempfile.TemporaryDirectory(prefix="bench-features-") as tmp:
        try:
            res = bench_features(spark, Path(tmp), repeat=a.repeat, sizes=sizes, large_repeat=a.large_repeat)
        finally:
            stop_spark()
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    sys.stdout.write(render_markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
