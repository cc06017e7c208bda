"""The one place that wires the stages: source -> decode -> window -> apply (MERGE / DDL) -> Delta.

A step (a batch of complete windows up to a watermark, or one DDL) is applied, then progress is
committed: state.json (applied watermark, restart cursors, DDL ledger, catalog) and, best effort,
the Kafka consumer-group offsets. See warehouse.py and apply.py for why that is exactly once.
"""

from __future__ import annotations

import datetime as dt
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from replicator.codec.values import DecodeOptions
from replicator.delta.typemap import spec_from_row
from replicator.delta.warehouse import State, TableEntry, Warehouse, table_uid
from replicator.engine.window import Cursor, DdlStep, RowBatch, Step, Windower, collapse
from replicator.errors import DdlError, DecodeError, ReplicatorError, SchemaError, UnsupportedError
from replicator.events import Event, Position, RowChange, tso_physical_ms, tso_to_datetime
from replicator.faults import fault_point, fault_timer
from replicator.sources.kafka import Record, Source

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.delta.ddl import DdlApplier
    from replicator.delta.merge import DeltaApplier

log = logging.getLogger("replicator")
Protocol = Literal["open", "craft"]
Decoder = Callable[[bytes | None, bytes | None, DecodeOptions, Position], list[Event]]


def decoder_for(protocol: str) -> Decoder:
    """The codec for a protocol name: the only place that knows every wire format."""
    if protocol == "open":
        from replicator.codec import open_protocol

        def dec_open(key: bytes | None, value: bytes | None, opts: DecodeOptions, pos: Position) -> list[Event]:
            return open_protocol.decode(key, value, options=opts, position=pos)

        return dec_open
    if protocol == "craft":
        from replicator.codec import craft

        def dec_craft(key: bytes | None, value: bytes | None, opts: DecodeOptions, pos: Position) -> list[Event]:
            return craft.decode(value or b"", options=opts, position=pos)

        return dec_craft
    raise ReplicatorError(f"unknown protocol {protocol!r} (expected open or craft)")


@dataclass
class RunOptions:
    warehouse: str
    protocol: Protocol
    until_caught_up: bool = False
    on_error: Literal["stop", "skip"] = "stop"
    on_ddl_error: Literal["stop", "skip"] = "stop"
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    start: Mapping[int, int] | Literal["earliest"] | None = None  # None: stored state (or earliest)
    max_buffer_rows: int = 200_000
    flush_interval_s: float = 2.0
    wait_for_lock: bool = False
    progress: bool | None = None  # None: a live display when stderr is a terminal
    table_features: str = "compatible"  # what new tables get (replicator/delta/features.py)


@dataclass
class TableCounts:
    upserts: int = 0
    deletes: int = 0


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
            "tables": {k: {"upserts": v.upserts, "deletes": v.deletes} for k, v in sorted(self.tables.items())},
            "error": self.error,
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
        for name, c in sorted(self.tables.items()):
            lines.append(f"  {name}: {c.upserts} upserted, {c.deletes} deleted")
        return "\n".join(lines)


