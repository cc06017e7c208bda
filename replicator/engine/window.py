"""Resolved-ts windowing: which row changes and DDLs are complete, in what order to apply them,
and where to restart after a crash. Pure logic (no Spark, no Kafka), property-tested.

Semantics (the ordering TiCDC guarantees; docs/how-it-works.md, docs/windows.md):
- Everything is keyed by (topic, partition): one replicator may follow many topics (TiCDC's
  topic-per-table dispatch plus its default topic).
- Partition watermark = highest resolved ts seen on that partition (never moves back).
  Global watermark W = min over every partition of every active topic (0 until each of them has
  a resolved event). A topic whose tables were all dropped (DROP TABLE / DROP DATABASE) or
  renamed away is *quiet* from that DDL's commit ts on: TiCDC broadcasts watermarks only to the
  topics of live tables (and the default topic), so it would hold W back forever. A row or DDL
  with a later commit ts on it makes it active again. The loop makes this safe: before applying,
  it checks that every quiet topic was read to its end (ControlLoop.partitions_known).
- A row whose commit ts is <= its partition's watermark when it arrives is a replay: dropped, counted.
  A row whose commit ts is <= the warehouse's applied watermark is already applied: skipped, counted.
- DDLs are broadcast to every partition (canal-json: sent to partition 0 only); applied once (dedupe
  by commit ts + query) when W >= ts, after every buffered row with commit ts <= ts and before any
  later row. A DDL on one partition only is still a barrier for every partition: W >= ts needs that
  partition's watermark past ts, which TiCDC sends only after the DDL.
- Restart: each partition restarts at the oldest offset still holding an unapplied event, with the
  partition watermark as it was before that offset, so re-reading reproduces every decision.
- Spill (`Windower.spill_ready`): complete rows may leave memory for a `Spill` on disk; the next
  step takes them as spans (split at its DDLs like the Spark reader's), and until they are
  applied their offsets hold the restart cursors back (docs/windows.md#memory).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from replicator.engine.rows import Rows, RowSpan, Spill, count_on_driver
from replicator.errors import DdlError
from replicator.events import DdlCode, DdlEvent, Event, Resolved, RowChange
from replicator.mysql.statements import parse_renames
from replicator.progress import TP, Cursor, Progress
from replicator.tables import EVERYTHING, DdlScope, TableName

__all__ = ["TP", "Cursor", "Progress", "Step", "WindowStats", "Windower", "tables_gone"]


def tables_gone(ddl: DdlEvent, known: Iterable[TableName]) -> set[TableName]:
    """The tables a DDL takes away from their topics: dropped, renamed away (the new name has its
    own topic), or in a dropped schema (of `known`). Pure."""
    if ddl.ddl_type == DdlCode.DROP_TABLE:
        return {(ddl.schema, ddl.table)}
    if ddl.ddl_type == DdlCode.DROP_SCHEMA:
        return {t for t in known if t[0] == ddl.schema}
    if ddl.ddl_type == DdlCode.RENAME_TABLE:
        try:
            pairs = parse_renames(ddl.query)
        except DdlError:
            return set()
        return {(old[0] or ddl.schema, old[1]) for old, _new in pairs}
    return set()


@dataclass(slots=True)
class _Buffered:
    seq: int
    row: RowChange
    partition: TP
    offset: int
    wm_before: int


@dataclass(slots=True)
class _PendingDdl:
    seq: int
    ddl: DdlEvent
    copies: dict[TP, tuple[int, int]]  # partition -> (offset, wm_before) of its first copy
    scope: DdlScope


@dataclass(frozen=True)
class Step:
    """Everything complete up to the watermark `hi`: the buffered rows with commit ts <= hi, per table
    in (commit ts, arrival) order, and the DDLs with commit ts <= hi in (commit ts, arrival) order.

    Each DDL is a barrier only for the tables it affects (its scope, engine/plan.py): the rows of
    every other table flow past it in the same step. A DDL that changes a table's columns or rows
    (ADD/DROP/MODIFY COLUMN, TRUNCATE, partition deletes) also ends the step right before the
    first row that follows it on one of its tables: a DDL re-applied after a crash inside its step
    (check-before-alter) then finds no row applied after it, as when it was a step of its own.
    Catalog-only DDLs (CREATE, RENAME, DROP TABLE, ...) re-run harmlessly, so rows after them
    share their step.
    """

    hi: int
    rows: Mapping[TableName, Rows]
    ddls: tuple[DdlEvent, ...] = ()

    @property
    def count(self) -> int:
        """Rows held in memory (a span's rows are counted where they are)."""
        return sum(count_on_driver(v) for v in self.rows.values())


@dataclass
class WindowStats:
    rows: int = 0
    replays_dropped: int = 0
    already_applied: int = 0
    ddl_events: int = 0
    ddl_duplicates: int = 0
    resolved: int = 0


class Windower:
    """Buffers decoded events per partition and hands out complete steps in apply order.

    It updates `progress` (the one progress object, persisted by the warehouse): `commit` moves
    the applied watermark and the DDL ledger, `checkpoint` the restart cursors.
    """

    def __init__(self, partitions: Sequence[TP], progress: Progress | None = None,
                 scope_of: Callable[[DdlEvent], DdlScope] | None = None, spill: Spill | None = None) -> None:
        self.partitions: Sequence[TP] = list(partitions)
        # Which tables a DDL holds back (delta/ddl/scope.py); by default every table.
        self.scope_of: Callable[[DdlEvent], DdlScope] = scope_of or (lambda _ddl: EVERYTHING)
        self.progress = progress if progress is not None else Progress()
        self.stats = WindowStats()
        self._wm: dict[TP, int] = {}
        self._seen_resolved: set[TP] = set()
        self._next_offset: dict[TP, int] = {}
        # Tables seen per topic (rows and DDLs): a topic goes quiet once none of them is left.
        self._topic_tables: dict[str, set[TableName]] = {}
        self._counted: list[TP] | None = None  # the partitions W is the minimum over (cache)
        for p in self.partitions:
            self._add_partition(p)
        self._rows: dict[TableName, list[_Buffered]] = {}
        self._ddls: dict[tuple[int, str], _PendingDdl] = {}
        self._seq = 0
        self._buffered = 0
        self.spill = spill
        self._spill_hi = 0  # every row in (applied_ts, _spill_hi] is spilled, none above it
        self._spill_topic: dict[TableName, str] = {}  # the one topic each spilled table's rows came from
        self._spill_ts: dict[TableName, list[int]] = {}  # each spilled table's commit ts not yet applied, in order
        self._spill_points: dict[TP, tuple[int, int]] = {}  # per partition: its oldest spilled row's cursor
        self.ready_in_memory = False  # after `spill_ready`: something a step could apply stayed in memory

    @property
    def applied_ts(self) -> int:
        return self.progress.applied_ts

    @property
    def ddl_ledger(self) -> set[tuple[int, str]]:
        return self.progress.ddl_ledger

    @property
    def quiet_topics(self) -> dict[str, int]:
        """Topics that do not hold the window back (their tables are gone), with the DDL's ts."""
        return self.progress.quiet_topics

    def topics(self) -> list[str]:
        return sorted({p.topic for p in self._wm})

    def excluded_topics(self) -> list[str]:
        """Quiet topics the window is not waiting for now: they must be read to their end before a
        step is applied (a record behind their last read one may be a row below the watermark)."""
        counted = self._counted_partitions()
        if not counted or len(counted) == len(self._wm):
            return []
        return sorted({p.topic for p in self._wm} - {p.topic for p in counted})

    def _add_partition(self, p: TP) -> None:
        self._counted = None
        c = self.progress.cursors.get(p)
        self._wm[p] = c.watermark if c else 0
        if c and c.watermark > 0:
            self._seen_resolved.add(p)
        self._next_offset[p] = c.offset if c else 0

    def add_partition(self, p: TP) -> None:
        """A partition (of a known topic or a new one) found mid-stream: watermark 0 until its
        first resolved event."""
        if p not in self._wm:
            self.partitions = [*self.partitions, p]
            self._add_partition(p)

    def retire(self, p: TP) -> None:
        """A partition that ended with every event of it applied (a storage-sink stream read to its
        end): it no longer holds the window back, and its cursor (and, when it was its topic's
        last, the topic's quiet mark) leaves the progress at the next checkpoint."""
        if p not in self._wm:
            return
        self.partitions = [q for q in self.partitions if q != p]
        del self._wm[p]
        self._seen_resolved.discard(p)
        self._next_offset.pop(p, None)
        self._counted = None
        if not any(q.topic == p.topic for q in self._wm):
            self.progress.quiet_topics.pop(p.topic, None)
            self._topic_tables.pop(p.topic, None)

    # -- intake ------------------------------------------------------------------------------
    def offer(self, partition: TP, offset: int, events: Iterable[Event]) -> None:
        """Take the decoded events of one record (all events of a record share its offset)."""
        wm_before = self._wm[partition]
        quiet = self.progress.quiet_topics
        for ev in events:
            if quiet and not isinstance(ev, Resolved) and partition.topic in quiet:
                ts = ev.commit_ts
                if ts > quiet[partition.topic]:  # a table of it is back (CREATE, RECOVER, rows)
                    del quiet[partition.topic]
                    self._counted = None
            if isinstance(ev, Resolved):
                self.stats.resolved += 1
                self._seen_resolved.add(partition)
                if ev.ts > self._wm[partition]:
                    self._wm[partition] = ev.ts
            elif isinstance(ev, RowChange):
                self.stats.rows += 1
                if ev.commit_ts <= self._wm[partition]:
                    self.stats.replays_dropped += 1
                elif ev.commit_ts <= self.applied_ts:
                    self.stats.already_applied += 1
                else:
                    self._seq += 1
                    name = (ev.schema, ev.table)
                    self._topic_tables.setdefault(partition.topic, set()).add(name)
                    buf = self._rows.setdefault(name, [])
                    buf.append(_Buffered(self._seq, ev, partition, offset, wm_before))
                    self._buffered += 1
            else:
                self._offer_ddl(ev, partition, offset, wm_before)
        self._next_offset[partition] = offset + 1

    def skip(self, partition: TP, offset: int) -> None:
        """Record a message consumed without events (e.g. dead-lettered with --on-error skip)."""
        self._next_offset[partition] = offset + 1

    def _offer_ddl(self, ddl: DdlEvent, partition: TP, offset: int, wm_before: int) -> None:
        self.stats.ddl_events += 1
        self._note_tables(ddl, partition.topic)
        key = (ddl.commit_ts, ddl.query)
        if ddl.commit_ts < self.applied_ts or key in self.ddl_ledger or not ddl.query.strip():
            self.stats.ddl_duplicates += 1
            return
        pending = self._ddls.get(key)
        if pending is None:
            self._seq += 1
            self._ddls[key] = _PendingDdl(self._seq, ddl, {partition: (offset, wm_before)}, self.scope_of(ddl))
        else:
            self.stats.ddl_duplicates += 1
            pending.copies.setdefault(partition, (offset, wm_before))

    def _note_tables(self, ddl: DdlEvent, topic: str) -> None:
        """Which tables each topic carries, and which topics a DDL leaves without any (quiet)."""
        if ddl.table and ddl.ddl_type != DdlCode.RENAME_TABLE:  # a RENAME's name may be the new one (its own topic)
            self._topic_tables.setdefault(topic, set()).add((ddl.schema, ddl.table))
        gone = tables_gone(ddl, {t for ts in self._topic_tables.values() for t in ts})
        if not gone:
            return
        for t, tables in self._topic_tables.items():
            if tables & gone:
                tables -= gone
                if not tables and self.progress.quiet_topics.get(t, -1) < ddl.commit_ts:
                    self.progress.quiet_topics[t] = ddl.commit_ts
                    self._counted = None

    # -- watermarks --------------------------------------------------------------------------
    def _counted_partitions(self) -> list[TP]:
        if self._counted is None:
            quiet = self.progress.quiet_topics
            self._counted = [p for p in self._wm if p.topic not in quiet]
        return self._counted

    @property
    def watermark(self) -> int:
        """Global watermark W: min watermark over the partitions of the active (not quiet) topics;
        0 until each of them has resolved."""
        wm, seen = self._wm, self._seen_resolved
        counted = self._counted_partitions()
        if len(counted) == len(wm) or not counted:  # every topic quiet: they all count again
            if not wm or len(seen) < len(wm):
                return 0
            return min(wm.values())
        if not seen.issuperset(counted):
            return 0
        return min(wm[p] for p in counted)

    def partition_watermarks(self) -> dict[TP, int]:
        return dict(self._wm)

    def ahead_partitions(self) -> frozenset[TP]:
        """The partitions W waits for no longer: counted ones whose watermark is past W. What they
        hold next lies above their watermark, so above W: reading them only fills the buffer with
        rows no step can take yet, while reading the others (at W) moves W. Quiet topics are never
        ahead: the loop must read them to their end before it applies (`excluded_topics`)."""
        w = self.watermark
        counted = self._counted_partitions() or list(self._wm)
        return frozenset(p for p in counted if self._wm[p] > w)

    @property
    def buffered_rows(self) -> int:
        """Rows in memory (not those spilled)."""
        return self._buffered

    def unapplied_ddls(self) -> list[DdlEvent]:
        """The DDLs read and not applied yet, in (commit ts, arrival) order."""
        return [p.ddl for p in sorted(self._ddls.values(), key=lambda p: (p.ddl.commit_ts, p.seq))]

    @property
    def spilled_rows(self) -> int:
        return self.spill.rows if self.spill is not None and self._spill_topic else 0

    def spill_ready(self) -> int:
        """Move the complete rows (at or below W) out of memory to the spill. DDLs pending among
        them stay here: a step's spans are split at them as the Spark reader's are (engine/plan.py),
        and `_first_row_after` sees the spilled rows too. A table whose rows came from more than one
        topic (a spill is kept per topic) ends the spill before its first row from the other one,
        and `ready_in_memory` then says a step must apply what stayed. Returns how many rows moved;
        cheap when W has not moved since the last call (nothing newly complete)."""
        spill = self.spill
        self.ready_in_memory = False
        if spill is None:
            return 0
        hi = self.watermark
        lo = max(self.applied_ts, self._spill_hi)
        if hi <= lo:
            return 0
        ready: dict[TableName, list[_Buffered]] = {}
        for table, buf in self._rows.items():
            sel = [b for b in buf if b.row.commit_ts <= hi]
            if not sel:
                continue
            sel.sort(key=lambda b: (b.row.commit_ts, b.seq))
            topic = self._spill_topic.get(table) or sel[0].partition.topic
            other = [b.row.commit_ts for b in sel if b.partition.topic != topic]
            if other:
                hi = min(hi, min(other) - 1)
                self.ready_in_memory = True
            ready[table] = sel
        if hi <= lo:
            return 0
        moved = 0
        ddls = self.unapplied_ddls()
        for table, sel in ready.items():
            take = [b for b in sel if b.row.commit_ts <= hi]
            if not take:
                continue
            topic = take[0].partition.topic
            spill.write(table, topic, [(b.row, b.partition.partition, b.offset, b.wm_before) for b in take], ddls)
            self._spill_topic[table] = topic
            stamps = self._spill_ts.setdefault(table, [])
            for b in take:
                if not stamps or stamps[-1] != b.row.commit_ts:
                    stamps.append(b.row.commit_ts)
                cur = self._spill_points.get(b.partition)
                if cur is None or b.offset < cur[0]:
                    self._spill_points[b.partition] = (b.offset, b.wm_before)
            keep = [b for b in self._rows[table] if b.row.commit_ts > hi]
            moved += len(self._rows[table]) - len(keep)
            if keep:
                self._rows[table] = keep
            else:
                del self._rows[table]
        self._buffered -= moved
        self._spill_hi = hi
        return moved

    def has_ready_step(self) -> bool:
        """Cheap check (no batch building): would `next_step()` return a step now?"""
        w = self.watermark
        if w > self.applied_ts:
            return True
        return any(d.ddl.commit_ts <= w for d in self._ddls.values())

    @property
    def pending_ddls(self) -> int:
        return len(self._ddls)

    # -- output ------------------------------------------------------------------------------
    def next_step(self, before: int | None = None) -> Step | None:
        """The next complete step, or None. Call `commit(step)` once it is durably applied.

        Everything up to the watermark, except that the step ends right before the first row of a
        table that follows a DDL on that table (see `Step`); with `before`, also before that commit
        ts (what precedes a DDL that failed). Spilled rows come as spans, with what became
        complete since (`spill_ready`); the step ends before a spilled table's first row still in
        memory (a table's rows in a step are all spilled or all in memory).
        """
        spilled = bool(self._spill_topic) and self._spill_hi > self.applied_ts
        hi = max(self.watermark, self.applied_ts)
        if spilled:
            self.spill_ready()  # what became complete since: the same step
            firsts = [b.row.commit_ts for t in self._spill_topic for b in self._rows.get(t, ())]
            if firsts:
                hi = min(hi, min(firsts) - 1)  # above the spill's end: they were not complete then
        if before is not None:
            hi = min(hi, before - 1)
            if hi <= self.applied_ts:
                return None
        ddls: list[DdlEvent] = []
        for d in sorted(self._ddls.values(), key=lambda d: (d.ddl.commit_ts, d.seq)):
            ts = d.ddl.commit_ts
            if ts > hi:
                break
            ddls.append(d.ddl)
            if d.scope.rerunnable:
                continue
            after = self._first_row_after(d.scope, ts, hi)
            if after is not None:
                hi = after - 1
        if hi <= self.applied_ts and not ddls:
            return None
        rows = self._rows_through(hi)
        if spilled:
            assert self.spill is not None
            spill, lo = self.spill, self.applied_ts
            top = min(hi, self._spill_hi)
            # a table's stamps are those above the applied watermark (`commit` drops the others); its
            # span starts at its first, so no DDL before it (its CREATE) cuts off an empty segment
            # that a Spark job would then find empty
            rows.update({t: RowSpan(max(lo, stamps[0] - 1), top, spill.source(t))
                         for t, stamps in self._spill_ts.items() if stamps and stamps[0] <= top})
        return Step(hi, rows, tuple(ddls))

    def _first_row_after(self, scope: DdlScope, ts: int, hi: int) -> int | None:
        """The lowest commit ts in (ts, hi] of a buffered or spilled row of a table in `scope`
        (None: none)."""
        after = [b.row.commit_ts for table, buf in self._rows.items() if scope.covers(table)
                 for b in buf if ts < b.row.commit_ts <= hi]
        for table, stamps in self._spill_ts.items():
            i = bisect_right(stamps, ts)
            if i < len(stamps) and stamps[i] <= hi and scope.covers(table):
                after.append(stamps[i])
        return min(after) if after else None

    def _row_restart_points(self) -> Iterable[tuple[TP, int, int]]:
        """(partition, offset, watermark before it) of every buffered row."""
        for buf in self._rows.values():
            for b in buf:
                yield b.partition, b.offset, b.wm_before

    def _rows_through(self, hi: int) -> dict[TableName, Rows]:
        """Each table's buffered rows at or below `hi`, in commit order: the rows of a step to `hi`."""
        rows: dict[TableName, Rows] = {}
        for table, buf in self._rows.items():
            sel = [b for b in buf if b.row.commit_ts <= hi]
            if sel:
                sel.sort(key=lambda b: (b.row.commit_ts, b.seq))
                rows[table] = [b.row for b in sel]
        return rows

    def commit(self, step: Step) -> None:
        """Forget what `step` applied and advance the applied watermark (and the DDL ledger)."""
        for table in list(self._rows):
            keep = [b for b in self._rows[table] if b.row.commit_ts > step.hi]
            self._buffered -= len(self._rows[table]) - len(keep)
            if keep:
                self._rows[table] = keep
            else:
                del self._rows[table]
        keys = [(d.commit_ts, d.query) for d in step.ddls]
        for key in keys:
            self._ddls.pop(key, None)
        if self._spill_topic and step.hi >= self._spill_hi:
            assert self.spill is not None
            self.spill.clear()
            self._spill_topic.clear()
            self._spill_ts.clear()
            self._spill_points.clear()
        else:  # some spilled rows remain: their files and restart cursors stay until they are applied
            for stamps in self._spill_ts.values():
                del stamps[:bisect_right(stamps, step.hi)]
        self._advance(step.hi)
        # A DDL at the new watermark itself may still arrive on another partition: the ledger tells.
        self.progress.ddl_ledger.update(k for k in keys if k[0] >= self.progress.applied_ts)

    def _advance(self, ts: int) -> None:
        """Move the applied watermark to ts; the ledger keeps only DDLs it cannot yet tell apart."""
        prog = self.progress
        if ts > prog.applied_ts:
            prog.ddl_ledger = {k for k in prog.ddl_ledger if k[0] >= ts}
            prog.applied_ts = ts

    def checkpoint(self) -> bool:
        """Record the current restart cursors in `progress`; True if they changed."""
        cursors = self.restart_cursors()
        if cursors == self.progress.cursors and list(cursors) == list(self.progress.cursors):
            return False
        self.progress.cursors = cursors
        return True

    def restart_cursors(self) -> dict[TP, Cursor]:
        """Per partition: the oldest offset holding an unapplied event (with the watermark before it)."""
        best: dict[TP, tuple[int, int]] = {}

        def consider(p: TP, off: int, wm: int) -> None:
            cur = best.get(p)
            if cur is None or off < cur[0]:
                best[p] = (off, wm)

        for p, off, wm in self._row_restart_points():
            consider(p, off, wm)
        for p, (off, wm) in self._spill_points.items():
            consider(p, off, wm)
        for pending in self._ddls.values():
            for p, (off, wm) in pending.copies.items():
                consider(p, off, wm)
        out: dict[TP, Cursor] = {}
        for p in self._wm:
            if p in best:
                out[p] = Cursor(*best[p])
            else:
                out[p] = Cursor(self._next_offset[p], self._wm[p])
        return out

    def next_offsets(self) -> dict[TP, int]:
        """Next offset to read per partition (the consumer's position as the windower saw it)."""
        return dict(self._next_offset)
