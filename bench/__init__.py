"""`make bench`: codec speed, end-to-end throughput next to its baselines, MERGE scaling with table
size, and resource use, all measured in ONE run on one machine.

Why: performance is a product feature (Craft exists for high-throughput clusters), and a figure
is only comparable to another taken on the same machine under the same load. So every section
runs in the same invocation, baselines next to what they are a baseline for, and the report
records the machine, the versions and the load average. Nothing is asserted: the targets
(end-to-end rows/s at least half a plain Delta append's and 1.5x the Structured Streaming peer's;
Craft decoding faster than Open Protocol, its case-0 decode under 15 µs; a MERGE into a 10x larger
table at most 2x slower; 200 tables at least half the 10-table rate; follower lag p99 at most 10 s
and not growing; an s3a:// warehouse at least 0.6x a local one's rate; CREATE + first write of 1,000
tables at most 1.25x Delta's own floor per table; a catch-up with a 600-row buffer at least 0.5x the
default buffer's rate and with 4,000 rows 0.8x, on even and skewed partitions; below a follower's
knee, p99 lag at most 2.5x its flush interval plus median step; over a long follow, the last steps
at most 1.1x the first and a full read at most 1.2x the table's after OPTIMIZE; driver RSS at most
2 GiB for the 1M-event run)
are reported as met or not in ``bench/results.md`` (plus ``bench/results.png``; the raw figures go
to ``bench/results.json``, which git ignores).

Sections:
1. codecs: the reference's "case 0" message (ns per decode/encode, best of N, single core) next
   to the seed's Go figures; events/s and MB/s over a simulated multi-table workload, the same
   events in both protocols; message sizes raw and zlib-compressed.
2. end to end: a simulated stream produced into a local broker started here (own temp dir, free
   ports), ``replicator run --until-caught-up`` as a subprocess (so its RSS and its JVM's can be
   sampled), checked against the simulator's expected tables; baselines in the same run: a plain
   Delta append of the same final rows, and consume-only / consume+decode throughput. Two streams
   (``--streams``): the standard one and an insert-heavy one (four insert-only tables, one mixed),
   side by side with their append and peer ratios, and the Spark jobs per Delta commit by kind
   (append, MERGE, DDL) from the run summaries.
3. scale: one MERGE of a fixed 10,000-change set into tables of 100k, 1M and 10M rows, with and
   without the key-range file pruning of ``replicator/delta/writer.py``.
4. resources: peak RSS of the driver and its JVM; data files per table after the run.
5. profile: cProfile of the engine in-process on a smaller stream, costs grouped by stage.
6. peer: what a Spark user would write instead (Structured Streaming, Spark's Kafka source,
   AvailableNow, foreachBatch MERGE per table) on the end-to-end topics, timed and checked alike.
7. many tables: the same row changes over 10 and over 200 tables; row changes/s, time per step.
8. follower lag: ``replicator run`` following a steady live input (500 row changes/s, a resolved
   event per partition every second); lag from commit ts to the MERGE's commit, p50/p99/max, flat
   or growing; stopped with SIGTERM.
9. the Spark reader: ``--reader spark`` next to ``--reader driver`` on the same topics.
10. object store: the same stream into a local warehouse and into an ``s3a://`` warehouse on a
   local S3-compatible server the section starts (S3Proxy), alternating; row changes/s, s3 ÷
   local, and each run's steps split into state writes, lease renewals and Delta's side.
12. many tables, measured: a stream creating 1,000 tables with a few inserts each, replicated by
   one process and by two shards side by side (``--shard 0/2``, ``--shard 1/2``); seconds per table,
   jobs per commit by kind, Delta's floor (a bare CREATE TABLE + one INSERT per table, in the bench's
   session) and the ratio to it, and a projection of tables per step within a 10 s lag budget for
   1 to 16 shards.
13. skew: catch-ups of an even and a skewed insert-heavy stream (a hot table dispatched by table onto
   one partition) at --max-buffer-rows 600, 4,000, 20,000, the default and unbounded, Open Protocol
   and canal-json; rate (wall, and once the JVM is up), steps, rows per step, driver RSS, the ratio
   to the unbounded run.
14. follower ramp: one follower per protocol and table count (10, 100) fed 500, 2,000, 5,000 and
   10,000 row changes/s in turn, then a load drop; lag per rate, step time, the knee.
15. follow: a long follow compressed into minutes: 300 small steps (80 on ``s3a://``) into
   insert-only and mixed tables; per table live and on-disk data files, change-data files, the
   log's files and checkpoint, full reads (Spark, deltalake) before and after a manual OPTIMIZE;
   first vs last step time; the step log's and state.json's size.

Modules: ``common`` (configuration, machine, timers), ``procs`` (RSS and CPU from /proc, the
subprocesses' environment), one per section (``codecs``, ``e2e``, ``scale``, ``features``,
``profiling``, ``peer``, ``tables``, ``follower``, ``reader``, ``objectstore``, ``manytables``, ``skew``,
``ramp``, ``follow``), ``sections`` (the
registry: where sections are registered and run), ``report`` (markdown, JSON; the chart is
``chart``, the targets ``targets``, the end-to-end streams and jobs-per-commit blocks ``streams``),
``cli`` (``python -m bench``).

Run: ``make bench`` (``BENCH_ARGS="--events 100000"``) or ``python -m bench --help``.
"""

from bench.chart import render_chart
from bench.cli import main, parse_args, run
from bench.codecs import bench_codecs, bench_crc, case0_row, workload_events
from bench.common import BenchConfig, best_of, machine_info, run_args, time_ns
from bench.e2e import (
    Runner,
    append_baseline,
    bench_e2e,
    consume_rate,
    finish_e2e,
    produce_stream,
    run_replicator,
    step_counts,
    warehouse_files,
)
from bench.manytables import bench_manytables, finish_manytables
from bench.objectstore import bench_objectstore, finish_objectstore, object_store_access
from bench.procs import RssSampler
from bench.profiling import profile_engine
from bench.report import render_markdown, write_outputs
from bench.scale import bench_scale, scale_changes
from bench.sections import SECTIONS, Context, Section, run_sections
from bench.targets import targets

__all__ = [
    "SECTIONS",
    "BenchConfig",
    "Context",
    "RssSampler",
    "Runner",
    "Section",
    "append_baseline",
    "bench_codecs",
    "bench_crc",
    "bench_e2e",
    "bench_manytables",
    "bench_objectstore",
    "bench_scale",
    "best_of",
    "case0_row",
    "consume_rate",
    "finish_e2e",
    "finish_manytables",
    "finish_objectstore",
    "machine_info",
    "main",
    "object_store_access",
    "parse_args",
    "produce_stream",
    "profile_engine",
    "render_chart",
    "render_markdown",
    "run",
    "run_args",
    "run_replicator",
    "run_sections",
    "scale_changes",
    "step_counts",
    "targets",
    "time_ns",
    "warehouse_files",
    "workload_events",
    "write_outputs",
]
