"""The engine's control loop: read, decode, window, decide when a step is due, apply, commit progress.

It knows its collaborators only by the Protocols below, so every path (caught up, step due,
a failure, waiting for new partitions, the retry budget) is unit-tested with a fake source, a
fake applier and a fake clock (tests/unit/test_loop.py). `replicator.engine.pipeline.Engine`
wires the real ones: a Kafka or archive source and the Delta applier.

Exactly once rests on the order kept here: a step is applied (idempotently) before progress
moves past it, dead letters are recorded before progress moves past their offsets, and progress
is persisted before the consumer group is told.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from replicator.engine.options import DEFAULT_FLUSH_INTERVAL_S, DEFAULT_MAX_BUFFER_ROWS
from replicator.engine.window import Step, Windower
from replicator.errors import ClaimCheckError, DdlError, DecodeError, ReplicatorError, UnsupportedError
from replicator.events import Event, Record, tso_from_ms, tso_physical_ms, where
from replicator.faults import fault_point
from replicator.logformat import event_level, position
from replicator.progress import TP, Progress
from replicator.sources.kafka import Source

log = logging.getLogger("replicator")

StepRecord = dict[str, Any]
Decode = Callable[[Record], list[Event]]


class Clock(Protocol):
    def monotonic(self) -> float: ...


class SystemClock:
    """The real clock (time.monotonic)."""

    def monotonic(self) -> float:
        return time.monotonic()


@runtime_checkable
class PartitionDiscovery(Protocol):
    """A source whose topics may gain partitions, or that may gain topics, mid-run (Kafka; an
    archive's set is fixed)."""

    def fresh_partitions(self) -> list[TP] | None:
        """The partitions per metadata fetched now; None while it cannot be fetched (the source
        bounds that wait by its retry budget and raises KafkaSourceError past it)."""

    def add_partitions(self, new: Sequence[TP]) -> bool:
        """Start reading new partitions from their start; False when the broker does not answer."""

    def read_to_end(self, topics: Sequence[str], read_to: Mapping[TP, int]) -> bool | None:
        """Whether `topics` were read to their end offsets of now; None: the broker did not answer."""


@runtime_checkable
class Backlog(Protocol):
    """A source that can tell, without asking the broker, that records it already knows of are
    still unread (Kafka: the high watermarks of its last fetches)."""

    def backlogged(self) -> bool:
        """True while some partition's position is behind its last known end."""


@runtime_checkable
class Pausable(Protocol):
    """A source whose reading the loop can steer (Kafka: pause/resume, the records of a poll), so
    a bounded buffer fills with rows a step can take (`ControlLoop.pace`)."""

    def pause_only(self, partitions: Collection[TP]) -> None:
        """Read nothing from `partitions` until called again; read every other partition."""

    def limit_poll(self, records: int) -> None:
        """Hand out at most `records` records a poll (never more than the source's own maximum)."""


class Applier(Protocol):
    """Where steps land (Delta tables) and where progress is persisted (the warehouse state)."""

    def apply(self, step: Step) -> StepRecord:
        """Apply one step durably and idempotently; the record logged for it (``step`` numbered)."""

    def dead_letter(self, dead: Sequence[tuple[Record, str]]) -> None:
        """Record messages that could not be decoded (before progress moves past them)."""

    def save_progress(self, progress: Progress, record: StepRecord | None) -> None:
        """Persist progress, with the record of the step it includes (None: cursors only)."""


# Backpressure starts once the buffer holds this share of --max-buffer-rows (`ControlLoop.pace`),
# and a poll hands out at most this share of it: rows above the watermark then stay within about
# twice this share, and a step forced by a full buffer applies the rest. Lower wastes less of a
# small buffer; higher pauses a large one less often (docs/windows.md#how-big-a-step-is).
PRESSURE = 0.1


@dataclass
class LoopOptions:
    until_caught_up: bool = False
    on_error: Literal["stop", "skip"] = "stop"
    max_buffer_rows: int = DEFAULT_MAX_BUFFER_ROWS
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S
    # Follow mode: interval steps end on a grid of this many ms of upstream (TSO) time, so that
    # shards reading one stream step at the same points (0: at the watermark; see `step_end`)
    step_grid_ms: int = 0
    # A full buffer moves what is complete to the windower's spill instead of applying it, until
    # this many rows are spilled (`ControlLoop.spill`; 0: it applies them, one step a full buffer)
    spill_rows: int = 0


@dataclass
class LoopCounts:
    """What the loop saw (the engine's run summary takes these)."""

    records: int = 0
    events: int = 0
    dead_letters: int = 0
    steps: int = 0
    watermark: int = 0
    error: str | None = None


class ControlLoop:
    """Runs until caught up (catch-up mode), a stop request (follow mode) or a failure.

    A catch-up run ends only when the source is caught up and every ready step was applied,
    including steps that waited for the topic's metadata. A step is due when the buffer is full,
    the flush interval passed (follow mode), the source is caught up, a stop was requested, or a
    failure stops the run (then what is complete is applied first, and nothing past the failure).
    """

    def __init__(self, source: Source, decode: Decode, applier: Applier, windower: Windower,
                 options: LoopOptions, *, clock: Clock | None = None,
                 on_tick: Callable[[], None] | None = None) -> None:
        self.source = source
        self.decode = decode
        self.applier = applier
        self.windower = windower
        self.options = options
        self.clock: Clock = clock or SystemClock()
        self.on_tick = on_tick or (lambda: None)
        self.counts = LoopCounts(watermark=windower.applied_ts)
        self._rows_per_record = 1  # the most events one record carried (Open Protocol batches rows)
        self._limit_poll()
        self._stop = False
        self._dead: list[tuple[Record, str]] = []
        self._grid_wm = -1  # the watermark at the last interval step (step_end)
        self._paused: frozenset[TP] = frozenset()  # what `pace` told the source to leave unread
        self._unpaced_at = -1  # the watermark at which `pace` gave up pausing (it resumes past it)

    @property
    def progress(self) -> Progress:
        return self.windower.progress

    def request_stop(self) -> None:
        """Finish the current step, commit and return (SIGINT/SIGTERM in follow mode)."""
        self._stop = True

    def run(self) -> None:
        opts, windower = self.options, self.windower
        last_apply = self.clock.monotonic()
        while True:
            failure: ReplicatorError | None = None
            records = self.source.poll()
            for rec in records:
                self.counts.records += 1
                try:
                    events = self.decode(rec)
                except ClaimCheckError as exc:
                    # A large message's row exists but cannot be read now: stop (what is complete
                    # before it is applied), never dead-letter or skip it, also with --on-error skip.
                    failure = exc
                    break
                except (DecodeError, UnsupportedError) as exc:
                    self._dead.append((rec, f"{type(exc).__name__}: {exc}"))
                    self.counts.dead_letters += 1
                    if opts.on_error == "skip":
                        log.warning("dead-lettered %s: %s", where(rec), exc,
                                    extra={"position": position(rec.topic, rec.partition, rec.offset),
                                           "error": type(exc).__name__})
                        windower.skip(TP(rec.topic, rec.partition), rec.offset)
                        continue
                    failure = exc if isinstance(exc, DecodeError) else DecodeError(str(exc))
                    if failure.position is None:
                        failure.at(where(rec))
                    break
                self.counts.events += len(events)
                if len(events) > self._rows_per_record:
                    self._rows_per_record = len(events)
                    self._limit_poll()
                windower.offer(TP(rec.topic, rec.partition), rec.offset, events)
                # Bound memory: spill or apply complete windows as soon as the buffer is full.
                if (windower.buffered_rows >= opts.max_buffer_rows and windower.has_ready_step()
                        and not self.spill()):
                    self.apply_ready()
                    last_apply = self.clock.monotonic()
            stalled = self.pace(read=bool(records))
            self.on_tick()
            now = self.clock.monotonic()
            caught_up = opts.until_caught_up and self.source.caught_up()
            urgent = (failure is not None or caught_up or self._stop or stalled
                      or (windower.buffered_rows >= opts.max_buffer_rows and not self.spill())
                      or 0 < opts.spill_rows <= windower.spilled_rows)
            interval = (not opts.until_caught_up and now - last_apply >= opts.flush_interval_s
                        and not (records and self._backlogged()))
            if urgent or interval:
                complete = self.apply_ready(before=None if urgent else self.step_end())
                last_apply = now
                self.pace(read=True)
                self.on_tick()
                # A partition found while applying must be read too before the run ends, and a
                # catch-up run whose ready steps wait for the topic's metadata goes on waiting.
                caught_up = caught_up and complete and self.source.caught_up()
            if failure is not None:
                self.counts.error = str(failure)
                raise failure
            if caught_up or self._stop:
                log.log(event_level(), "%s at watermark %d", "caught up" if caught_up else "stopped",
                        self.counts.watermark, extra={"watermark": self.counts.watermark,
                                                      "step": self.counts.steps, "caught_up": caught_up})
                return

    def spill(self) -> bool:
        """A full buffer: move its complete rows to the spill rather than apply them now, so the
        step that applies them (when one is due: caught up, the interval, a stop, a failure, or
        `spill_rows` spilled) carries the backlog, not one buffer of it. True when the spill has
        room and nothing a step could apply stays in memory; False: apply now. Never for a
        follower on a step grid (its steps end on the grid's lines) nor once a stop was asked for."""
        opts, windower = self.options, self.windower
        if opts.spill_rows <= 0 or self._stop or (opts.step_grid_ms > 0 and not opts.until_caught_up):
            return False
        if windower.spilled_rows >= opts.spill_rows:
            return False
        moved = windower.spill_ready()
        if moved:
            log.debug("spilled %d rows (%d in all), watermark %d", moved, windower.spilled_rows, windower.watermark)
        if windower.spilled_rows >= opts.spill_rows or windower.ready_in_memory:
            return False
        # Nothing ready is left in memory: a step now would free none of it (the rows above W
        # wait, and the bound is exceeded as without spilling), so the spilled rows wait too.
        return moved > 0 or windower.spilled_rows > 0

    def _limit_poll(self) -> None:
        """A poll's records, at most `PRESSURE` of the buffer in rows: one poll of partitions ahead
        of the watermark cannot fill a small buffer before they are paused."""
        if isinstance(self.source, Pausable):
            rows = self.options.max_buffer_rows * PRESSURE
            self.source.limit_poll(max(1, int(rows / self._rows_per_record)))

    def pace(self, *, read: bool) -> bool:
        """Backpressure: once the buffer holds `PRESSURE` of its bound, pause the partitions ahead
        of the global watermark W and read the others, which hold W back; resume them as W
        reaches them or the buffer empties. Without it a full buffer holds rows above W (a hot or
        fast partition read far ahead, skew) and each step forced by it applies one window.

        `read`: the last poll handed out records. When it did not while partitions were paused,
        the partitions at W have nothing more for now: True (apply now) when a step is ready, as
        a full buffer would; else every partition is read again (W cannot move by reading, and a
        catch-up must reach every partition's end) until W moves. Returns whether to apply now.
        """
        source, windower = self.source, self.windower
        if not isinstance(source, Pausable):
            return False
        stalled = bool(self._paused) and not read
        if stalled and windower.has_ready_step() and not self.spill():
            return True
        wm = windower.watermark
        if stalled:
            self._unpaced_at = wm
        pressed = windower.buffered_rows >= self.options.max_buffer_rows * PRESSURE and wm > self._unpaced_at
        want = windower.ahead_partitions() if pressed else frozenset()
        if want or self._paused:  # also after partitions were added (assigning may resume them)
            if want != self._paused:
                log.debug("pacing: %d rows buffered, watermark %d: reading only %s", windower.buffered_rows, wm,
                          ", ".join(str(p) for p in windower.partitions if p not in want))
            source.pause_only(want)
            self._paused = want
        return False

    def _backlogged(self) -> bool:
        """Whether a follower should read on before its interval step: records that arrived while
        the last step was applied are still unread. Applying after one poll of them would make a
        step that covers less time than it takes, so a follower behind by one slow step would
        fall further behind for good; reading them first makes the next step cover the whole
        time since the last one. Only while polls return records (a broker gone away leaves a
        stale high watermark) and within the buffer bound."""
        source = self.source
        return isinstance(source, Backlog) and source.backlogged()

    def step_end(self) -> int | None:
        """Where an interval step of a follower ends: None (at the watermark), or with
        `step_grid_ms`, the `before` of the last grid line of upstream time at or below it.

        Shards follow one stream with their own clocks, so the watermarks they step at differ,
        and a sharded warehouse is consistent only at points every shard stepped at
        (delta/shardview.py). Grid lines are the same for all of them: each steps at the latest
        line it has passed, so shards that keep up step at the same lines. When the watermark has
        not moved for a whole interval (the upstream is idle or paused), the step goes to it:
        every shard then waits at that same watermark, and the rows below it are not held back.
        """
        grid = self.options.step_grid_ms
        if grid <= 0:
            return None
        wm = self.windower.watermark
        if wm == self._grid_wm:
            return None
        self._grid_wm = wm
        return tso_from_ms(tso_physical_ms(wm) // grid * grid) + 1

    def apply_ready(self, before: int | None = None) -> bool:
        """Apply every ready step (with `before`, only what is below it); False when they wait for
        the topic's partitions (no metadata)."""
        if self._dead:
            self.applier.dead_letter(self._dead)
            self._dead = []
            fault_point("after_dead_letters")
        windower = self.windower
        if windower.has_ready_step() and not self.partitions_known():
            return False
        while (step := windower.next_step(before=before)) is not None:
            try:
                record = self.applier.apply(step)
            except DdlError as exc:
                # A DDL of the step failed: apply (idempotently) and commit what precedes it, so
                # the stopped run leaves every table as of just before that DDL.
                prefix = windower.next_step(before=exc.commit_ts) if exc.commit_ts is not None else None
                if prefix is not None:
                    self._apply_done(prefix, self.applier.apply(prefix))
                raise
            self._apply_done(step, record)
        if not self.options.until_caught_up or self.source.caught_up():
            # Persist cursors even when no step was due (e.g. only replays or skipped dead letters).
            self._commit(None)
        return True

    def _apply_done(self, step: Step, record: StepRecord) -> None:
        fault_point("before_progress")
        self.windower.commit(step)
        self._commit(record)

    def partitions_known(self) -> bool:
        """Whether every partition of every followed topic is being read, checked against fresh
        metadata, and every quiet topic was read to its end.

        Why before every advance of the watermark: TiCDC writes a resolved ts R to a partition only
        after every row <= R reached every partition it writes to. A partition added to the topic
        (and used after a changefeed restart) may thus hold rows <= R while we have only read R on
        the old ones; applying up to R first would drop those rows as "already applied". Metadata
        fetched after R was read lists such a partition: it is then read from its start and the
        watermark waits for its first resolved event (Windower.add_partition). The same holds for a
        topic created meanwhile (TiCDC creates a table's topic with its table). A quiet topic (its
        tables dropped: no watermarks come) does not hold the window back, so whatever is on it now
        must be read first: a row there below R, or the DDL that brings its table back. False (do
        not apply now) when the metadata cannot be fetched or a quiet topic has unread records.
        """
        source = self.source
        if not isinstance(source, PartitionDiscovery):  # a finite source: all partitions known at start
            return True
        parts = source.fresh_partitions()
        if parts is None:  # the source logs the wait once and bounds it by its retry budget
            return False
        known = set(self.windower.partitions)
        new = sorted(set(parts) - known)
        if new:
            if not source.add_partitions(new):
                return False
            topics = {p.topic for p in known}
            for p in new:
                self.windower.add_partition(p)
            fresh = sorted({p.topic for p in new} - topics)
            if fresh:
                log.info("new topic(s) %s: reading them from their start; applying waits for their first resolved "
                         "event", ", ".join(fresh), extra={"topics": fresh})
            grown = [str(p) for p in new if p.topic in topics]
            if grown:
                log.warning("new partition(s) %s: reading them from their start; applying waits for their first "
                            "resolved event", ", ".join(grown), extra={"partitions": grown})
        quiet = self.windower.excluded_topics()
        return not quiet or bool(source.read_to_end(quiet, self.windower.next_offsets()))

    def _commit(self, record: StepRecord | None) -> None:
        changed = self.windower.checkpoint()
        if record is None and not changed:
            return
        progress = self.progress
        if record is not None:
            record["applied_ts"] = progress.applied_ts
            self.counts.steps += 1
        self.applier.save_progress(progress, record)
        fault_point("after_progress")
        self.counts.watermark = progress.applied_ts
        offsets = progress.offsets()
        if record is not None:
            _log_step(record, offsets)
        self.source.commit(offsets)


def _log_step(record: StepRecord, offsets: dict[TP, int]) -> None:
    """The step-applied line: INFO in JSON logs, DEBUG (-v) in human ones (logformat.event_level)."""
    level = event_level()
    if not log.isEnabledFor(level):
        return
    tables = [t for t in record.get("tables", {}).values() if isinstance(t, dict)]
    counts = {f"{t.get('schema')}.{t.get('table')}": {"upserts": t.get("upserts", 0), "deletes": t.get("deletes", 0)}
              for t in tables}
    log.log(level, "step %s applied (%s): watermark %s, %d table(s)", record.get("step"), record.get("kind", "window"),
            record.get("applied_ts"), len(counts),
            extra={"step": record.get("step"), "kind": record.get("kind"), "watermark": record.get("applied_ts"),
                   "table": next(iter(counts)) if len(counts) == 1 else None, "counts": counts,
                   "positions": [position(p.topic, p.partition, o) for p, o in sorted(offsets.items())]})