class Engine:
    """Runs one replication (catch-up or follow) of one source into one warehouse."""

    def __init__(self, source: Source, options: RunOptions, spark: SparkSession | None = None) -> None:
        self.source = source
        self.options = options
        self.warehouse = Warehouse(options.warehouse)
        self._spark = spark
        self._decode = decoder_for(options.protocol)
        self._stop = False
        self.summary = RunSummary(source=source.name)
        self._delta: DeltaApplier | None = None
        self._ddl: DdlApplier | None = None
        self._dead: list[tuple[Record, str]] = []

    # -- lazily built Spark edge ----------------------------------------------------------------
    @property
    def delta(self) -> DeltaApplier:
        if self._delta is None:
            from replicator.delta.merge import DeltaApplier
            from replicator.delta.spark import get_spark

            self._delta = DeltaApplier(self._spark or get_spark(), table_features=self.options.table_features)
        return self._delta

    @property
    def ddl(self) -> DdlApplier:
        if self._ddl is None:
            from replicator.delta.ddl import DdlApplier

            self._ddl = DdlApplier(self.delta, self.warehouse)
        return self._ddl

    def request_stop(self, *_: Any) -> None:
        self._stop = True

    # -- run ------------------------------------------------------------------------------------
    def run(self) -> RunSummary:
        started = time.monotonic()
        with self.warehouse.locked(wait=self.options.wait_for_lock), self._signals():
            state = self.warehouse.load_state()
            self._check_source(state)
            partitions = self.source.partitions()
            cursors = {int(p): Cursor(s.offset, s.watermark) for p, s in state.partitions.items()}
            start = self.options.start
            if start == "earliest":
                cursors = {}
            elif isinstance(start, Mapping):
                cursors = {p: Cursor(o, 0) for p, o in start.items()} | {
                    p: c for p, c in cursors.items() if p not in start
                }
            windower = Windower(
                partitions, applied_ts=state.applied_ts, cursors=cursors, ddl_ledger=set(map(tuple, state.ddl_ledger))  # type: ignore[arg-type]
            )
            self.source.start({p: (cursors[p].offset if p in cursors else None) for p in partitions})
            try:
                self._loop(state, windower)
            finally:
                self.summary.elapsed_s = time.monotonic() - started
                self.summary.watermark = state.applied_ts
                st = windower.stats
                self.summary.rows = st.rows
                self.summary.replays_dropped = st.replays_dropped
                self.summary.already_applied = st.already_applied
                self.source.close()
        return self.summary

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

    def _loop(self, state: State, windower: Windower) -> None:
        opts = self.options
        display = _Progress(self, windower, enabled=opts.progress)
        last_apply = time.monotonic()
        with display:
            while True:
                records = self.source.poll()
                failure: ReplicatorError | None = None
                for rec in records:
                    self.summary.records += 1
                    try:
                        events = self._decode_record(rec)
                    except (DecodeError, UnsupportedError) as exc:
                        self._dead.append((rec, f"{type(exc).__name__}: {exc}"))
                        self.summary.dead_letters += 1
                        if opts.on_error == "skip":
                            log.warning("dead-lettered %s: %s", _where(rec), exc)
                            windower.skip(rec.partition, rec.offset)
                            continue
                        failure = exc if isinstance(exc, DecodeError) else DecodeError(str(exc))
                        if isinstance(failure, DecodeError) and failure.position is None:
                            failure.at(_where(rec))
                        break
                    self.summary.events += len(events)
                    windower.offer(rec.partition, rec.offset, events)
                    # Bound memory: apply complete windows as soon as the buffer is full.
                    if windower.buffered_rows >= opts.max_buffer_rows and windower.has_ready_step():
                        self._apply_ready(state, windower)
                        last_apply = time.monotonic()
                display.update()
                now = time.monotonic()
                caught_up = opts.until_caught_up and self.source.caught_up()
                due = (
                    failure is not None or caught_up or self._stop
                    or windower.buffered_rows >= opts.max_buffer_rows
                    or (not opts.until_caught_up and now - last_apply >= opts.flush_interval_s)
                )
                if due:
                    complete = self._apply_ready(state, windower)
                    last_apply = now
                    display.update()
                    # A partition found while applying must be read too before the run ends, and a
                    # catch-up run whose ready steps wait for the topic's metadata goes on waiting.
                    caught_up = caught_up and complete and self.source.caught_up()
                if failure is not None:
                    self.summary.error = str(failure)
                    raise failure
                if caught_up or self._stop:
                    return

    def _partitions_known(self, windower: Windower) -> bool:
        """Whether every partition of the topic is being read, checked against fresh metadata.

        Why before every advance of the watermark: TiCDC writes a resolved ts R to a partition only
        after every row <= R reached every partition it writes to. A partition added to the topic
        (and used after a changefeed restart) may thus hold rows <= R while we have only read R on
        the old ones; applying up to R first would drop those rows as "already applied". Metadata
        fetched after R was read lists such a partition: it is then read from its start and the
        watermark waits for its first resolved event (Windower.add_partition). False (do not apply
        now) when the metadata cannot be fetched.
        """
        fresh: Callable[[], list[int] | None] | None = getattr(self.source, "fresh_partitions", None)
        if fresh is None:  # a finite source (archive): its partitions are all known at start
            return True
        parts = fresh()
        if parts is None:  # the source logs the wait once and bounds it by its retry budget
            return False
        new = sorted(set(parts) - set(windower.partitions))
        if new:
            add: Callable[[list[int]], bool] = self.source.add_partitions  # type: ignore[attr-defined]
            if not add(new):
                return False
            for p in new:
                windower.add_partition(p)
            log.warning("topic %s has new partition(s) %s: reading them from their start; applying waits for "
                        "their first resolved event", self.source.name, new)
        return True

    def _decode_record(self, rec: Record) -> list[Event]:
        pos = Position(rec.topic, rec.partition, rec.offset)
        events = self._decode(rec.key, rec.value, self.options.decode, pos)
        for ev in events:
            if isinstance(ev, RowChange) and (ev.only_handle_key or ev.claim_check):
                what = "claim-check location " + repr(ev.claim_check) if ev.claim_check else "only handle-key columns"
                raise UnsupportedError(
                    f"row of {ev.schema}.{ev.table} carries {what} (TiCDC large-message handling); "
                    "the full row is not in the message, so it cannot be replicated: disable "
                    "large-message-handle-option upstream or raise max-message-bytes"
                )
        return events

    # -- apply ----------------------------------------------------------------------------------
    def _apply_ready(self, state: State, windower: Windower) -> bool:
        """Apply every ready step; False when they wait for the topic's partitions (no metadata)."""
        if self._flush_dead_letters():
            fault_point("after_dead_letters")
        if windower.has_ready_step() and not self._partitions_known(windower):
            return False
        while True:
            step = windower.next_step()
            if step is None:
                break
            record = self._apply_step(state, step)
            fault_point("before_progress")
            windower.commit(step)
            self._commit_progress(state, windower, record)
        if not self.options.until_caught_up or self.source.caught_up():
            # Persist cursors even when no step was due (e.g. only replays or skipped dead letters).
            self._commit_progress(state, windower, None)
        return True

    def _apply_step(self, state: State, step: Step) -> dict[str, Any]:
        n = state.steps + 1
        record: dict[str, Any] = {"step": n, "hi": step.hi, "tables": {},
                                  "recorded_at": dt.datetime.now(dt.UTC).isoformat()}
        if isinstance(step, DdlStep):
            record["kind"] = "ddl"
            record["ddl"] = {"type": step.ddl.ddl_type, "query": step.ddl.query, "schema": step.ddl.schema,
                             "table": step.ddl.table}
            try:
                outcome = self.ddl.apply(state, step.ddl)
            except DdlError as exc:
                if self.options.on_ddl_error != "skip":
                    raise
                self._dead_letter_ddl(step, exc)
                record["ddl"]["outcome"] = f"skipped: {exc}"
                self.summary.ddl_skipped += 1
                return record
            record["ddl"]["outcome"] = f"{outcome.action}: {outcome.detail}"
            self.summary.ddl_applied += 1
            for uid in outcome.tables:
                entry = state.tables.get(uid)
                if entry is not None and entry.status == "live":
                    record["tables"][uid] = self._table_record(entry, self.delta.table_version(entry.path), 0, 0)
            log.info("DDL at %s: %s -> %s", step.ddl.commit_ts, step.ddl.query, record["ddl"]["outcome"])
            return record
        record["kind"] = "window"
        assert isinstance(step, RowBatch)
        tables = sorted(step.rows.items())
        for i, ((schema, table), rows) in enumerate(tables):
            entry = state.live_table(schema, table) or self._infer_table(state, schema, table, rows)
            spec = entry.table_spec
            if not spec.key:  # DROP PRIMARY KEY cleared it: TiCDC flags its fallback handle key in the rows
                from replicator.delta.ddl import adopt_handle_key

                spec = adopt_handle_key(entry, rows)
            changes = collapse(rows, spec.key)
            self._check_columns(entry, rows)
            meta = {"replicator": {"step": n, "applied_ts": step.hi, "kind": "window"}}
            fault_timer("mid_merge")
            try:
                res = self.delta.merge(entry.path, entry.uid, spec, changes, step.hi, meta)
            except SchemaError as exc:  # e.g. a value that does not fit its column: say where it came from
                raise SchemaError(f"{exc}; the rows came from {_positions(rows)}") from None
            fault_point("after_merge")
            if i + 1 < len(tables):
                fault_point("between_tables")
            counts = self.summary.tables.setdefault(f"{schema}.{table}", TableCounts())
            if not res.skipped:
                counts.upserts += res.upserts
                counts.deletes += res.deletes
            record["tables"][entry.uid] = self._table_record(entry, res.version, res.upserts, res.deletes)
        return record

    @staticmethod
    def _table_record(entry: TableEntry, version: int, upserts: int, deletes: int) -> dict[str, Any]:
        return {"schema": entry.schema_name, "table": entry.table, "version": version,
                "upserts": upserts, "deletes": deletes}

    def _check_columns(self, entry: TableEntry, rows: list[RowChange]) -> None:
        names = {c["name"] for c in entry.spec["columns"]}
        for row in rows:
            for col in row.columns or row.old_columns:
                if col.name not in names:
                    raise SchemaError(
                        f"row of {row.schema}.{row.table} at commit ts {row.commit_ts} has column {col.name!r} "
                        f"that the replicated table does not have ({row.position}); a DDL is missing from the stream"
                    )

    def _infer_table(self, state: State, schema: str, table: str, rows: list[RowChange]) -> TableEntry:
        first = next((r for r in rows if r.columns), rows[0])
        spec = spec_from_row(first)
        uid = table_uid(schema, table + "\x00inferred", state.applied_ts)
        path = self.warehouse.new_table_path(schema, table, uid)
        self.delta.create_table(path, spec)
        entry = TableEntry(uid=uid, schema=schema, table=table, path=path, spec=spec.to_json(), created_ts=0)
        state.tables[uid] = entry
        log.info("table %s.%s was not created in the stream: inferred from row events (key %s)",
                 schema, table, list(spec.key))
        return entry

    def _commit_progress(self, state: State, windower: Windower, record: dict[str, Any] | None) -> None:
        cursors = windower.restart_cursors()
        new_parts = {str(p): {"offset": c.offset, "watermark": c.watermark} for p, c in cursors.items()}
        if record is None and state.applied_ts == windower.applied_ts and {
            k: v.model_dump() for k, v in state.partitions.items()
        } == new_parts:
            return
        from replicator.delta.warehouse import PartitionState

        state.applied_ts = windower.applied_ts
        state.partitions = {p: PartitionState(**v) for p, v in new_parts.items()}
        state.ddl_ledger = sorted(windower.ddl_ledger)
        if record is not None:
            state.steps = record["step"]
            record["applied_ts"] = windower.applied_ts
            self.warehouse.append_window(record)
            self.summary.steps += 1
        self.warehouse.save_state(state)
        fault_point("after_progress")
        self.summary.watermark = state.applied_ts
        self.source.commit({p: c.offset for p, c in cursors.items()})

    # -- dead letters ---------------------------------------------------------------------------
    def _flush_dead_letters(self) -> bool:
        """Record pending dead letters (before progress moves past them); True if there were any."""
        if not self._dead:
            return False
        from replicator.delta.deadletter import write_dead_letters

        write_dead_letters(self.delta.spark, self.warehouse, self.options.protocol, self._dead)
        self._dead = []
        return True

    def _dead_letter_ddl(self, step: DdlStep, exc: Exception) -> None:
        pos = step.ddl.position
        rec = Record(pos.topic if pos else self.source.name, pos.partition if pos else -1,
                     pos.offset if pos else -1, -1, None, step.ddl.query.encode())
        from replicator.delta.deadletter import write_dead_letters

        write_dead_letters(self.delta.spark, self.warehouse, self.options.protocol, [(rec, f"DdlError: {exc}")])
        self.summary.dead_letters += 1


