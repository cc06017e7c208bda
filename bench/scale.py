"""Section 3, scale: one MERGE of a fixed change set into tables of growing size, with and
without the key-range file pruning of `replicator.delta.writer.TableWriter`."""

from __future__ import annotations

import datetime as dt
import math
import shutil
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import BenchConfig, log
from bench.procs import jvm_cpu

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCALE_CHANGES = 10_000  # the fixed change set MERGEd into every table size
# Rows per data file of the scale tables: between a compacted table (~1 GiB files) and one built
# by CDC MERGEs alone (a file per MERGE per table, often a few thousand rows).
SCALE_ROWS_PER_FILE = 100_000


def _scale_spec() -> Any:
    from replicator.tables import ColumnSpec, TableSpec

    return TableSpec("bench", "scale", (
        ColumnSpec("id", "BIGINT", nullable=False), ColumnSpec("grp", "INT"), ColumnSpec("name", "STRING"),
        ColumnSpec("amount", "DECIMAL(12,2)"), ColumnSpec("updated_at", "TIMESTAMP"), ColumnSpec("payload", "STRING"),
    ), ("id",))


def scale_changes(size: int, n: int = SCALE_CHANGES) -> list[Any]:
    """A CDC-like change set on recent keys: 60% updates and 20% deletes of distinct keys among the
    newest 50,000 (or all, if fewer), 20% inserts of new keys after the last one."""
    import random
    from decimal import Decimal

    from replicator.changes import Change

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
    from replicator.delta.writer import TableWriter

    TableWriter(spark).create_table(path, _scale_spec())
    parts = max(1, math.ceil(size / SCALE_ROWS_PER_FILE))
    df = spark.range(0, size, 1, parts).selectExpr(
        "id", "CAST(id % 97 AS INT) AS grp", "CONCAT('name-', CAST(id AS STRING)) AS name",
        "CAST(id % 100000 / 100 AS DECIMAL(12,2)) AS amount",
        "timestamp_seconds(1735689600 + id % 86400) AS updated_at",
        "repeat('p', 40) AS payload")
    df.write.format("delta").mode("append").save(path)


def bench_scale(spark: SparkSession, cfg: BenchConfig, scratch: Path, *, warm_up: bool = True) -> dict[str, Any]:
    """Section 3: per size, the same kind of change set MERGEd with key-range pruning off
    ("before") and on ("after"), alternating, each from the same table version (RESTORE between).
    `warm_up=False` skips the untimed first round (only where the timings do not matter: the smoke
    test)."""
    from replicator.delta.writer import TableWriter, delta_ref

    spec = _scale_spec()
    applier = TableWriter(spark)
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
        # the session's first MERGEs pay for class loading and JIT
        warm = warm_up and size == cfg.scale_sizes[0]
        for rep in range(-1 if warm else 0, cfg.scale_repeat):
            for mode in ("before", "after") if rep % 2 == 0 else ("after", "before"):
                applier.key_range_pruning = mode == "after"
                c0 = jvm_cpu()
                t0 = time.perf_counter()
                res = applier.merge(path, f"bench-{size}-{mode}-{rep}", spec, changes, 1, {"bench": mode})
                if rep >= 0:
                    times[mode].append(time.perf_counter() - t0)
                    cpu[mode].append(jvm_cpu() - c0)
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
