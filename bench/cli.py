"""``python -m bench`` (what ``make bench`` runs): parse the arguments, run the sections, write
the report."""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common import (
    DEFAULT_BUFFER_ROWS,
    INSERT_ONLY_TABLES,
    STREAMS,
    UNBOUNDED_BUFFER_ROWS,
    BenchConfig,
    machine_info,
)
from bench.report import jsonable, write_outputs
from bench.sections import run_sections, section_names
from replicator.codec import PROTOCOLS
from replicator.delta.features import PROFILES


def run(cfg: BenchConfig, argv: Sequence[str]) -> dict[str, Any]:
    """Every selected section in one invocation (see `bench.sections`); returns the raw results."""
    started = time.perf_counter()
    results: dict[str, Any] = {"machine": machine_info(), "argv": list(argv),
                               "config": jsonable(asdict(cfg)), "notes": []}
    run_sections(cfg, results)
    results["load_end"] = [round(x, 2) for x in os.getloadavg()]
    results["elapsed_s"] = time.perf_counter() - started
    return results


def parse_args(argv: Sequence[str]) -> BenchConfig:
    """The command line -> a `BenchConfig` (``--quick`` scales every section down)."""
    import bench

    p = argparse.ArgumentParser(prog="python -m bench", description=bench.__doc__.split("\n\n")[0] if bench.__doc__
                                else None)
    p.add_argument("--events", type=int, default=None, help="row changes for the end-to-end run (default 1,000,000; "
                   "20,000 with --quick)")
    p.add_argument("--quick", action="store_true", help="short smoke run: fewer rounds, smaller workloads and tables")
    p.add_argument("--out", type=Path, default=Path("bench"), help="output directory (default bench/)")
    p.add_argument("--protocols", default=None,
                   help=f"end-to-end protocols (default {','.join(PROTOCOLS)}; the objectstore section: craft "
                   "unless given)")
    p.add_argument("--streams", default=",".join(STREAMS),
                   help=f"end-to-end streams, each replicated and run by the peer on every protocol (default "
                   f"{','.join(STREAMS)}: every table mixed; {INSERT_ONLY_TABLES} insert-only tables and one mixed)")
    p.add_argument("--sections", default=",".join(section_names()), help="which sections (default all)")
    p.add_argument("--scale-sizes", help="table sizes for the MERGE scale section (default 100000,1000000,10000000; "
                   "--quick: 100000,300000,1000000)")
    p.add_argument("--schema-rows", type=int, default=None,
                   help="rows of the schema section's table (default 10,000,000; --quick: 200,000)")
    p.add_argument("--scale-repeat", type=int, default=None, help="MERGE rounds per size and mode (default 3)")
    p.add_argument("--profile-events", type=int, default=None, help="row changes for the profiled run (default 20,000)")
    p.add_argument("--max-buffer-rows", type=int, default=200_000, help="passed to replicator run (default 200,000)")
    p.add_argument("--apply-parallelism", type=int, default=None,
                   help="passed to every replicator run (e2e, tables, follower) when given; needs a build whose "
                   "`replicator run` has it (default: not passed)")
    p.add_argument("--peer-max-offsets", type=int, default=None,
                   help="the peer's maxOffsetsPerTrigger (default: about --max-buffer-rows row changes)")
    p.add_argument("--tables-counts", default=None,
                   help="few,many tables of the many-tables section (default 10,200; --quick: 10,40)")
    p.add_argument("--tables-events", type=int, default=None,
                   help="row changes of each many-tables run (default 100,000; --quick: 10,000)")
    p.add_argument("--follower-seconds", type=float, default=None,
                   help="length of the follower's steady input (default 180; --quick: 25)")
    p.add_argument("--follower-rate", type=int, default=500, help="row changes/s of the follower's input (default 500)")
    p.add_argument("--follower-tables", type=int, default=10, help="tables of the follower's input (default 10)")
    p.add_argument("--table-features", choices=PROFILES, default=None,
                   help="profile of the replicator's tables in the end-to-end runs (sets REPLICATOR_TABLE_FEATURES)")
    p.add_argument("--reader-sizes", default=None,
                   help="row changes per topic of the reader section (default 250000,1000000; --quick 20000,60000)")
    p.add_argument("--objectstore-events", type=int, default=None,
                   help="row changes of the objectstore section's stream (default: --events)")
    p.add_argument("--objectstore-pairs", type=int, default=None,
                   help="local / s3a:// run pairs of the objectstore section, alternating (default 2; --quick: 1)")
    p.add_argument("--manytables-count", type=int, default=None,
                   help="tables of the manytables section's stream (default 1,000; --quick: 100)")
    p.add_argument("--manytables-rows", type=int, default=5,
                   help="inserts per table, on average, of the manytables stream (default 5)")
    p.add_argument("--manytables-floor-sample", type=int, default=None,
                   help="tables of the manytables section timed for Delta's floor (default 100, at most the count)")
    p.add_argument("--skew-events", type=int, default=None,
                   help="row changes of each of the skew section's streams (default 8,000; --quick: 3,000)")
    p.add_argument("--skew-buffers", default="600,4000,20000,default,unbounded",
                   help="--max-buffer-rows of the skew section's runs; 'default' is the engine's "
                   f"({DEFAULT_BUFFER_ROWS:,}), 'unbounded' {UNBOUNDED_BUFFER_ROWS:,} (default %(default)s)")
    p.add_argument("--skew-hot-share", type=float, default=0.8,
                   help="share of the skewed stream's row changes in its hot table (default 0.8)")
    p.add_argument("--ramp-rates", default=None,
                   help="row changes/s of the ramp section, in order (default 500,2000,5000,10000; --quick: 500,2000)")
    p.add_argument("--ramp-tables", default=None, help="table counts of the ramp section (default 10,100; --quick: 10)")
    p.add_argument("--ramp-seconds", type=float, default=None, help="seconds per ramp rate (default 60; --quick: 20)")
    p.add_argument("--ramp-table-seconds", type=float, default=2.0,
                   help="each ramp rate and the drop last at least this x the table count (default 2.0: "
                   "200 s at 100 tables, a few steps of a follower that MERGEs every table)")
    p.add_argument("--ramp-drop-rate", type=int, default=500,
                   help="row changes/s of the load drop after the ramp's highest rate (default 500)")
    p.add_argument("--follow-steps", type=int, default=None,
                   help="small steps of the follow section into a local warehouse (default 300; --quick: 120)")
    p.add_argument("--follow-s3-steps", type=int, default=None,
                   help="small steps of the follow section into an s3a:// warehouse (default 80; --quick: 40; "
                   "0: none)")
    p.add_argument("--follow-rows-per-step", type=int, default=40,
                   help="--max-buffer-rows of the follow section's runs: rows per step (default 40)")
    p.add_argument("--follow-tables", type=int, default=2,
                   help="tables of the follow section's stream, half insert-only (default 2)")
    p.add_argument("--follow-window", type=int, default=100,
                   help="first and last steps the follow section compares (default 100)")
    p.add_argument("--no-follow-baseline", dest="follow_baseline", action="store_false",
                   help="skip the follow section's local run without compaction (a long follow: half the hours)")
    p.add_argument("--ramp-drop-seconds", type=float, default=None,
                   help="seconds of the load drop (default 45; --quick: 15)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the scratch directory (broker log, warehouses)")
    a = p.parse_args(list(argv))
    cfg = BenchConfig(out=a.out, quick=a.quick, max_buffer_rows=a.max_buffer_rows, seed=a.seed, keep=a.keep,
                      apply_parallelism=a.apply_parallelism, peer_max_offsets=a.peer_max_offsets,
                      follower_rate=a.follower_rate, follower_tables=a.follower_tables)
    cfg.events = a.events if a.events is not None else (20_000 if a.quick else 1_000_000)
    cfg.protocols = tuple(x.strip() for x in (a.protocols or ",".join(PROTOCOLS)).split(",") if x.strip())
    # The object store's runs: Craft (the high-throughput protocol) unless --protocols names others.
    cfg.objectstore_protocols = cfg.protocols if a.protocols else ("craft",)
    cfg.objectstore_events = a.objectstore_events
    cfg.objectstore_pairs = a.objectstore_pairs if a.objectstore_pairs is not None else (1 if a.quick else 2)
    cfg.sections = tuple(x.strip() for x in a.sections.split(",") if x.strip())
    cfg.streams = tuple(dict.fromkeys(x.strip() for x in a.streams.split(",") if x.strip()))
    if a.table_features:
        os.environ["REPLICATOR_TABLE_FEATURES"] = a.table_features
    unknown = set(cfg.sections) - set(section_names()) | set(cfg.protocols) - set(PROTOCOLS) | set(cfg.streams) - set(
        STREAMS)
    if unknown:
        p.error(f"unknown section, protocol or stream: {', '.join(sorted(unknown))}")
    if not cfg.streams:
        p.error(f"--streams takes one or more of {', '.join(STREAMS)}")
    if cfg.objectstore_pairs < 1 or (cfg.objectstore_events is not None and cfg.objectstore_events < 1):
        p.error("--objectstore-pairs and --objectstore-events must be >= 1")
    if "peer" in cfg.sections and "e2e" not in cfg.sections:
        p.error("--sections peer needs e2e too: the peer runs on the end-to-end topics, next to the replicator")
    if a.apply_parallelism is not None and not _run_has_flag("--apply-parallelism"):
        p.error("--apply-parallelism: this build's `replicator run` has no such flag")
    if a.tables_counts:
        counts = tuple(int(x) for x in a.tables_counts.split(","))
        if len(counts) != 2 or min(counts) < 1:
            p.error("--tables-counts takes two table counts, e.g. 10,200")
        cfg.tables_counts = (counts[0], counts[1])
    elif a.quick:
        cfg.tables_counts = (10, 40)
    cfg.tables_events = a.tables_events or (10_000 if a.quick else 100_000)
    cfg.manytables_count = a.manytables_count or (100 if a.quick else 1000)
    cfg.manytables_rows = a.manytables_rows
    cfg.manytables_floor_sample = min(a.manytables_floor_sample or 100, cfg.manytables_count)
    if min(cfg.manytables_count, cfg.manytables_rows, cfg.manytables_floor_sample) < 1:
        p.error("--manytables-count, --manytables-rows and --manytables-floor-sample must be >= 1")
    cfg.follower_seconds = a.follower_seconds or (25.0 if a.quick else 180.0)
    # Skew and ramp: Open Protocol and canal-json (what most TiCDC users run) unless --protocols names others.
    cfg.skew_protocols = cfg.ramp_protocols = cfg.protocols if a.protocols else ("open", "canal-json")
    cfg.skew_events = a.skew_events or (3_000 if a.quick else 8_000)
    try:
        cfg.skew_buffers = tuple(_buffer_rows(x) for x in a.skew_buffers.split(",") if x.strip())
        cfg.ramp_rates = tuple(int(x) for x in (a.ramp_rates or ("500,2000" if a.quick else "500,2000,5000,10000"))
                               .split(","))
        cfg.ramp_tables = tuple(int(x) for x in (a.ramp_tables or ("10" if a.quick else "10,100")).split(","))
    except ValueError as exc:
        p.error(f"--skew-buffers, --ramp-rates, --ramp-tables: {exc}")
    cfg.skew_hot_share = a.skew_hot_share
    cfg.ramp_seconds = a.ramp_seconds or (20.0 if a.quick else 60.0)
    cfg.ramp_drop_rate = a.ramp_drop_rate
    cfg.ramp_table_seconds = a.ramp_table_seconds
    cfg.ramp_drop_seconds = a.ramp_drop_seconds or (15.0 if a.quick else 45.0)
    if (min(cfg.skew_buffers, default=0) < 1 or cfg.skew_events < 1 or not 0 <= cfg.skew_hot_share < 1
            or min(cfg.ramp_rates, default=0) < 1 or min(cfg.ramp_tables, default=0) < 1 or cfg.ramp_drop_rate < 1):
        p.error("--skew-buffers, --skew-events, --ramp-rates, --ramp-tables and --ramp-drop-rate take counts >= 1, "
                "--skew-hot-share a share in [0, 1)")
    cfg.follow_steps = a.follow_steps or (120 if a.quick else 300)
    cfg.follow_s3_steps = a.follow_s3_steps if a.follow_s3_steps is not None else (40 if a.quick else 80)
    cfg.follow_rows_per_step, cfg.follow_tables, cfg.follow_window = (a.follow_rows_per_step, a.follow_tables,
                                                                      a.follow_window)
    cfg.follow_read_repeat = 1 if a.quick else 5
    cfg.follow_baseline = a.follow_baseline
    if (min(cfg.follow_steps, cfg.follow_rows_per_step, cfg.follow_tables, cfg.follow_window) < 1
            or cfg.follow_s3_steps < 0):
        p.error("--follow-steps, --follow-rows-per-step, --follow-tables and --follow-window must be >= 1, "
                "--follow-s3-steps >= 0")
    if a.reader_sizes:
        cfg.reader_sizes = tuple(int(x) for x in a.reader_sizes.split(","))
    elif a.quick:
        cfg.reader_sizes = (20_000, 60_000)
    if a.scale_sizes:
        cfg.scale_sizes = tuple(int(x) for x in a.scale_sizes.split(","))
    elif a.quick:
        cfg.scale_sizes = (100_000, 300_000, 1_000_000)
    if any(s < cfg.scale_changes for s in cfg.scale_sizes):
        p.error(f"--scale-sizes must each be >= {cfg.scale_changes} (the change set)")
    cfg.scale_repeat = a.scale_repeat or (1 if a.quick else 3)
    cfg.schema_rows = a.schema_rows or (200_000 if a.quick else 10_000_000)
    cfg.workload_events = 10_000 if a.quick else 50_000
    cfg.profile_events = a.profile_events or min(cfg.events, 20_000)
    return cfg


def _buffer_rows(text: str) -> int:
    """A --skew-buffers entry: a row count, 'default' (the engine's) or 'unbounded'."""
    text = text.strip().lower().replace("_", "")
    if text == "default":
        return DEFAULT_BUFFER_ROWS
    if text == "unbounded":
        return UNBOUNDED_BUFFER_ROWS
    return int(text)


def _run_has_flag(flag: str) -> bool:
    """Whether this checkout's `replicator run --help` lists `flag`."""
    from bench.procs import checkout_env

    out = subprocess.run([sys.executable, "-m", "replicator", "run", "--help"], capture_output=True, text=True,
                         timeout=120, env=checkout_env())
    return flag in out.stdout


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench [options]``: run, write ``results.{json,md,png}``, print the markdown."""
    args = list(sys.argv[1:] if argv is None else argv)
    cfg = parse_args(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s bench %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("kafka").setLevel(logging.ERROR)
    logging.getLogger("botocore").setLevel(logging.WARNING)  # the objectstore section's S3 client
    results = run(cfg, args)
    write_outputs(results, cfg)
    sys.stdout.write((cfg.out / "results.md").read_text())
    return 0