def _where(rec: Record) -> str:
    return f"topic {rec.topic!r} partition {rec.partition} offset {rec.offset}"


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


class _Progress:
    """A live line on a terminal (events/s, watermark, lag); periodic log lines otherwise."""

    def __init__(self, engine: Engine, windower: Windower, enabled: bool | None) -> None:
        self.engine, self.windower = engine, windower
        self.live = sys.stderr.isatty() if enabled is None else enabled
        self._last_log = 0.0
        self._started = time.monotonic()
        self._status: Any = None

    def __enter__(self) -> _Progress:
        if self.live:
            from rich.console import Console

            self._status = Console(stderr=True).status(self._text())
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def _text(self) -> str:
        s = self.engine.summary
        el = max(time.monotonic() - self._started, 1e-6)
        wm = self.windower.applied_ts
        lag = f"{max(0.0, time.time() - tso_physical_ms(wm) / 1000):.0f}s" if wm else "n/a"
        kafka_lag = self.engine.source.lag()
        return (f"{s.records} records ({s.events / el:,.0f} events/s) | applied watermark {wm} | lag {lag}"
                f" | buffered {self.windower.buffered_rows} | kafka lag {kafka_lag if kafka_lag is not None else '?'}")

    def update(self) -> None:
        if self._status is not None:
            self._status.update(self._text())
        elif time.monotonic() - self._last_log >= 5.0:
            self._last_log = time.monotonic()
            log.info("%s", self._text())
