"""Section "tables": many tables. The same number of row changes (100,000 by default) simulated
over few tables (10) and over many (200), each replicated by ``replicator run --until-caught-up``
as a subprocess into a warehouse of its own: row changes/s and time per step, side by side.

A step MERGEs every table that has changes in it, and a MERGE has a cost of its own whatever its
size, so spreading the same changes over 20x the tables multiplies the MERGEs; the target is that
200 tables still replicate at half the 10-table rate or better. A table's CREATE TABLE holds back
only that table's rows, so a catch-up run puts the CREATE TABLEs and the first rows of every table
in one step (the tables are created concurrently, then inserted into); steps of DDLs alone, if any,
are reported apart from the window steps.

Time per step comes from the step log (``_replicator/windows.jsonl``): a step's time is from its
``recorded_at`` (taken as the step starts) to the next step's, the last one's to the state's
``updated_at`` (saved after it), so it includes the reading between steps.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import BenchConfig, log, run_args
from bench.e2e import Runner, ddl_count, merged, produce_stream, run_replicator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def step_times(warehouse: Path) -> dict[str, Any]:
    """DDL and window steps of a run, with their durations from the step log (see module doc)."""
    from replicator.warehouse import Warehouse

    wh = Warehouse(str(warehouse))
    records = wh.windows()
    state = wh.load_state()
    if not records:
        return {"ddl": 0, "windows": 0}
    stamps = [dt.datetime.fromisoformat(r["recorded_at"]) for r in records]
    end = dt.datetime.fromisoformat(state.updated_at) if state.updated_at else stamps[-1]
    durations = [(b - a).total_seconds() for a, b in zip(stamps, [*stamps[1:], end], strict=True)]
    ddl = [d for r, d in zip(records, durations, strict=True) if not merged(r)]  # steps of DDLs only
    windows = [(r, d) for r, d in zip(records, durations, strict=True) if merged(r)]
    merges = [len(merged(r)) for r, _ in windows]
    window_s = [d for _, d in windows]
    return {
        "ddl": sum(ddl_count(r) for r in records), "ddl_s": sum(ddl),
        "windows": len(windows), "window_s": sum(window_s),
        "window_median_s": statistics.median(window_s) if window_s else 0.0,
        "window_max_s": max(window_s, default=0.0),
        "merges": sum(merges), "merges_per_window": statistics.median(merges) if merges else 0,
        "s_per_merge": sum(window_s) / sum(merges) if sum(merges) else 0.0,
    }


def bench_tables(cfg: BenchConfig, bootstrap: str, scratch: Path, runner: Runner | None = None) -> dict[str, Any]:
    """Section "tables" (Spark-free part): per table count, produce the stream and replicate it.
    `runner` is `run_replicator` (a subprocess) unless given (the smoke test runs in-process)."""
    run = runner or functools.partial(run_replicator, extra=run_args(cfg))
    protocol = cfg.protocols[0]
    out: dict[str, Any] = {"events": cfg.tables_events, "protocol": protocol, "partitions": cfg.partitions,
                           "runs": {}}
    for i, n in enumerate(cfg.tables_counts):
        log.info("tables: %d row changes over %d tables (%s)", cfg.tables_events, n, protocol)
        stream = produce_stream(dataclasses.replace(cfg, tables=n), bootstrap, protocol, cfg.tables_events,
                                cfg.seed + 100 + i)
        warehouse = scratch / f"wh-tables-{n}"
        res = run(bootstrap, stream["topic"], protocol, warehouse, cfg.max_buffer_rows, scratch)
        # Original row changes, not row events read: replays come on top, and more of them with more tables.
        rate = int(stream["stats"]["row_changes"]) / res["wall_s"]
        steps = step_times(warehouse)
        log.info("tables %d: %.1f s wall, %.0f row changes/s, %d DDL + %d window steps", n, res["wall_s"], rate,
                 steps["ddl"], steps["windows"])
        out["runs"][str(n)] = {"tables": n, "stream": stream, "run": res, "warehouse": str(warehouse),
                               "steps": steps, "rows_per_s": rate}
    few, many = (out["runs"][str(n)] for n in cfg.tables_counts)
    out["ratio"] = many["rows_per_s"] / few["rows_per_s"] if few["rows_per_s"] else 0.0
    return out


def finish_tables(spark: SparkSession, tables: dict[str, Any]) -> None:
    """Section "tables" (Spark part): check each warehouse against the simulator's expected tables."""
    from replicator.sim.simcheck import check_warehouse

    for n, res in tables["runs"].items():
        diffs = check_warehouse(spark, res["warehouse"], res["stream"].pop("expected"))
        res["verified"] = not diffs
        res["diffs"] = diffs[:5]
        log.info("tables %s: verified=%s", n, res["verified"])
