"""`--reader spark`: the control loop over batches whose rows stay on Spark executors.

Each batch reads every partition from its restart cursor to the end offset of now, as a rerun
after a crash would: so a batch needs nothing from the one before but the warehouse's progress,
and exactly once rests on the same argument as for the driver reader (engine/loop.py). The
driver gets a batch's resolved events, DDLs and dead letters and per-table aggregates; the rows'
fates on arrival (replay, already applied) were decided on the executors with the same rules as
`Windower.offer`. `BatchWindower` is the driver reader's `Windower` with its row buffer replaced
by a `RowIndex` over the executors' rows, so steps, DDL barriers and restart cursors are decided
by the same code. One topic only: the executors key rows by partition number, and this module
turns them into the windower's (topic, partition) keys.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from replicator.engine.filtering import EventFilter
from replicator.engine.loop import Applier, ControlLoop, LoopOptions
from replicator.engine.rows import Rows, RowSpan, SpanSource
from replicator.engine.window import Windower, WindowStats
from replicator.errors import ClaimCheckError, DecodeError, KafkaSourceError
from replicator.events import DdlEvent, Event, Record, RowChange
from replicator.logformat import position
from replicator.progress import TP, Progress
from replicator.sources.executor import APPLIED, CLAIM_CHECK_REASON, KEEP, REPLAY
from replicator.tables import DdlScope, TableName

if TYPE_CHECKING:
    from replicator.codec.values import InvalidText
    from replicator.sources.kafka import KafkaSource
    from replicator.sources.spark_reader import SparkBatch
    from replicator.tables import TableSpec

log = logging.getLogger("replicator")


class RowIndex(SpanSource, Protocol):
    """What the windower asks about rows it does not hold (and the step's spans fetch from it)."""

    def first_after(self, scope: DdlScope, ts: int, hi: int) -> int | None:
        """The lowest commit ts in (ts, hi] of a row of a table in `scope`; None: no such row."""

    def tables_in(self, lo: int, hi: int) -> list[TableName]:
        """Tables that may have rows with commit ts in (lo, hi] (a superset is fine)."""

    def restart_points(self, above: int) -> Iterable[tuple[int, int, int]]:
        """(partition, offset, watermark before it) of the oldest row with commit ts > above, per partition."""


class NoRows:
    """The index of a batch without rows."""

    vouched = False

    def first_after(self, scope: DdlScope, ts: int, hi: int) -> int | None:
        return None

    def tables_in(self, lo: int, hi: int) -> list[TableName]:
        return []

    def restart_points(self, above: int) -> Iterable[tuple[int, int, int]]:
        return []

    def sample(self, table: TableName, lo: int, hi: int, n: int = 20) -> list[RowChange]:
        return []

    def changes(self, spec: TableSpec, table: TableName, lo: int, hi: int) -> Any:
        raise RuntimeError("a batch without rows has no changes")

    def summary(self, spec: TableSpec, table: TableName, lo: int, hi: int) -> None:
        return None


class BatchWindower(Windower):
    """A `Windower` fed only the resolved and DDL events of a batch; its rows are in `index`."""

    def __init__(self, topic: str, partitions: Sequence[TP], progress: Progress,
                 scope_of: Callable[[DdlEvent], DdlScope], index: RowIndex, stats: WindowStats) -> None:
        super().__init__(partitions, progress, scope_of=scope_of)
        self.topic = topic
        self.index = index
        self.stats = stats

    def read_to(self, partition: TP, next_offset: int) -> None:
        """Everything of `partition` before `next_offset` was read (rows included)."""
        self._next_offset[partition] = next_offset

    def _first_row_after(self, scope: DdlScope, ts: int, hi: int) -> int | None:
        return self.index.first_after(scope, ts, hi)

    def _row_restart_points(self) -> Iterable[tuple[TP, int, int]]:
        return ((TP(self.topic, p), off, wm) for p, off, wm in self.index.restart_points(self.applied_ts))

    def _rows_through(self, hi: int) -> dict[TableName, Rows]:
        lo = self.applied_ts
        return {t: RowSpan(lo, hi, self.index) for t in self.index.tables_in(lo, hi)}


class _BatchSource:
    """The control loop's view of the Kafka source in batch mode: every batch reads to the end
    offsets it was given, so it is caught up once read; partitions found while applying are read
    from their start by the next batch."""

    def __init__(self, kafka: KafkaSource, read_to: Callable[[], Mapping[TP, int]]) -> None:
        self.kafka = kafka
        self.name = kafka.name
        self.added: list[TP] = []
        self._read_to = read_to

    def partitions(self) -> list[TP]:
        return self.kafka.partitions()

    def start(self, positions: Mapping[TP, int | None]) -> None:
        self.kafka.start(positions)

    def poll(self) -> list[Record]:
        return []

    def caught_up(self) -> bool:
        return True

    def fresh_partitions(self) -> list[TP] | None:
        return self.kafka.fresh_partitions()

    def add_partitions(self, new: Sequence[TP]) -> bool:
        self.added.extend(new)
        return True

    def read_to_end(self, topics: Sequence[str], read_to: Mapping[TP, int]) -> bool | None:
        return True  # one topic: never quiet while it is the only one

    def commit(self, offsets: Mapping[TP, int]) -> None:
        self.kafka.commit(offsets)

    def lag(self) -> int | None:
        # Against where the batches read to, not the consumer's position: the consumer reads
        # nothing (Spark does), so it stays at the restart cursors of the last `start`.
        return self.kafka.lag(read_to=self._read_to())

    def partition_lags(self, read_to: Mapping[TP, int] | None = None) -> dict[TP, int] | None:
        # Where the batches read to: this loop's windower is a batch's own (see `lag`).
        return self.kafka.partition_lags(read_to=self._read_to())

    def close(self) -> None:
        self.kafka.close()


def _no_decode(rec: Record) -> list[Event]:
    raise AssertionError("the Spark reader decodes on the executors")


class BatchLoop(ControlLoop):
    """Runs batches until caught up (one batch, plus one per partition found meanwhile), a stop
    request (follow mode: a batch per flush interval with new records) or a failure."""

    def __init__(self, kafka: KafkaSource, topic: str, applier: Applier, progress: Progress, options: LoopOptions, *,
                 read: Callable[[Mapping[int, tuple[int, int]], Mapping[int, int], int], SparkBatch],
                 scope_of: Callable[[DdlEvent], DdlScope], invalid_text: InvalidText,
                 event_filter: EventFilter | None = None, on_tick: Callable[[], None] | None = None) -> None:
        self.stats = WindowStats()
        self._filter = event_filter  # rows are filtered on the executors; DDLs here
        self.scope_of = scope_of
        self.topic = topic
        self._source = _BatchSource(kafka, read_to=lambda: self.windower.next_offsets())
        self._read = read
        self._invalid_text = invalid_text
        partitions = list(progress.cursors)
        super().__init__(self._source, _no_decode, applier,
                         BatchWindower(topic, partitions, progress, scope_of, NoRows(), self.stats), options,
                         on_tick=on_tick)

    def run(self) -> None:
        opts = self.options
        last_end: dict[TP, int] | None = None
        down_since: float | None = None
        while True:
            started = time.monotonic()
            try:
                partitions, starts, ends = self._ranges()
            except KafkaSourceError as exc:
                # A follower rides out a broker outage for the retry budget, as the driver reader does.
                budget = self._source.kafka.settings.retry_budget_s
                down_since = down_since if down_since is not None else started
                if opts.until_caught_up or started - down_since >= budget:
                    raise
                log.warning("%s; retrying (broker unreachable for %.0fs of a %.0fs budget)", exc,
                            started - down_since, budget)
                self._sleep(opts.flush_interval_s)
                if self._stop:
                    return
                continue
            down_since = None
            if opts.until_caught_up or ends != last_end:
                self._apply_batch(partitions, starts, ends)
            last_end = dict(ends)
            self.on_tick()
            if self._stop or (opts.until_caught_up and not self._source.added):
                return
            self._sleep(opts.flush_interval_s - (time.monotonic() - started))

    def _sleep(self, seconds: float) -> None:
        while seconds > 0 and not self._stop:
            time.sleep(min(seconds, 0.2))
            seconds -= 0.2

    def _ranges(self) -> tuple[list[TP], dict[TP, int], dict[TP, int]]:
        """The partitions to read (the topic's, the known ones and those found while applying),
        where each starts (its restart cursor, else its earliest offset) and its end offset now."""
        kafka = self._source.kafka
        partitions = sorted(set(kafka.partitions()) | set(self.progress.cursors) | set(self._source.added))
        self._source.added = []
        cursors = self.progress.cursors
        kafka.start({p: (cursors[p].offset if p in cursors else None) for p in partitions})
        begins, ends = kafka.begin_offsets_at_start(), kafka.end_offsets_at_start()
        return partitions, {p: (cursors[p].offset if p in cursors else begins[p]) for p in partitions}, ends

    def _apply_batch(self, partitions: list[TP], starts: Mapping[TP, int], ends: Mapping[TP, int]) -> None:
        ranges = {p.partition: (starts[p], ends[p]) for p in partitions if starts[p] < ends.get(p, 0)}
        topic = self.topic
        windower = BatchWindower(topic, partitions, self.progress, self.scope_of, NoRows(), self.stats)
        self.windower = windower
        for p in partitions:
            windower.read_to(p, starts[p])
        if not ranges:
            self.apply_ready()
            return
        cursors = self.progress.cursors
        batch = self._read(ranges, {p: cursors[TP(topic, p)].watermark for p in ranges if TP(topic, p) in cursors},
                           self.progress.applied_ts)
        failure: DecodeError | ClaimCheckError | None = None
        t0 = time.monotonic()
        try:
            control = batch.control()
            t_read = time.monotonic()
            self.counts.records += control.records
            self.counts.events += control.decoded
            for key, n in control.invalid_text.items():
                self._invalid_text.add(*key)
                self._invalid_text.counts[key] += n - 1
            if self._filter is not None:
                self._filter.counts.rows.update(control.filtered)
            cut: dict[int, int] = {}
            for rec, reason, stop_text in sorted(control.dead, key=lambda d: (d[0].partition, d[0].offset)):
                if rec.partition in cut:
                    continue  # past the cut: read again by the rerun
                if reason.startswith(CLAIM_CHECK_REASON):
                    # a large message's row that is not in the message: stop, never dead-letter or skip it
                    cut[rec.partition] = rec.offset
                    if failure is None:
                        failure = ClaimCheckError(stop_text)
                    continue
                self._dead.append((rec, reason))
                self.counts.dead_letters += 1
                if self.options.on_error == "skip":
                    log.warning("dead-lettered topic %r partition %d offset %d: %s", rec.topic, rec.partition,
                                rec.offset, reason, extra={"position": position(rec.topic, rec.partition, rec.offset)})
                    continue
                cut[rec.partition] = rec.offset
                if failure is None:
                    failure = DecodeError(stop_text)
            batch.cut = cut
            for part, records in control.events.items():
                for offset, events in records:
                    if offset < cut.get(part, offset + 1):
                        windower.offer(TP(topic, part), offset,
                                       events if self._filter is None else self._filter.apply(events))
            batch.aggregate()
            kept = batch.drops.get(KEEP, 0)
            self.stats.rows += sum(batch.drops.values())
            self.stats.replays_dropped += batch.drops.get(REPLAY, 0)
            self.stats.already_applied += batch.drops.get(APPLIED, 0)
            for part, (_, end) in ranges.items():
                windower.read_to(TP(topic, part), cut.get(part, end))
            windower.index = batch
            t_agg = time.monotonic()
            self.apply_ready()
            log.info("batch of %d records (%d rows to apply, watermark %d): read and decoded in %.1f s, "
                     "aggregated in %.1f s, applied in %.1f s", control.records, kept, windower.watermark,
                     t_read - t0, t_agg - t_read, time.monotonic() - t_agg,
                     extra={"watermark": windower.watermark, "step": self.counts.steps,
                            "counts": {"records": control.records, "rows": kept}})
        finally:
            batch.close()
        if failure is not None:
            self.counts.error = str(failure)
            raise failure

