"""The bench's sections: the one place where they are registered and run.

A section has up to two phases, each a function of the run's `Context` that stores its figures in
``ctx.results[section.name]``: ``before_spark`` runs while this process has no Spark session yet
(the end-to-end runs are subprocesses with JVMs of their own, which the bench's JVM must not
compete with), ``with_spark`` once the bench's own session is up. Within a phase, sections run in
the order of `SECTIONS`. The local broker starts right before the first section that needs it
(after the codec timings, which an idle broker JVM would not disturb but its start-up would).

To add a section: write its module (``bench/<name>.py``), register a `Section` in `SECTIONS`
(its name becomes a ``--sections`` value), and add its block to `bench.report.render_markdown`
(and its targets, if any, to `bench.targets.targets`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.codecs import bench_codecs
from bench.common import BenchConfig, log, stream_key
from bench.e2e import bench_e2e, finish_e2e
from bench.follower import bench_follower, finish_follower
from bench.peer import bench_peer, finish_peer
from bench.profiling import profile_engine
from bench.reader import bench_reader, finish_reader
from bench.scale import bench_scale
from bench.tables import bench_tables, finish_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass
class Context:
    """What a section's phase gets: the configuration, the results so far, a scratch directory, the
    broker's bootstrap address ("" until a section needing it has started it), in the
    ``with_spark`` phase the bench's Spark session, ``shared``: what one section hands another
    (or its own later phase) that does not belong in the results (e.g. the simulator's expected
    tables of the end-to-end streams, ``expected`` / ``expected_insert_heavy``, which the peer is
    checked against), and ``stack``: closed at the end of the run, after every phase (also when one
    fails), for what a section holds across its phases (the objectstore section's S3 server)."""

    cfg: BenchConfig
    results: dict[str, Any]
    scratch: Path
    bootstrap: str = ""
    spark_session: SparkSession | None = None
    shared: dict[str, Any] = field(default_factory=dict)
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    @property
    def spark(self) -> SparkSession:
        if self.spark_session is None:
            raise RuntimeError("no Spark session yet: this is a with_spark phase's resource")
        return self.spark_session


Phase = Callable[[Context], None]


@dataclass(frozen=True)
class Section:
    """A registered section: its ``--sections`` name, the title it is logged with, whether it needs
    the local broker, and its phases."""

    name: str
    title: str
    needs_broker: bool = False
    before_spark: Phase | None = None
    with_spark: Phase | None = None


def _codec(ctx: Context) -> None:
    ctx.results["codec"] = bench_codecs(ctx.cfg)


def _e2e(ctx: Context) -> None:
    for stream in ctx.cfg.streams:
        ctx.results[stream_key("e2e", stream)] = bench_e2e(ctx.cfg, ctx.bootstrap, ctx.scratch, stream=stream)


def _e2e_finish(ctx: Context) -> None:
    # The peer runs on the same streams: it is checked against the same expected tables.
    streams = [ctx.results[stream_key("e2e", stream)] for stream in ctx.cfg.streams]
    for stream, e2e in zip(ctx.cfg.streams, streams, strict=True):
        ctx.shared[stream_key("expected", stream)] = {p: r["stream"]["expected"] for p, r in e2e.items()}
    finish_e2e(ctx.spark, *streams, scratch=ctx.scratch, rounds=1 if ctx.cfg.quick else 2)


def _peer(ctx: Context) -> None:
    for stream in ctx.cfg.streams:
        ctx.results[stream_key("peer", stream)] = bench_peer(ctx.cfg, ctx.bootstrap,
                                                             ctx.results[stream_key("e2e", stream)], ctx.scratch)


def _peer_finish(ctx: Context) -> None:
    for stream in ctx.cfg.streams:
        finish_peer(ctx.spark, ctx.results[stream_key("peer", stream)],
                    ctx.shared.get(stream_key("expected", stream), {}))


def _tables(ctx: Context) -> None:
    ctx.results["tables"] = bench_tables(ctx.cfg, ctx.bootstrap, ctx.scratch)


def _tables_finish(ctx: Context) -> None:
    finish_tables(ctx.spark, ctx.results["tables"])


def _follower(ctx: Context) -> None:
    ctx.results["follower"] = bench_follower(ctx.cfg, ctx.bootstrap, ctx.scratch)


def _follower_finish(ctx: Context) -> None:
    finish_follower(ctx.spark, ctx.results["follower"])


def _reader(ctx: Context) -> None:
    ctx.results["reader"] = bench_reader(ctx.cfg, ctx.bootstrap, ctx.scratch)


def _reader_finish(ctx: Context) -> None:
    finish_reader(ctx.spark, ctx.results["reader"])


def _objectstore(ctx: Context) -> None:
    from bench.objectstore import bench_objectstore
    from replicator.sim.locals3 import LocalS3

    # Under the scratch dir, tied to this process (it dies with the bench), stopped at the end of the run:
    # the with_spark phase checks the s3a:// warehouses on it.
    server = LocalS3(ctx.scratch / "s3", detach=False)
    ctx.stack.callback(server.stop)
    server.start()
    log.info("objectstore: S3-compatible server at %s (ready in %.1f s)", server.endpoint, server.ready_seconds or 0.0)
    ctx.shared["objectstore_server"] = server
    ctx.results["objectstore"] = bench_objectstore(ctx.cfg, ctx.bootstrap, ctx.scratch, server)
    ctx.results["objectstore"]["server_ready_s"] = server.ready_seconds


def _objectstore_finish(ctx: Context) -> None:
    from bench.objectstore import finish_objectstore

    finish_objectstore(ctx.spark, ctx.results["objectstore"], ctx.shared["objectstore_server"])


def _manytables(ctx: Context) -> None:
    from bench.manytables import bench_manytables

    ctx.results["manytables"] = bench_manytables(ctx.cfg, ctx.bootstrap, ctx.scratch)


def _manytables_finish(ctx: Context) -> None:
    from bench.manytables import finish_manytables

    finish_manytables(ctx.spark, ctx.results["manytables"], ctx.scratch, ctx.cfg.manytables_floor_sample,
                      ctx.cfg.apply_parallelism)


def _skew(ctx: Context) -> None:
    from bench.skew import bench_skew

    ctx.results["skew"] = bench_skew(ctx.cfg, ctx.bootstrap, ctx.scratch)


def _skew_finish(ctx: Context) -> None:
    from bench.skew import finish_skew

    finish_skew(ctx.spark, ctx.results["skew"])


def _ramp(ctx: Context) -> None:
    from bench.ramp import bench_ramp

    ctx.results["ramp"] = bench_ramp(ctx.cfg, ctx.bootstrap, ctx.scratch)


def _follow(ctx: Context) -> None:
    from bench.follow import bench_follow

    server = None
    if ctx.cfg.follow_s3_steps > 0:
        from replicator.sim.locals3 import LocalS3

        # As the objectstore section's: under the scratch dir, stopped at the end of the run.
        server = LocalS3(ctx.scratch / "s3-follow", detach=False)
        ctx.stack.callback(server.stop)
        server.start()
        log.info("follow: S3-compatible server at %s", server.endpoint)
    ctx.shared["follow_server"] = server
    ctx.results["follow"] = bench_follow(ctx.cfg, ctx.bootstrap, ctx.scratch, server)


def _follow_finish(ctx: Context) -> None:
    from bench.follow import finish_follow

    finish_follow(ctx.spark, ctx.results["follow"], ctx.shared.get("follow_server"), ctx.cfg.follow_read_repeat)


def _longlog(ctx: Context) -> None:
    from bench.longlog import bench_longlog

    ctx.results["longlog"] = bench_longlog(ctx.cfg, ctx.scratch)


def _scale(ctx: Context) -> None:
    ctx.results["scale"] = bench_scale(ctx.spark, ctx.cfg, ctx.scratch)


def _features(ctx: Context) -> None:
    from bench.features import bench_features

    cfg = ctx.cfg
    # Deletion vectors at scale: the two largest scale sizes (1M and 10M rows by default).
    ctx.results["features"] = bench_features(ctx.spark, ctx.scratch, repeat=3 if cfg.quick else 7,
                                             sizes=cfg.scale_sizes[:1] if cfg.quick else cfg.scale_sizes[-2:])


def _schema(ctx: Context) -> None:
    from bench.schema import bench_schema

    ctx.results["schema"] = bench_schema(ctx.spark, ctx.scratch, ctx.cfg.schema_rows)


def _profile(ctx: Context) -> None:
    ctx.results["profile"] = profile_engine(ctx.spark, ctx.cfg, ctx.bootstrap, ctx.scratch)


SECTIONS: tuple[Section, ...] = (
    Section("codec", "1: codecs", before_spark=_codec),
    # One run per stream (cfg.streams: standard, insert-heavy) and protocol.
    Section("e2e", "2: end to end", needs_broker=True, before_spark=_e2e, with_spark=_e2e_finish),
    # Needs e2e (its topics; `python -m bench` refuses --sections peer without e2e).
    Section("peer", "6: the peer (Spark Structured Streaming on the end-to-end topics)", needs_broker=True,
            before_spark=_peer, with_spark=_peer_finish),
    Section("tables", "7: many tables", needs_broker=True, before_spark=_tables, with_spark=_tables_finish),
    Section("follower", "8: follower lag", needs_broker=True, before_spark=_follower, with_spark=_follower_finish),
    Section("reader", "9: the Spark reader (read and decode on executors) vs the driver reader", needs_broker=True,
            before_spark=_reader, with_spark=_reader_finish),
    Section("objectstore", "10: object store (a local warehouse vs an s3a:// one on a local S3-compatible server)",
            needs_broker=True, before_spark=_objectstore, with_spark=_objectstore_finish),
    Section("manytables", "12: many tables, measured (CREATE + first write of N tables, Delta's floor, shards)",
            needs_broker=True, before_spark=_manytables, with_spark=_manytables_finish),
    Section("skew", "13: skew (catch-up with a bounded buffer, on even and on skewed partitions)", needs_broker=True,
            before_spark=_skew, with_spark=_skew_finish),
    Section("ramp", "14: follower ramp (rising input rates, the knee, a load drop)", needs_broker=True,
            before_spark=_ramp),
    Section("follow", "15: a long follow, compressed (files, step time, reads before and after OPTIMIZE, records)",
            needs_broker=True, before_spark=_follow, with_spark=_follow_finish),
    Section("longlog", "16: a long _delta_log (a small commit's time by the log's length, local)",
            before_spark=_longlog),
    Section("scale", "3: scale", with_spark=_scale),
    Section("features", "3b: table features (MERGE vs append per profile, deletion vectors at scale)",
            with_spark=_features),
    Section("schema", "11: schema change at lake scale (RENAME COLUMN: rewrite vs metadata-only)", with_spark=_schema),
    Section("profile", "5: profile", needs_broker=True, with_spark=_profile),
)
"""Every section, in run order (section 4, resources, reports figures of the end-to-end runs). The
sections whose runs are subprocesses (e2e, peer, tables, follower, reader, objectstore, manytables, skew,
ramp, follow, longlog) come first: their ``before_spark`` phases run while the bench's own JVM is not up to
compete with them."""


def section_names() -> tuple[str, ...]:
    """The valid ``--sections`` values."""
    return tuple(s.name for s in SECTIONS)


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


def run_sections(cfg: BenchConfig, results: dict[str, Any]) -> None:
    """Run the sections selected in ``cfg.sections`` into ``results``; the broker and the Spark
    session are started only if a selected section needs them, and always stopped."""
    selected = [s for s in SECTIONS if s.name in cfg.sections]
    with _scratch(cfg.keep) as scratch, contextlib.ExitStack() as stack:
        ctx = Context(cfg, results, scratch, stack=stack)

        def ensure_broker() -> None:
            if not ctx.bootstrap:
                from replicator.sim.localkafka import running_broker

                ctx.bootstrap = stack.enter_context(running_broker(scratch / "kafka"))

        started: set[str] = set()
        for section in selected:
            if section.before_spark is not None:
                if section.needs_broker:
                    ensure_broker()
                log.info("section %s", section.title)
                started.add(section.name)
                section.before_spark(ctx)
        late = [s for s in selected if s.with_spark is not None]
        if not late:
            return
        if any(s.needs_broker for s in selected):
            ensure_broker()
        from replicator.runtime.spark import get_spark, stop_spark

        t0 = time.perf_counter()
        spark = get_spark("replicator-bench")
        spark.range(1).collect()
        results["spark_start_s"] = time.perf_counter() - t0
        stack.callback(stop_spark)
        ctx.spark_session = spark
        for section in late:
            if section.name not in started:
                log.info("section %s", section.title)
            assert section.with_spark is not None
            section.with_spark(ctx)
