"""The one place that wires the stages: source -> decode -> window -> apply (MERGE / DDL) -> Delta.

A step (a batch of complete windows up to a watermark, or one DDL) is applied, then progress is
committed: state.json (applied watermark, restart cursors, DDL ledger, catalog) and, best effort,
the Kafka consumer-group offsets. When what is due is decided by `ControlLoop` (loop.py); this
module wires it to the real source, the Delta applier (`WarehouseApplier`) and the warehouse.
See delta/warehouse.py and delta/merge.py for why that is exactly once.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from replicator.changes import collapse
from replicator.codec import codec_for
from replicator.codec.state import CodecState
from replicator.codec.values import DecodeOptions, InvalidText
from replicator.delta.features import DEFAULT_PROFILE, Profile
from replicator.delta.schemachange import DEFAULT_REWRITE_LIMIT, DEFAULT_SCHEMA_CHANGE, SchemaChange
from replicator.delta.typemap import spec_from_row
from replicator.delta.warehouse import State, TableEntry, Warehouse, table_uid
from replicator.engine.filtering import EventFilter, FilterCounts
from replicator.engine.loop import ControlLoop, LoopOptions
from replicator.engine.plan import RowSpan, Segment, StepPlan, plan_step
from replicator.engine.schedule import DEFAULT_APPLY_PARALLELISM, InlineExecutor, run_plan
from replicator.engine.window import Step, Windower
from replicator.errors import ConfigError, DdlError, ReplicatorError, SchemaError
from replicator.events import DdlEvent, Event, Position, Record, RowChange, tso_physical_ms, tso_to_datetime
from replicator.faults import fault_point, fault_timer
from replicator.filters import TableFilter
from replicator.logformat import json_logs, position
from replicator.metrics import DEFAULT_MAX_TABLES, Metrics
from replicator.progress import TP, Progress
from replicator.sources.claimcheck import ClaimChecks
from replicator.sources.executor import check_row
from replicator.sources.kafka import Source
from replicator.storage.lease import DEFAULT_LEASE_SECONDS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.delta.catalog import CatalogConfig, CatalogSync
    from replicator.delta.ddl import DdlApplier
    from replicator.delta.merge import DeltaApplier, MergeResult
    from replicator.delta.typemap import TableSpec
    from replicator.sources.spark_reader import SparkBatch

log = logging.getLogger("replicator")
Protocol = Literal["open", "craft", "canal-json", "simple"]
Reader = Literal["driver", "spark"]


@dataclass
class RunOptions:
    warehouse: str
    protocol: Protocol
    until_caught_up: bool = False
    on_error: Literal["stop", "skip"] = "stop"
    on_ddl_error: Literal["stop", "skip"] = "stop"
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    start: Mapping[TP, int] | Literal["earliest"] | None = None  # None: stored state (or earliest)
    max_buffer_rows: int = 200_000
    flush_interval_s: float = 2.0
    wait_for_lock: bool = False
    progress: bool | None = None  # None: a live display when stderr is a terminal
    table_features: Profile = DEFAULT_PROFILE  # what new tables get (replicator/delta/features.py)
    apply_parallelism: int = DEFAULT_APPLY_PARALLELISM  # MERGEs of one step run at once (engine/schedule.py)
    reader: Reader = "driver"  # where records are read and decoded (engine/batch.py for "spark")
    lease_seconds: float = DEFAULT_LEASE_SECONDS  # the writer lease's term (storage/lease.py)
    # RENAME / DROP COLUMN and type changes: rewrite or metadata-only, by size (delta/schemachange.py)
    schema_change: SchemaChange = DEFAULT_SCHEMA_CHANGE
    rewrite_limit: int = DEFAULT_REWRITE_LIMIT
    metrics_port: int | None = None  # serve Prometheus metrics here while running (replicator/metrics.py)
    metrics_host: str = "127.0.0.1"
    metrics_textfile: str | None = None  # write them here at exit (node_exporter's textfile collector)
    metrics_max_tables: int = DEFAULT_MAX_TABLES  # tables labelled individually, the rest as `_other`
    table_filter: TableFilter = field(default_factory=TableFilter)  # --include / --exclude (filters.py)
    # where TiCDC's claim-check files are (large messages; sources/claimcheck.py); the compression
    # of message values is `decode.compression`
    claim_check_storage: str | None = None
    # register the tables by name in this metastore (delta/catalog.py); None: the one the warehouse
    # records, if any
    catalog: CatalogConfig | None = None


@dataclass
class TableCounts:
    """Per table: changes applied (one per key and step: upserts, deletes) and what they did to
    the Delta table (inserted, updated, deleted rows, as Delta's MERGE reports them)."""

    upserts: int = 0
    deletes: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0


@dataclass
class RunSummary:
    source: str = ""
    records: int = 0
    events: int = 0
    rows: int = 0
    replays_dropped: int = 0
    already_applied: int = 0
    ddl_applied: int = 0
    ddl_skipped: int = 0
    dead_letters: int = 0
    steps: int = 0
    watermark: int = 0
    elapsed_s: float = 0.0
    tables: dict[str, TableCounts] = field(default_factory=dict)
    error: str | None = None
    invalid_text: InvalidText = field(default_factory=InvalidText)  # text decoded with U+FFFD
    # Simple's schema cache; row checksums verified / mismatched (dead-lettered as ChecksumError)
    codec_state: CodecState = field(default_factory=CodecState)
    # the warehouse's own costs: state.json + step log writes, the writer lease's renewals
    state_write_s: float = 0.0
    lease_renewals: int = 0
    lease_renew_s: float = 0.0
    # tables whose reader requirements a metadata-only schema change changed, and why (DdlOutcome)
    reader_changes: list[dict[str, Any]] = field(default_factory=list)
    # events of tables outside --include / --exclude, skipped, by reason (engine/filtering.py)
    filtered: FilterCounts = field(default_factory=FilterCounts)

    @property
    def invalid_utf8(self) -> int:
        """Text values that were not UTF-8 and were replicated with U+FFFD (see codec.values)."""
        return self.invalid_text.total

    @property
    def checksums_verified(self) -> int:
        return self.codec_state.checksums_verified

    @property
    def checksum_mismatches(self) -> int:
        return self.codec_state.checksum_mismatches

    @property
    def lag_s(self) -> float | None:
        if not self.watermark:
            return None
        return max(0.0, time.time() - tso_physical_ms(self.watermark) / 1000)

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "records": self.records,
            "events": self.events,
            "rows": self.rows,
            "replays_dropped": self.replays_dropped,
            "already_applied": self.already_applied,
            "ddl_applied": self.ddl_applied,
            "ddl_skipped": self.ddl_skipped,
            "dead_letters": self.dead_letters,
            "steps": self.steps,
            "watermark_tso": self.watermark,
            "watermark_time": tso_to_datetime(self.watermark).isoformat() if self.watermark else None,
            "lag_s": self.lag_s,
            "elapsed_s": round(self.elapsed_s, 3),
            "tables": {k: {"upserts": v.upserts, "deletes": v.deletes, "inserted": v.inserted, "updated": v.updated,
                           "deleted": v.deleted} for k, v in sorted(self.tables.items())},
            "error": self.error,
            "invalid_utf8": self.invalid_utf8,
            "checksums_verified": self.checksums_verified,
            "checksum_mismatches": self.checksum_mismatches,
            "state_write_s": round(self.state_write_s, 3),
            "lease_renewals": self.lease_renewals,
            "lease_renew_s": round(self.lease_renew_s, 3),
            "reader_changes": list(self.reader_changes),
            "filtered": self.filtered.to_json(),
        }

    def render(self) -> str:
        wm = (f"{self.watermark} ({tso_to_datetime(self.watermark).isoformat()})" if self.watermark else "none yet")
        lines = [
            f"source            {self.source}",
            f"records read      {self.records}  (events {self.events}, rows {self.rows})",
            f"replays dropped   {self.replays_dropped}   already applied {self.already_applied}",
            f"DDL applied       {self.ddl_applied}   skipped {self.ddl_skipped}   dead letters {self.dead_letters}",
            f"watermark         {wm}",
            f"lag               {self.lag_s:.1f}s" if self.lag_s is not None else "lag               n/a",
            f"elapsed           {self.elapsed_s:.1f}s ({self.rows / max(self.elapsed_s, 1e-9):.0f} rows/s)",
        ]
        if self.checksums_verified or self.checksum_mismatches:
            lines.append(f"row checksums     {self.checksums_verified} verified, {self.checksum_mismatches} mismatched")
        if self.invalid_utf8:
            lines.append(f"invalid UTF-8     {self.invalid_utf8} text values replicated with U+FFFD")
        for name, c in sorted(self.tables.items()):
            lines.append(f"  {name}: {c.upserts} upserted, {c.deletes} deleted")
        for what, counts in (("rows", self.filtered.rows), ("DDLs", self.filtered.ddl)):
            if counts:
                lines.append(f"filtered {what:<8} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        for rc in self.reader_changes:
            lines.append(f"reader change     {rc['table']}: {rc['feature']} ({rc['why']}); "
                         f"readers now {', '.join(rc['readers']) or 'none'}")
        return "\n".join(lines)


class Engine:
    """Runs one replication (catch-up or follow) of one source into one warehouse.

    Wiring only: the warehouse lock and state, the source, the Delta applier and the display
    around `ControlLoop` (engine/loop.py), which holds the logic of when to apply what.
    """

    def __init__(self, source: Source, options: RunOptions, spark: SparkSession | None = None) -> None:
        self.source = source
        self.options = options
        self.warehouse = Warehouse(options.warehouse, lease_seconds=options.lease_seconds)
        self._codec = codec_for(options.protocol)
        self.summary = RunSummary(source=source.name, invalid_text=options.decode.invalid_text or InvalidText(),
                                  codec_state=options.decode.state or CodecState())
        self.metrics = Metrics(protocol=options.protocol, reader=options.reader, source=source.name,
                               max_tables=options.metrics_max_tables)
        # The decoders report text they decoded with U+FFFD to the summary's counter.
        # Simple's schema cache (restored from state.json at start) and the checksum counts of the run.
        self._decode_options = dataclasses.replace(options.decode, invalid_text=self.summary.invalid_text,
                                                   state=self.summary.codec_state)
        self._claim_checks = ClaimChecks(options.claim_check_storage, self._codec, self._decode_options)
        self.applier = WarehouseApplier(self.warehouse, options, self.summary, source.name, spark, self.metrics)
        self._observed = 0.0  # when the loop's gauges were last updated (`_observe`)
        tables = options.table_filter
        self._filter = EventFilter(tables, self.summary.filtered) if tables.active else None
        if options.protocol == "simple" and options.reader == "spark":
            raise ConfigError("--protocol simple works with --reader driver only (its rows are typed by schemas from "
                              "earlier BOOTSTRAP messages, which the Spark reader's executors do not share)")
        self._own_spark = spark is None  # the engine starts the session: it chooses its compiler
        self._loop: ControlLoop | None = None
        self._stop = False

    @property
    def delta(self) -> DeltaApplier:
        return self.applier.delta

    def request_stop(self, *_: Any) -> None:
        self._stop = True
        if self._loop is not None:
            self._loop.request_stop()

    # -- run ------------------------------------------------------------------------------------
    def run(self) -> RunSummary:
        started = time.monotonic()
        opts = self.options
        if opts.metrics_port is not None:
            self.metrics.serve(opts.metrics_host, opts.metrics_port)
        ok = False
        try:
            self._run(started)
            ok = True
        finally:
            try:
                self.metrics.finish(success=ok and self.summary.error is None, textfile=opts.metrics_textfile)
            except ReplicatorError as exc:
                if ok:
                    raise
                log.warning("%s", exc)  # the run's own error is the one to report
        return self.summary

    def _run(self, started: float) -> None:
        opts = self.options
        with self.warehouse.locked(wait=opts.wait_for_lock), self._signals():
            if self._own_spark:
                from replicator.delta.spark import plan_jit

                # A catch-up run reading on this driver is short-lived: the quick compiler, if its
                # warehouse is small (docs/delta.md "Driver JVM start").
                plan_jit(short_lived=opts.until_caught_up and opts.reader == "driver",
                         tables_bytes=self.warehouse.tables_bytes)
            state = self.warehouse.load_state()
            self._check_source(state)
            self._use_catalog(state)
            self.applier.state = state
            if state.codec_schemas:  # Simple: the schemas earlier runs read (a restart's BOOTSTRAPs may lie behind it)
                from replicator.codec.simple import restore_schemas

                restore_schemas(self.summary.codec_state, state.codec_schemas)
            state.progress = state.progress.starting_at(opts.start)
            loop = self._batch_loop(state) if opts.reader == "spark" else self._control_loop(state)
            self._loop = loop
            self.applier.after_commit = lambda: self._observe(loop, force=True)
            if self._stop:
                loop.request_stop()
            display = _Display(loop, enabled=opts.progress)

            def tick() -> None:
                self.warehouse.fence()  # a follower that lost its lease stops even while idle
                display.update()
                self._observe(loop)

            loop.on_tick = tick
            try:
                with display, _few_full_collections():
                    loop.run()
                if loop.counts.error is None:
                    self.applier.sync_catalog_once()  # a run without steps still repairs the catalog
            finally:
                self._summarise(loop, time.monotonic() - started)
                self._observe(loop, force=True)
                self.applier.close()
                self.source.close()

    def _use_catalog(self, state: State) -> None:
        """The catalog tables are registered in: the run's (--catalog-uri or `[spark]`), else the one
        the warehouse records (a scheduled job keeps registering without repeating the flag). The
        warehouse records it (state.json) for every reader; the session this run starts uses it."""
        from replicator.delta.catalog import CatalogConfig

        config = self.options.catalog
        if config is None and state.catalog:
            config = CatalogConfig.from_json(state.catalog)
        if config is None:
            return
        if state.catalog and state.catalog != config.to_json():
            log.info("the warehouse's tables move to the catalog %s (were in %s); the old registrations are left "
                     "there", config.uri, state.catalog.get("uri"))
        if state.catalog != config.to_json():
            state.catalog = config.to_json()
            self.warehouse.save_state(state)  # recorded before anything is registered there
        if self._own_spark:
            from replicator.delta.spark import use_catalog

            use_catalog(config.uri)
        self.applier.catalog_config = config

    def _observe(self, loop: ControlLoop, *, force: bool = False) -> None:
        """Update the loop's gauges (watermarks, Kafka lag per partition) at most once a second, on
        the loop's thread: the consumer is never touched by the metrics server's thread."""
        now = time.monotonic()
        if not force and now - self._observed < 1.0:
            return
        self._observed = now
        m, windower = self.metrics, loop.windower
        m.records_read(loop.counts.records)
        m.watermarks(windower.applied_ts, max(windower.partition_watermarks().values(), default=0))
        # Counted from what the loop has processed: records fetched but not yet decoded are lag too.
        lags = loop.source.partition_lags(read_to=windower.next_offsets())
        if lags:
            m.kafka_lags(lags)

    def _loop_options(self) -> LoopOptions:
        opts = self.options
        return LoopOptions(until_caught_up=opts.until_caught_up, on_error=opts.on_error,
                           max_buffer_rows=opts.max_buffer_rows, flush_interval_s=opts.flush_interval_s)

    def _control_loop(self, state: State) -> ControlLoop:
        """`--reader driver`: records read and decoded here, rows buffered by the windower."""
        from replicator.delta.ddl.scope import ddl_scope

        partitions = self.source.partitions()
        windower = Windower(partitions, state.progress, scope_of=ddl_scope)
        cursors = state.progress.cursors
        self.source.start({p: (cursors[p].offset if p in cursors else None) for p in partitions})
        if not (self.options.until_caught_up and self.source.caught_up()):
            self.applier.warm_up()  # something to read: start Spark while reading it
        return ControlLoop(self.source, self._decode_record, self.applier, windower, self._loop_options())

    def _batch_loop(self, state: State) -> ControlLoop:
        """`--reader spark`: read and decode on Spark executors, batch by batch (engine/batch.py)."""
        from replicator.delta.ddl.scope import ddl_scope
        from replicator.engine.batch import BatchLoop
        from replicator.sources.kafka import KafkaSource
        from replicator.sources.spark_reader import read_batch

        source, opts = self.source, self.options
        if not isinstance(source, KafkaSource):
            raise ConfigError("--reader spark reads a Kafka topic; archives are read with --reader driver")
        topic = source.settings.single_topic
        if topic is None:
            raise ConfigError("--reader spark reads one topic; follow several topics (--topic given more than "
                              "once, or --topic-pattern) with --reader driver")
        if opts.claim_check_storage is not None:
            raise ConfigError("--claim-check-storage needs --reader driver: the Spark reader does not resolve "
                              "claim-check references (TiCDC large messages)")

        def read(ranges: Mapping[int, tuple[int, int]], watermarks: Mapping[int, int], applied_ts: int) -> SparkBatch:
            # one topic: the executors' reader keys everything by partition number
            batch = read_batch(self.applier.delta.spark, source.settings, ranges, protocol=opts.protocol,
                               options=opts.decode, watermarks=watermarks, applied_ts=applied_ts,
                               table_filter=opts.table_filter)
            self.applier.batch = batch
            return batch

        return BatchLoop(source, topic, self.applier, state.progress, self._loop_options(), read=read,
                         scope_of=ddl_scope, invalid_text=self.summary.invalid_text, event_filter=self._filter)

    def _summarise(self, loop: ControlLoop, elapsed: float) -> None:
        s, c, st = self.summary, loop.counts, loop.windower.stats
        s.elapsed_s = elapsed
        s.records, s.events, s.steps = c.records, c.events, c.steps
        s.dead_letters = c.dead_letters + self.applier.ddl_dead_letters
        s.watermark = loop.progress.applied_ts
        s.error = c.error
        s.rows, s.replays_dropped, s.already_applied = st.rows, st.replays_dropped, st.already_applied
        s.state_write_s = self.warehouse.state_write_s
        if self.warehouse.lease is not None:
            s.lease_renewals, s.lease_renew_s = self.warehouse.lease.renewals, self.warehouse.lease.renew_seconds

    def _check_source(self, state: State) -> None:
        if state.source is None:
            state.source, state.protocol = self.source.name, self.options.protocol
        elif state.source != self.source.name or state.protocol != self.options.protocol:
            raise ReplicatorError(
                f"warehouse {self.warehouse.root} replicates {state.source!r} ({state.protocol}); refusing to mix in "
                f"{self.source.name!r} ({self.options.protocol}): use another --warehouse"
            )

    @contextmanager
    def _signals(self) -> Iterator[None]:
        """Follow mode: SIGINT/SIGTERM finish the current step and stop cleanly. Python only lets the
        main thread set handlers; an engine embedded in another thread is stopped by request_stop()."""
        if self.options.until_caught_up or threading.current_thread() is not threading.main_thread():
            yield
            return
        old = {s: signal.signal(s, self.request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for s, h in old.items():
                signal.signal(s, h)

    def _decode_record(self, rec: Record) -> list[Event]:
        pos = Position(rec.topic, rec.partition, rec.offset)
        events = self._codec.decode(rec.key, rec.value, options=self._decode_options, position=pos)
        if self._filter is not None:
            events = self._filter.apply(events)
        events = self._claim_checks.resolve(events, pos)  # ClaimCheckError: stops the run (not dead-lettered)
        for ev in events:
            if isinstance(ev, RowChange):
                check_row(ev)
        return events


class WarehouseApplier:
    """The loop's `Applier`: steps become Delta MERGEs / DDL changes, progress goes to state.json
    (with one windows.jsonl line per step), undecodable messages to the dead-letter table."""

    def __init__(self, warehouse: Warehouse, options: RunOptions, summary: RunSummary, source_name: str,
                 spark: SparkSession | None = None, metrics: Metrics | None = None) -> None:
        self.warehouse = warehouse
        self.metrics = metrics or Metrics()
        self._apply_s = 0.0  # the last step's apply time (its metrics are counted once it is committed)
        self.after_commit: Callable[[], None] = lambda: None  # the engine updates its gauges (loop thread)
        self.options = options
        self.summary = summary
        self.source_name = source_name
        self.state = State()  # the loaded state, set by the engine under the warehouse lock
        self.ddl_dead_letters = 0
        self._spark = spark
        self._delta: DeltaApplier | None = None
        self._ddl: DdlApplier | None = None
        self._executor: Executor | None = None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._delta_lock = threading.Lock()
        self._warming: threading.Thread | None = None
        self._running = 0  # MERGEs in flight (the `tables_in_flight` fault instant)
        self.batch: SparkBatch | None = None  # where a step's row spans are (--reader spark)
        self.catalog_config: CatalogConfig | None = None  # where tables are registered by name
        self._catalog: CatalogSync | None = None
        self._catalog_synced = False  # the whole catalog checked once this run
        self._catalog_touched: set[str] = set()  # uids this step created, renamed, dropped or recovered

    # -- lazily built Spark edge ----------------------------------------------------------------
    @property
    def delta(self) -> DeltaApplier:
        with self._delta_lock:  # the warm-up thread may be building it
            if self._delta is None:
                from replicator.delta.merge import DeltaApplier
                from replicator.delta.spark import get_spark

                delta = DeltaApplier(self._spark or get_spark(), table_features=self.options.table_features)
                delta.schema_change, delta.rewrite_limit = self.options.schema_change, self.options.rewrite_limit
                delta.fence = self.warehouse.fence  # every Delta statement: only while this run holds the lease
                delta.on_conflict = self.metrics.conflict_retry
                self._delta = delta
            return self._delta

    def warm_up(self) -> None:
        """Start the Spark session in the background while the engine reads and decodes.

        The JVM's start (6 s on the 2-core machine) then overlaps the read of a catch-up run
        instead of following it. A failure here is left for the first real use of `delta` to
        raise, where the run reports it; the engine calls this only when there is data to read.
        """
        def start() -> None:
            with suppress(Exception):
                _ = self.delta

        if self._delta is None and self._warming is None:
            self._warming = threading.Thread(target=start, name="replicator-spark-start", daemon=True)
            self._warming.start()

    @property
    def catalog(self) -> CatalogSync | None:
        """The registrations' keeper when a catalog is configured (on the main Spark session)."""
        if self.catalog_config is None:
            return None
        if self._catalog is None:
            from replicator.delta.catalog import CatalogSync

            self._catalog = CatalogSync(self.delta.spark, self.catalog_config, self.warehouse.root)
        return self._catalog

    def sync_catalog_once(self) -> None:
        """Check every registration once a run (before its first step, or at its end when it had
        none): what a crash left half done, or a name dropped by hand, is repaired."""
        catalog = self.catalog
        if catalog is not None and not self._catalog_synced:
            catalog.sync(self.state)
            self._catalog_synced = True

    def _sync_catalog(self, step: Step) -> None:
        """At the end of a step, before its progress is committed: the names it created, renamed,
        dropped or recovered (any DDL step: CREATE/DROP DATABASE too), and now and then the rest."""
        catalog = self.catalog
        touched, self._catalog_touched = self._catalog_touched, set()
        if catalog is not None and (touched or step.ddls or catalog.due()):
            catalog.sync(self.state, touched)

    @property
    def ddl(self) -> DdlApplier:
        if self._ddl is None:
            from replicator.delta.ddl import DdlApplier

            self._ddl = DdlApplier(self.delta, self.warehouse)
        return self._ddl

    @property
    def executor(self) -> Executor:
        """Where a step's MERGEs run: inline for parallelism 1, else a pool whose threads each hold
        their own Spark session (so one MERGE's txnAppId / txnVersion / userMetadata session confs
        never reach another), in a FAIR scheduler pool (so no table's jobs starve)."""
        if self._executor is None:
            n = self.options.apply_parallelism
            if n <= 1:
                self._executor = InlineExecutor()
            else:
                self._executor = ThreadPoolExecutor(n, thread_name_prefix="replicator-apply",
                                                    initializer=self._start_worker)
        return self._executor

    def _start_worker(self) -> None:
        from replicator.delta.spark import APPLY_POOL

        session = self.delta.spark.newSession()
        session.sparkContext.setLocalProperty("spark.scheduler.pool", APPLY_POOL)
        self._local.delta = self.delta.for_session(session)

    def session_delta(self) -> DeltaApplier:
        """The calling thread's Delta applier: a pool worker's own, else the main one."""
        return getattr(self._local, "delta", None) or self.delta

    def close(self) -> None:
        """Stop the MERGE pool (its threads and their sessions) at the end of a run; a Spark start
        still under way (a run that ended before it needed Spark) is waited for, so the process
        never exits or stops Spark in the middle of it."""
        if self._warming is not None:
            self._warming.join()
            self._warming = None
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None

    # -- Applier --------------------------------------------------------------------------------
    def save_progress(self, progress: Progress, record: dict[str, Any] | None) -> None:
        state = self.state
        state.progress = progress
        if self.summary.codec_state.schema_objects:
            state.codec_schemas = list(self.summary.codec_state.schema_objects.values())
        if record is not None:
            state.steps = record["step"]
            self.warehouse.append_window(record)
        self.warehouse.save_state(state)
        if record is not None:
            self.metrics.step(str(record.get("kind", "window")), self._apply_s)
        self.after_commit()

    def dead_letter(self, dead: Sequence[tuple[Record, str]]) -> None:
        from replicator.delta.deadletter import write_dead_letters

        write_dead_letters(self.delta.spark, self.warehouse, self.options.protocol, list(dead))
        # The loop's dead letters are messages it could not decode; the reason starts with the error class.
        self.metrics.dead_lettered([reason.split(":", 1)[0] for _rec, reason in dead], decode_errors=len(dead))

    def apply(self, step: Step) -> dict[str, Any]:
        """Apply one step: its tables' MERGEs concurrently (`apply_parallelism`), each DDL once the
        rows of its tables before it are in, one DDL at a time (engine/plan.py, engine/schedule.py)."""
        started = time.monotonic()
        try:
            return self._apply(step)
        finally:
            self._apply_s = time.monotonic() - started

    def _apply(self, step: Step) -> dict[str, Any]:
        from replicator.delta.ddl.scope import ddl_scope

        state = self.state
        self.sync_catalog_once()
        self._catalog_touched.clear()
        n = state.steps + 1
        record: dict[str, Any] = {"step": n, "hi": step.hi, "tables": {},
                                  "recorded_at": dt.datetime.now(dt.UTC).isoformat(),
                                  "kind": "ddl" if step.ddls else "window"}
        # Only a step that a crashed (or failed) attempt may have half applied reads each table's
        # txnVersion first (one Delta state job per table); a step that starts clean cannot have a
        # DDL applied ahead of the catalog, so it is not marked by its own inflight_hi below.
        recovering = state.inflight_hi > state.applied_ts
        if step.ddls and state.inflight_hi < step.hi:
            # A crash from here on may leave a table's Delta schema ahead of the catalog: the re-run
            # checks each MERGE's txnVersion before running it against the old catalog.
            state.inflight_hi = step.hi
            self.warehouse.save_state(state)
        plan = plan_step(step.hi, step.rows, step.ddls, ddl_scope)
        self._create_ahead(state, plan)
        versions: dict[str, int] = {}
        ddls: list[dict[str, Any]] = []

        def prepare(seg: Segment) -> _Job:
            schema, table = seg.table
            entry = state.live_table(schema, table)
            rows = seg.rows
            if isinstance(rows, RowSpan):  # on the executors: a few for what the catalog needs from rows
                if entry is not None and entry.table_spec.key:
                    return _Job(seg, entry, entry.table_spec, n, recovering)
                rows = self._batch().sample(seg.table, rows.lo, rows.hi)
                if not rows:
                    return _Job(seg, None, None, n, recovering)  # the span turned out empty
            if entry is None:
                entry = self._infer_table(state, schema, table, rows)
            spec = entry.table_spec
            if not spec.key:  # DROP PRIMARY KEY cleared it: TiCDC flags its fallback handle key in the rows
                from replicator.delta.ddl import adopt_handle_key

                spec = adopt_handle_key(entry, rows)
            if not isinstance(seg.rows, RowSpan):  # the executors check every row of a span
                self._check_columns(entry, rows)
            return _Job(seg, entry, spec, n, recovering)

        def apply_ddl(i: int) -> None:
            ddls.append(self._apply_ddl(state, step.ddls[i], versions))

        def done(seg: Segment, out: tuple[_Job, MergeResult], more: bool) -> None:
            job, res = out
            if more:
                fault_point("between_tables")
            if job.entry is None:
                return
            name = f"{seg.table[0]}.{seg.table[1]}"
            counts = self.summary.tables.setdefault(name, TableCounts())
            if not res.skipped:
                counts.upserts += res.upserts
                counts.deletes += res.deletes
                counts.inserted += res.inserted
                counts.updated += res.updated
                counts.deleted += res.deleted
            self.metrics.merged(name, inserted=res.inserted, updated=res.updated, deleted=res.deleted,
                                committed=not res.skipped)
            uid = job.entry.uid
            prev = record["tables"].get(uid) or {"upserts": 0, "deletes": 0}
            version = max(res.version, versions.get(uid, -1))
            record["tables"][uid] = self._table_record(job.entry, version, prev["upserts"] + res.upserts,
                                                       prev["deletes"] + res.deletes)
            versions[uid] = version

        run_plan(plan, prepare=prepare, run=self._merge, apply_ddl=apply_ddl, done=done, executor=self.executor)
        for uid, version in versions.items():
            entry = state.tables.get(uid)
            if uid not in record["tables"] and entry is not None and entry.status == "live":
                record["tables"][uid] = self._table_record(entry, version, 0, 0)
        if ddls:
            record["ddls"] = ddls
            record["ddl"] = ddls[0]  # the step log's shape before steps held several DDLs
        self._sync_catalog(step)
        return record

    def _create_ahead(self, state: State, plan: StepPlan) -> None:
        """Create the Delta tables of the step's CREATE TABLEs concurrently, before the DDLs run one
        at a time (a changefeed over hundreds of tables starts with as many CREATE TABLEs, each a
        Delta commit of fixed cost). Only tables whose name no other DDL of the step touches and
        that the catalog does not have: then the CREATE's outcome is known, and creating a table at
        its deterministic path is idempotent (`CREATE TABLE IF NOT EXISTS`)."""
        if isinstance(self.executor, InlineExecutor):
            return
        from replicator.delta.ddl import planned_table

        todo: list[tuple[str, TableSpec]] = []
        for i, ddl in enumerate(plan.ddls):
            planned = planned_table(ddl)
            if planned is None:
                continue
            spec, uid = planned
            name = (spec.schema, spec.table)
            if state.live_table(*name) is not None or any(
                    sc.covers(name) for j, sc in enumerate(plan.scopes) if j != i):
                continue
            todo.append((self.warehouse.new_table_path(spec.schema, spec.table, uid), spec))
        if len(todo) < 2:
            return
        list(self.executor.map(lambda job: self.session_delta().create_table(*job), todo))
        self.ddl.created.update(path for path, _ in todo)

    def _batch(self) -> SparkBatch:
        if self.batch is None:
            raise RuntimeError("a step of row spans without a Spark batch")
        return self.batch

    def _merge(self, job: _Job) -> tuple[_Job, MergeResult]:
        """One segment's MERGE, on the calling thread's own Spark session (a pool worker's)."""
        schema, table = job.segment.table
        with self.metrics.table_context(f"{schema}.{table}"):  # its conflict retries count against it
            return self._merge_segment(job)

    def _merge_segment(self, job: _Job) -> tuple[_Job, MergeResult]:
        from replicator.delta.merge import MergeResult
        delta = self.session_delta()
        seg, entry, spec = job.segment, job.entry, job.spec
        if entry is None or spec is None:
            return job, MergeResult(0, 0, 0, -1, True)
        rows = seg.rows
        if job.recovering and delta.txn_version(entry.path, delta.app_id(entry.uid)) >= seg.version:
            # Committed by the crashed run; its table may already be past a DDL the catalog is not.
            return job, MergeResult(len(rows) if isinstance(rows, list) else 0, 0, 0,
                                    delta.table_version(entry.path), True)
        meta = {"replicator": {"step": job.step, "applied_ts": seg.version, "kind": "window"}}
        if isinstance(rows, RowSpan):
            frame = self._batch().changes(spec, seg.table, rows.lo, rows.hi)
            fault_timer("mid_merge")
            with self._in_flight():
                res = delta.merge_frame(entry.path, entry.uid, spec, frame, seg.version, meta)
                fault_point("after_merge")
                if self._running > 1:
                    fault_point("tables_in_flight")
            return job, res
        changes = collapse(rows, spec.key)
        fault_timer("mid_merge")
        with self._in_flight():
            try:
                res = delta.merge(entry.path, entry.uid, spec, changes, seg.version, meta)
            except SchemaError as exc:  # e.g. a value that does not fit its column: say where it came from
                raise SchemaError(f"{exc}; the rows came from {_positions(rows)}") from None
            fault_point("after_merge")
            if self._running > 1:
                fault_point("tables_in_flight")
        return job, res

    @contextmanager
    def _in_flight(self) -> Iterator[None]:
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1

    def _apply_ddl(self, state: State, ddl: DdlEvent, versions: dict[str, int]) -> dict[str, Any]:
        info: dict[str, Any] = {"type": ddl.ddl_type, "query": ddl.query, "schema": ddl.schema, "table": ddl.table,
                                "commit_ts": ddl.commit_ts}
        from replicator.delta.ddl.rules import DDL_TYPES

        rule = DDL_TYPES.get(ddl.ddl_type)
        rule_name = rule.name if rule is not None else "unknown"
        try:
            with self.metrics.table_context(f"{ddl.schema}.{ddl.table}" if ddl.table else ddl.schema):
                outcome = self.ddl.apply(state, ddl)
        except DdlError as exc:
            if self.options.on_ddl_error != "skip":
                exc.commit_ts = ddl.commit_ts  # the loop then applies what precedes it before stopping
                raise
            self._dead_letter_ddl(ddl, exc)
            info["outcome"] = f"skipped: {exc}"
            self.summary.ddl_skipped += 1
            self.metrics.ddl(ddl.ddl_type, rule_name, [], applied=False)
            return info
        info["outcome"] = f"{outcome.action}: {outcome.detail}"
        self._catalog_touched.update(outcome.tables)
        self.summary.ddl_applied += 1
        if outcome.reader_changes:
            info["reader_changes"] = list(outcome.reader_changes)
            self.summary.reader_changes.extend(outcome.reader_changes)
        changed: list[str] = []
        for uid in outcome.tables:
            entry = state.tables.get(uid)
            if entry is not None and entry.status == "live":
                versions[uid] = self.delta.table_version(entry.path)
                changed.append(f"{entry.schema_name}.{entry.table}")
        self.metrics.ddl(ddl.ddl_type, rule_name, changed, applied=True)
        pos = ddl.position
        log.info("DDL at %s: %s -> %s", ddl.commit_ts, ddl.query, info["outcome"],
                 extra={"table": f"{ddl.schema}.{ddl.table}" if ddl.table else ddl.schema, "ddl_type": ddl.ddl_type,
                        "commit_ts": ddl.commit_ts, "outcome": info["outcome"],
                        "position": position(pos.topic, pos.partition, pos.offset) if pos else None})
        return info

    @staticmethod
    def _table_record(entry: TableEntry, version: int, upserts: int, deletes: int) -> dict[str, Any]:
        return {"schema": entry.schema_name, "table": entry.table, "version": version,
                "upserts": upserts, "deletes": deletes}

    def _check_columns(self, entry: TableEntry, rows: Sequence[RowChange]) -> None:
        names = {c["name"] for c in entry.spec["columns"]}
        for row in rows:
            for col in row.columns or row.old_columns:
                if col.name not in names:
                    raise SchemaError(
                        f"row of {row.schema}.{row.table} at commit ts {row.commit_ts} has column {col.name!r} "
                        f"that the replicated table does not have ({row.position}); a DDL is missing from the stream"
                    )

    def _infer_table(self, state: State, schema: str, table: str, rows: Sequence[RowChange]) -> TableEntry:
        first = next((r for r in rows if r.columns), rows[0])
        spec = spec_from_row(first)
        uid = table_uid(schema, table + "\x00inferred", state.applied_ts)
        path = self.warehouse.new_table_path(schema, table, uid)
        self.delta.create_table(path, spec)
        entry = TableEntry(uid=uid, schema=schema, table=table, path=path, spec=spec.to_json(), created_ts=0)
        state.tables[uid] = entry
        self._catalog_touched.add(uid)
        log.info("table %s.%s was not created in the stream: inferred from row events (key %s)",
                 schema, table, list(spec.key), extra={"table": f"{schema}.{table}"})
        return entry

    def _dead_letter_ddl(self, ddl: DdlEvent, exc: Exception) -> None:
        pos = ddl.position
        rec = Record(pos.topic if pos else self.source_name, pos.partition if pos else -1,
                     pos.offset if pos else -1, -1, None, ddl.query.encode())
        from replicator.delta.deadletter import write_dead_letters

        write_dead_letters(self.delta.spark, self.warehouse, self.options.protocol, [(rec, f"DdlError: {exc}")])
        self.ddl_dead_letters += 1
        self.metrics.dead_lettered(["DdlError"], decode_errors=0)


@dataclass(frozen=True)
class _Job:
    """A segment ready to MERGE: resolved against the catalog on the scheduling thread."""

    segment: Segment
    entry: TableEntry | None  # None: a row span that turned out empty (nothing to apply)
    spec: TableSpec | None
    step: int
    recovering: bool  # a crashed run may have committed it: check its txnVersion first


FULL_COLLECTION_EVERY = 1000
"""Python's collector checks its oldest generation after this many young collections (default 10).

Why: a catch-up run buffers its decoded rows (millions of small objects that all stay alive until
their step is applied), and with the default each growth of the heap by a quarter re-scans all of
them: 3 of 7 seconds of reading 100,000 Craft row changes went to full collections that found
nothing (`make bench`). Rows are freed by reference counting as their step is applied; the full
collections only find reference cycles, which the engine does not build per row."""


@contextmanager
def _few_full_collections() -> Iterator[None]:
    """Raise the oldest generation's threshold to FULL_COLLECTION_EVERY for the run, then restore it."""
    old = gc.get_threshold()
    gc.set_threshold(old[0], old[1], max(old[2], FULL_COLLECTION_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _positions(rows: list[RowChange]) -> str:
    """Kafka offset ranges per partition of some rows, e.g. "topic 't' partition 0 offsets 5..9"."""
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    for r in rows:
        if r.position is not None:
            k = (r.position.topic, r.position.partition)
            lo, hi = spans.get(k, (r.position.offset, r.position.offset))
            spans[k] = (min(lo, r.position.offset), max(hi, r.position.offset))
    if not spans:
        return "an unknown position"
    return "; ".join(f"topic {t!r} partition {p} offsets {lo}..{hi}" for (t, p), (lo, hi) in sorted(spans.items()))


class _Display:
    """A live line on a terminal (events/s, watermark, lag); periodic log lines otherwise, and the
    last state as a last line when the run ends normally."""

    def __init__(self, loop: ControlLoop, enabled: bool | None) -> None:
        self.loop = loop
        # JSON log lines (--log-format json): nothing else on stderr, the progress goes as log lines.
        self.live = not json_logs() and (sys.stderr.isatty() if enabled is None else enabled)
        self._last_log = 0.0
        self._unlogged = False  # an update since the last line logged
        self._started = time.monotonic()
        self._status: Any = None

    def __enter__(self) -> _Display:
        if self.live:
            from rich.console import Console

            self._status = Console(stderr=True).status(self._text())
            self._status.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
        elif self._unlogged and exc_type is None:
            log.info("%s", self._text(), extra=self._fields())

    def _text(self) -> str:
        # The loop's own windower and source: the Spark reader makes a windower per batch, and
        # its source measures the Kafka lag from where the batches read to (engine/batch.py).
        s, windower = self.loop.counts, self.loop.windower
        el = max(time.monotonic() - self._started, 1e-6)
        wm = windower.applied_ts
        lag = f"{max(0.0, time.time() - tso_physical_ms(wm) / 1000):.0f}s" if wm else "n/a"
        kafka_lag = self.loop.source.lag()
        return (f"{s.records} records ({s.events / el:,.0f} events/s) | applied watermark {wm} | lag {lag}"
                f" | buffered {windower.buffered_rows} | kafka lag {kafka_lag if kafka_lag is not None else '?'}")

    def _fields(self) -> dict[str, Any]:
        """The progress line's structured fields (--log-format json)."""
        s, windower = self.loop.counts, self.loop.windower
        el = max(time.monotonic() - self._started, 1e-6)
        wm = windower.applied_ts
        return {"step": s.steps, "watermark": wm,
                "counts": {"records": s.records, "events": s.events, "events_per_s": round(s.events / el, 1),
                           "buffered_rows": windower.buffered_rows, "dead_letters": s.dead_letters,
                           "kafka_lag": self.loop.source.lag(),
                           "lag_s": round(max(0.0, time.time() - tso_physical_ms(wm) / 1000), 1) if wm else None}}

    def update(self) -> None:
        if self._status is not None:
            self._status.update(self._text())
        elif time.monotonic() - self._last_log >= 5.0:
            self._last_log = time.monotonic()
            self._unlogged = False
            log.info("%s", self._text(), extra=self._fields())
        else:
            self._unlogged = True
