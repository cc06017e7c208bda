"""Bench section "schema": RENAME COLUMN on a large `compatible` table, rewrite vs metadata-only
(issue 33; `--schema-change`, `--rewrite-limit`, replicator/delta/schemachange.py).

One table of N rows (default 10,000,000; `--quick`: 200,000), loaded once. The DDL goes through
the replicator's own DDL applier: first `ALTER TABLE .. RENAME COLUMN name TO name2` with
`--schema-change rewrite` (one overwrite commit of the whole table), then `RENAME COLUMN name2 TO
name3` with `--schema-change metadata` (enable column mapping, then Delta's RENAME COLUMN), on the
same table: the rewrite first, since column mapping cannot be taken back. Seconds of each, the
table's live bytes, and the data files each commit added.

Run alone: `python -m bench.schema [--rows 10000000]` (prints markdown), or as a section of
`python -m bench` (`--sections schema`; `--schema-rows N`).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("bench")

ROWS_PER_FILE = 1_000_000
CREATE = ("CREATE TABLE big (id BIGINT PRIMARY KEY, grp INT, name VARCHAR(64), amount DECIMAL(12,2), "
          "payload VARCHAR(64))")


def _added_files(path: str, version: int) -> int:
    """Data files the commit at `version` added."""
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return sum(1 for line in text.split("\n") if line.startswith('{"add"'))


def bench_schema(spark: SparkSession, scratch: Path, rows: int) -> dict[str, Any]:
    from replicator.delta.ddl import DdlApplier
    from replicator.delta.rowcount import live_bytes
    from replicator.delta.writer import TableWriter
    from replicator.events import DdlEvent
    from replicator.warehouse import State, Warehouse

    wh = Warehouse(scratch / "schema-wh")
    delta = TableWriter(spark)
    ddl = DdlApplier(delta, wh)
    state = State()
    ddl.apply(state, DdlEvent(1000, "bench", "big", 3, CREATE))
    entry = state.live_table("bench", "big")
    assert entry is not None
    t0 = time.perf_counter()
    (spark.range(0, rows, 1, max(1, math.ceil(rows / ROWS_PER_FILE)))
     .selectExpr("id", "CAST(id % 97 AS INT) AS grp", "CONCAT('name-', CAST(id AS STRING)) AS name",
                 "CAST(id % 100000 / 100 AS DECIMAL(12,2)) AS amount",
                 "substr(sha2(CAST(id AS STRING), 256), 1, 40) AS payload")  # does not compress away
     .write.format("delta").mode("append").save(entry.path))
    load_s = time.perf_counter() - t0
    size = live_bytes(entry.path) or 0
    out: dict[str, Any] = {"rows": rows, "load_s": load_s, "live_bytes": size,
                           "files": len(list(Path(entry.path).glob("*.parquet")))}
    for i, (mode, old, new) in enumerate((("rewrite", "name", "name2"), ("metadata", "name2", "name3"))):
        delta.schema_change = mode  # type: ignore[assignment]
        before = delta.table_version(entry.path)
        t0 = time.perf_counter()
        query = f"ALTER TABLE big RENAME COLUMN {old} TO {new}"
        outcome = ddl.apply(state, DdlEvent(2000 + i, "bench", "big", 12, query))
        seconds = time.perf_counter() - t0
        after = delta.table_version(entry.path)
        out[mode] = {"seconds": seconds, "commits": after - before, "outcome": outcome.detail,
                     "files_added": sum(_added_files(entry.path, v) for v in range(before + 1, after + 1)),
                     "mib_per_s": size / 1024 ** 2 / seconds}
        log.info("schema: RENAME COLUMN on %d rows, %s: %.2f s (%s)", rows, mode, seconds, outcome.detail)
    assert spark.read.format("delta").load(entry.path).count() == rows
    shutil.rmtree(wh.root, ignore_errors=True)
    return out


def render_markdown(res: dict[str, Any]) -> str:
    """The section's part of bench/results.md."""
    mib = res["live_bytes"] / 1024 ** 2
    lines = [f"## Schema change at lake scale: RENAME COLUMN on {res['rows']:,} rows", "",
             f"One `compatible` table of {res['rows']:,} rows ({mib:,.0f} MiB of live data files, loaded in "
             f"{res['load_s']:.1f} s), renamed twice through the DDL applier in one run:", "",
             "| `--schema-change` | seconds | commits | data files added |",
             "| --- | ---: | ---: | ---: |"]
    for mode in ("rewrite", "metadata"):
        r = res[mode]
        lines.append(f"| {mode} | {r['seconds']:.2f} s | {r['commits']} | {r['files_added']} |")
    lines += ["", f"The rewrite copies {res['rewrite']['mib_per_s']:.1f} MiB of table per second."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.schema", description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=10_000_000, help="rows of the table (default 10,000,000)")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from replicator.runtime.spark import get_spark

    spark = get_spark("replicator-bench-schema")
    scratch = Path(tempfile.mkdtemp(prefix="replicator-bench-schema-"))
    try:
        res = bench_schema(spark, scratch, a.rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(res, indent=1), file=sys.stderr)
    print(render_markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
