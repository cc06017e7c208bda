"""The one place that wires the stages: source -> decode -> window -> apply (MERGE / DDL) -> Delta.

A step (the complete windows up to a watermark, with the DDLs among them) is applied, then progress is
committed: state.json (applied watermark, restart cursors, DDL ledger, catalog) and, best effort,
the Kafka consumer-group offsets. When what is due is decided by `ControlLoop` (loop.py); this
module wires it to the real source, the Delta applier (`WarehouseApplier`, applier.py) and the
warehouse. What a run is asked to do is `RunOptions` (options.py), what it did `RunSummary`
(summary.py). See warehouse/store.py and delta/writer.py for why that is exactly once.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from replicator.codec import codec_for
from replicator.codec.state import CodecState
from replicator.codec.values import InvalidText
from replicator.delta.typemap import spec_from_row
from replicator.engine.applier import WarehouseApplier
from replicator.engine.codecstate import restore_codec_state
from replicator.engine.context import RunContext
from replicator.engine.display import Display
from replicator.engine.filtering import EventFilter
from replicator.engine.gcpolicy import few_full_collections
from replicator.engine.loop import ControlLoop, LoopOptions
from replicator.engine.options import Protocol, Reader, RunOptions
from replicator.engine.sharding import Mode, ShardFilter
from replicator.engine.spark_edge import SparkEdge
from replicator.engine.summary import RunSummary, TableCounts
from replicator.engine.window import Windower
from replicator.errors import ConfigError, ReplicatorError
from replicator.events import TP, DdlCode, DdlEvent, Event, Position, Record, RowChange
from replicator.metrics import Metrics
from replicator.shards import Identities
from replicator.sources.claimcheck import ClaimChecks
from replicator.sources.executor import check_row
from replicator.sources.kafka import KafkaSource, Source
from replicator.sources.storage_sink import StorageSinkSource
from replicator.tables import TableName, TableSpec
from replicator.warehouse import State, Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.delta.catalog import CatalogConfig
    from replicator.delta.writer import TableWriter
    from replicator.sources.spark_reader import SparkBatch
    from replicator.sources.spill import SpillFiles

__all__ = ["Engine", "Protocol", "Reader", "RunOptions", "RunSummary", "TableCounts", "WarehouseApplier"]

log = logging.getLogger("replicator")


def spill_spec(state: State, unapplied: Sequence[DdlEvent], table: TableName, row: RowChange) -> TableSpec | None:
    """The spec a table's spilled rows will most likely be applied under, to decode them as they
    are spilled (sources/spill.py; the step checks it): the catalog's; else the one its CREATE
    TABLE still in the buffer (`unapplied`) makes; else the one a step infers from `row`. None
    for a table without a key."""
    from replicator.delta.ddl import planned_table

    entry = state.live_table(*table)
    if entry is not None:
        spec: TableSpec | None = entry.table_spec
    else:
        creates = [d for d in unapplied if d.ddl_type == DdlCode.CREATE_TABLE
                   and (d.schema, d.table) == table and d.commit_ts <= row.commit_ts]
        planned = planned_table(creates[-1]) if creates else None
        try:
            spec = planned[0] if planned is not None else spec_from_row(row)
        except ReplicatorError:  # no key, no columns: the step says so, from the events
            spec = None
    return spec if spec is not None and spec.key else None


class Engine:
    """Runs one replication (catch-up or follow) of one source into one warehouse.

    Wiring only: the warehouse lock and state, the source, the Delta applier and the display
    around `ControlLoop` (engine/loop.py), which holds the logic of when to apply what.
    """

    def __init__(self, source: Source, options: RunOptions, spark: SparkSession | None = None) -> None:
        self.source = source
        self.options = options
        self.warehouse = Warehouse(options.warehouse, lease_seconds=options.lease_seconds, shard=options.shard)
        # A storage-sink source decodes its own records (rows typed by its schema files).
        self._stored = source if isinstance(source, StorageSinkSource) else None
        self._codec = None if self._stored is not None else codec_for(options.protocol)
        self.summary = RunSummary(source=source.name, invalid_text=options.decode.invalid_text or InvalidText(),
                                  codec_state=options.decode.state or CodecState(),
                                  shard=str(options.shard) if options.shard is not None else None)
        self.metrics = Metrics(protocol=options.protocol, reader=options.reader, source=source.name,
                               max_tables=options.metrics_max_tables,
                               shard=str(options.shard) if options.shard is not None else None)
        # The decoders report text they decoded with U+FFFD to the summary's counter.
        # Simple's schema cache (restored from state.json at start) and the checksum counts of the run.
        self._decode_options = dataclasses.replace(options.decode, invalid_text=self.summary.invalid_text,
                                                   state=self.summary.codec_state)
        self._claim_checks = (ClaimChecks(options.claim_check_storage, self._codec, self._decode_options)
                              if self._codec is not None else None)
        # The Spark side, started on first use (or warmed up while reading); the step applier is
        # built over it once the run has decided its state, catalog and shard (`_run`).
        self.edge = SparkEdge(self.warehouse, options, self.metrics, spark)
        self.applier: WarehouseApplier | None = None
        self._observed = 0.0  # when the loop's gauges were last updated (`_observe`)
        tables = options.table_filter
        self._filter = EventFilter(tables, self.summary.filtered) if tables.active else None
        self._shard: ShardFilter | None = None  # --shard: made from the state's renames (`_use_shard`)
        if options.shard is not None and options.reader == "spark":
            raise ConfigError("--shard works with --reader driver only (the Spark reader's executors do not follow "
                              "the renames that decide which shard owns a table)")
        if options.protocol == "simple" and options.reader == "spark":
            raise ConfigError("--protocol simple works with --reader driver only (its rows are typed by schemas from "
                              "earlier BOOTSTRAP messages, which the Spark reader's executors do not share)")
        self._own_spark = spark is None  # the engine starts the session: it chooses its compiler
        self._loop: ControlLoop | None = None
        self._spilled: SpillFiles | None = None
        self._stop = False

    @property
    def delta(self) -> TableWriter:
        return self.edge.delta

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
        self.warehouse.check_layout()  # sharded or not, as the warehouse is (before taking a lease)
        with self.warehouse.locked(wait=opts.wait_for_lock), self._signals():
            if self._own_spark:
                from replicator.runtime.spark import plan_jit

                # A catch-up run reading on this driver is short-lived: the quick compiler, if its
                # warehouse is small (docs/delta.md "Driver JVM start").
                plan_jit(short_lived=opts.until_caught_up and opts.reader == "driver",
                         tables_bytes=self.warehouse.tables_bytes)
            state = self.warehouse.load_state()
            self._check_source(state)
            catalog = self._use_catalog(state)
            self._use_shard(state)
            restore_codec_state(self.summary.codec_state, state)
            state.progress = state.progress.starting_at(opts.start)
            applier = WarehouseApplier(RunContext(
                self.warehouse, opts, self.summary, self.metrics, self.source.name, self.edge, state,
                catalog=catalog, shard=self._shard, after_commit=self._after_commit))
            self.applier = applier
            loop = self._batch_loop(state, applier) if opts.reader == "spark" else self._control_loop(state, applier)
            self._loop = loop
            if self._stop:
                loop.request_stop()
            display = Display(loop, enabled=opts.progress)

            def tick() -> None:
                self.warehouse.fence()  # a follower that lost its lease stops even while idle
                display.update()
                self._observe(loop)

            loop.on_tick = tick
            try:
                with display, few_full_collections():
                    loop.run()
                if loop.counts.error is None:
                    applier.sync_catalog_once()  # a run without steps still repairs the catalog
            finally:
                self._summarise(loop, applier, time.monotonic() - started)
                self._observe(loop, force=True)
                applier.close()
                self.source.close()
                if self._spilled is not None:
                    self._spilled.close()

    def _after_commit(self) -> None:
        """After each step's progress is saved: the gauges, at once (not at most once a second)."""
        if self._loop is not None:
            self._observe(self._loop, force=True)

    def _use_catalog(self, state: State) -> CatalogConfig | None:
        """The catalog tables are registered in: the run's (--catalog-uri or `[spark]`), else the one
        the warehouse records (a scheduled job keeps registering without repeating the flag). The
        warehouse records it (state.json) for every reader; the session this run starts uses it."""
        from replicator.delta.catalog import CatalogConfig

        config = self.options.catalog
        if config is None and state.catalog:
            config = CatalogConfig.from_json(state.catalog)
        if config is None:
            return None
        if state.catalog and state.catalog != config.to_json():
            log.info("the warehouse's tables move to the catalog %s (were in %s); the old registrations are left "
                     "there", config.uri, state.catalog.get("uri"))
        if state.catalog != config.to_json():
            state.catalog = config.to_json()
            self.warehouse.save_state(state)  # recorded before anything is registered there
        if self._own_spark:
            from replicator.runtime.spark import use_catalog

            use_catalog(config.uri)
        return config

    def _use_shard(self, state: State) -> None:
        """--shard: the filter of other shards' events, with the renames this shard has read so far;
        decided when decoded where a row's partition shows every earlier DDL (engine/sharding.py)."""
        shard = self.options.shard
        if shard is None:
            return
        mode: Mode = "step"
        if isinstance(self.source, KafkaSource) and self.source.settings.single_topic is not None:
            assert self._codec is not None
            mode = "partition" if self._codec.broadcasts_ddl else "partition0"
        self._shard = ShardFilter(shard, Identities.from_json(state.shard_renames), mode, self.summary.filtered)
        if mode != "step":  # rows of other shards' tables left undecoded where the codec can
            self._decode_options = dataclasses.replace(self._decode_options, skip_row=self._shard.skip_row)

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
        """A sharded follower's interval steps end on a grid as long as its interval, so the shards
        step at the same points (engine/loop.py, `ControlLoop.step_end`)."""
        opts = self.options
        grid = max(1, round(opts.flush_interval_s * 1000)) if opts.shard is not None else 0
        return LoopOptions(until_caught_up=opts.until_caught_up, on_error=opts.on_error,
                           max_buffer_rows=opts.max_buffer_rows, flush_interval_s=opts.flush_interval_s,
                           step_grid_ms=grid, spill_rows=opts.spill_rows)

    def _control_loop(self, state: State, applier: WarehouseApplier) -> ControlLoop:
        """`--reader driver`: records read and decoded here, rows buffered by the windower."""
        from replicator.delta.ddl.scope import ddl_scope

        if self._stored is not None:  # it forgets the streams read and applied to their end
            progress = state.progress
            self._stored.applied_ts = lambda: progress.applied_ts
            self._stored.ended_versions = progress.ended_versions
        partitions = self.source.partitions()
        windower = Windower(partitions, state.progress, scope_of=ddl_scope, spill=self._spill(state))
        cursors = state.progress.cursors
        self.source.start({p: (cursors[p].offset if p in cursors else None) for p in partitions})
        if not (self.options.until_caught_up and self.source.caught_up()):
            self.edge.warm_up()  # something to read: start Spark while reading it
        decode = self.decode_record if self._stored is None else self._stored_decoder(windower)
        return ControlLoop(self.source, decode, applier, windower, self._loop_options())

    def _spill(self, state: State) -> SpillFiles | None:
        """Where a full buffer's complete rows wait (sources/spill.py): the warehouse's own records,
        which every executor reads; what a crashed run left there goes first (this run holds the
        lease). A keyed table's rows are decoded there under the spec it will most likely have
        when they are applied (`spec_of`; the step checks it). None with --spill-rows 0."""
        if self.options.spill_rows <= 0:
            return None
        from replicator.sources.spill import SpillFiles

        def spec_of(table: TableName, row: RowChange, ddls: Sequence[DdlEvent]) -> TableSpec | None:
            return spill_spec(state, ddls, table, row)

        edge = self.edge
        # Spans are read back on the driver, at most a buffer's rows at once (sources/spill_index.py `TypedRows`).
        self._spilled = SpillFiles((self.warehouse.meta / "spill").path, lambda: edge.delta.spark, spec_of,
                                   driver_rows=self.options.max_buffer_rows)
        self._spilled.forget_crashed()
        return self._spilled

    def _stored_decoder(self, windower: Windower) -> Callable[[Record], list[Event]]:
        """A storage-sink source's records: decoded by the source; a stream it found since the last
        one (a new table version, a new writer) joins the window before its first record, with
        watermark 0 until its resolved marker (which the source puts after its records)."""
        stored, known = self._stored, set(windower.partitions)
        assert stored is not None
        stored.decode_options = self._decode_options

        def decode(rec: Record) -> list[Event]:
            if stored.ended:  # streams it forgot at the start of its pass, before any record of it
                for gone in stored.ended:
                    windower.retire(gone)
                    known.discard(gone)
                stored.ended.clear()
            tp = TP(rec.topic, rec.partition)
            if tp not in known:
                windower.add_partition(tp)
                known.add(tp)
            return self._admit(stored.decode(rec), tp)

        return decode

    def _batch_loop(self, state: State, applier: WarehouseApplier) -> ControlLoop:
        """`--reader spark`: read and decode on Spark executors, batch by batch (engine/batch.py)."""
        from replicator.delta.ddl.scope import ddl_scope
        from replicator.engine.batch import BatchLoop
        from replicator.sources.spark_reader import read_batch

        source, opts = self.source, self.options
        if not isinstance(source, KafkaSource):
            raise ConfigError("--reader spark reads a Kafka topic; archives and storage sinks are read with "
                              "--reader driver")
        topic = source.settings.single_topic
        if topic is None:
            raise ConfigError("--reader spark reads one topic; follow several topics (--topic given more than "
                              "once, or --topic-pattern) with --reader driver")
        if opts.claim_check_storage is not None:
            raise ConfigError("--claim-check-storage needs --reader driver: the Spark reader does not resolve "
                              "claim-check references (TiCDC large messages)")

        def read(ranges: Mapping[int, tuple[int, int]], watermarks: Mapping[int, int], applied_ts: int) -> SparkBatch:
            # one topic: the executors' reader keys everything by partition number
            return read_batch(self.edge.delta.spark, source.settings, ranges, protocol=opts.protocol,
                              options=opts.decode, watermarks=watermarks, applied_ts=applied_ts,
                              table_filter=opts.table_filter)

        return BatchLoop(source, topic, applier, state.progress, self._loop_options(), read=read,
                         scope_of=ddl_scope, invalid_text=self.summary.invalid_text, event_filter=self._filter)

    def _summarise(self, loop: ControlLoop, applier: WarehouseApplier, elapsed: float) -> None:
        s, c, st = self.summary, loop.counts, loop.windower.stats
        s.elapsed_s = elapsed
        s.records, s.events, s.steps = c.records, c.events, c.steps
        s.dead_letters = c.dead_letters + applier.ddl_dead_letters
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

    def decode_record(self, rec: Record) -> list[Event]:
        """One Kafka record's events, through the decode chain (`_admit`), counted in the summary."""
        pos = Position(rec.topic, rec.partition, rec.offset)
        claims = self._claim_checks
        assert self._codec is not None and claims is not None
        events = self._codec.decode(rec.key, rec.value, options=self._decode_options, position=pos)
        # ClaimCheckError: stops the run (not dead-lettered)
        return self._admit(events, TP(rec.topic, rec.partition), lambda evs: claims.resolve(evs, pos))

    def _admit(self, events: list[Event], tp: TP,
               resolve: Callable[[list[Event]], list[Event]] | None = None) -> list[Event]:
        """What every decoded record's events go through, whichever source: other shards' events
        dropped, the table filter, large messages fetched (`resolve`: after the filters, so a
        filtered-out table's are never fetched), every row checked."""
        if self._shard is not None:
            events = self._shard.apply(events, tp)
        if self._filter is not None:
            events = self._filter.apply(events)
        if resolve is not None:
            events = resolve(events)
        for ev in events:
            if isinstance(ev, RowChange):
                check_row(ev)
        return events
