"""One segment's write: a step's rows of one table, resolved against the catalog, into its Delta
table: appended when they are fresh inserts, else merged (delta/writer.py).

Fresh inserts: a key whose first change in the segment is an INSERT was absent from the table,
which holds upstream as of the segment's start. Only an INSERT the stream vouches for counts:
canal-json and Simple name the operation; the Open Protocol and Craft write an update without old
values exactly like an insert, so theirs count once the stream has shown an update with its
pre-image (`inserts`: "proof"), or always with `--fresh-inserts append` ("forced").

A stream may still send an upsert of a key the table holds as an INSERT (hand-built or foreign
producers do). `WrittenKeys` remembers the keys this run wrote per table: a fresh-looking key among
them sends the step to MERGE. A DDL that empties a table (TRUNCATE, TRUNCATE PARTITION ALL) makes
it forget that table's keys when it is applied (engine/ddlstep.py): what was written before is
gone, so the same keys inserted again are appended. A table's keys follow its uid, which RENAME,
DROP and RECOVER keep (a recovered table has its rows back) and a new CREATE never reuses. The
Spark reader's keys stay on the executors, so it appends only when told to ("forced"). Rows a
full buffer spilled (`vouched` spans) are appended as driver rows are: the spill's index holds
their keys' hashes (sources/spill_index.py), checked and added like driver keys; a span read from
the events has none, so it is appended only into a table this run has not written yet, which is
not tracked after it (`claim`)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from replicator.changes import Change, all_fresh, collapse
from replicator.engine.plan import Segment
from replicator.engine.rows import after, count_on_driver, on_driver, span_changes, span_summary, vouched
from replicator.engine.spark_edge import SparkEdge
from replicator.errors import SchemaError
from replicator.events import Op, RowChange
from replicator.faults import fault_point, fault_timer
from replicator.metrics import Metrics
from replicator.warehouse import TableEntry

if TYPE_CHECKING:
    from replicator.delta.writer import MergeResult
    from replicator.tables import TableSpec


@dataclass(frozen=True)
class Job:
    """A segment ready to MERGE: resolved against the catalog on the scheduling thread."""

    segment: Segment
    entry: TableEntry | None  # None: a row span that turned out empty (nothing to apply)
    spec: TableSpec | None
    step: int
    # how its INSERTs count (module doc): "forced" (--fresh-inserts append), "trusted", "proof"
    # (once the rows show a pre-image), or "off" (never appended: --fresh-inserts merge, or the
    # warehouse skipped a dead letter)
    inserts: str = "off"


class WrittenKeys:
    """Hashes of the keys this run wrote, per table and key columns (module doc). A table whose
    key columns changed (DROP / ADD PRIMARY KEY) cannot be told apart by them any more, and one
    that overflows `limit` keys in all is no longer tracked: neither is appended to this run, until
    a TRUNCATE empties it (`reset`)."""

    def __init__(self, limit: int = 2_000_000) -> None:
        self.limit = limit
        self._keys: dict[str, tuple[tuple[str, ...], set[int]]] = {}
        self._untracked: set[str] = set()
        self._total = 0
        self._lock = threading.Lock()

    def may_append(self, uid: str, key: Sequence[str], changes: Sequence[Change]) -> bool:
        return self.may_append_hashes(uid, key, [hash(c.key) for c in changes])

    def may_append_hashes(self, uid: str, key: Sequence[str], hashes: Iterable[int]) -> bool:
        """No key of `hashes` (`hash(Change.key)`) was written by this run into the table."""
        with self._lock:
            if uid in self._untracked:
                return False
            known = self._keys.get(uid)
            if known is None:
                return True
            if known[0] != tuple(key):
                return False
            return known[1].isdisjoint(hashes)

    def add(self, uid: str, key: Sequence[str], changes: Sequence[Change]) -> None:
        self.add_hashes(uid, key, [hash(c.key) for c in changes])

    def add_hashes(self, uid: str, key: Sequence[str], hashes: Iterable[int]) -> None:
        with self._lock:
            if uid in self._untracked:
                return
            names, seen = self._keys.setdefault(uid, (tuple(key), set()))
            if names != tuple(key):
                self._forget(uid)
                return
            before = len(seen)
            seen.update(hashes)
            self._total += len(seen) - before
            if self._total > self.limit:
                self._forget(uid)

    def claim(self, uid: str) -> bool:
        """A write of keys nobody collects (a spilled span): True when this run wrote none of the
        table's keys before, so its fresh inserts may be appended; either way the table is not
        tracked after it (its later fresh-looking keys are merged), until a `reset`."""
        with self._lock:
            fresh = uid not in self._untracked and uid not in self._keys
            if uid in self._keys:
                self._forget(uid)
            self._untracked.add(uid)
            return fresh

    def reset(self, uid: str) -> None:
        """The table was emptied (TRUNCATE): tracked again with no key, so its next fresh inserts
        are appended. Also when it was untracked: its key columns changed or it overflowed, but
        the keys that made it so are gone with its rows, and its new ones count against `limit`
        again (past it, it is untracked again)."""
        with self._lock:
            self._untracked.discard(uid)
            known = self._keys.pop(uid, None)
            if known is not None:
                self._total -= len(known[1])

    def _forget(self, uid: str) -> None:
        self._total -= len(self._keys.pop(uid)[1])
        self._untracked.add(uid)


class SegmentMerger:
    """Runs `Job`s, each on the calling thread's own Spark session (a pool worker's), counting the
    MERGEs in flight (the `tables_in_flight` fault instant)."""

    def __init__(self, edge: SparkEdge, metrics: Metrics) -> None:
        self.edge = edge
        self.metrics = metrics
        self._running = 0
        self._lock = threading.Lock()
        self.written = WrittenKeys()

    def merge(self, job: Job) -> tuple[Job, MergeResult]:
        """One segment's MERGE, on the calling thread's own Spark session (a pool worker's)."""
        schema, table = job.segment.table
        with self.metrics.table_context(f"{schema}.{table}"):  # its conflict retries count against it
            return self._merge_segment(job)

    def _merge_segment(self, job: Job) -> tuple[Job, MergeResult]:
        from replicator.delta.writer import MergeResult
        delta = self.edge.session_delta()
        seg, entry, spec = job.segment, job.entry, job.spec
        if entry is None or spec is None:
            return job, MergeResult(0, 0, 0, -1, True, kind="none")
        held = delta.applied_ts(entry.path, entry.uid)  # what the table already holds (a crashed run's step)
        if seg.version <= held:
            # Committed by the crashed run; its table may already be past a DDL the catalog is not.
            version = delta.cached_version(entry.path)
            return job, MergeResult(count_on_driver(seg.rows), 0, 0, version, True, kind="none")
        meta = {"replicator": {"step": job.step, "applied_ts": seg.version, "kind": "window"}}
        rest = after(seg.rows, held)  # the crashed run cut its step elsewhere: the rest is new
        rows = on_driver(rest)
        if rows is None:  # on the executors: they collapse the span's changes
            frame = span_changes(rest, spec, seg.table)
            summary = span_summary(rest, spec, seg.table)
            keys = None if summary is None or not vouched(rest) else summary.key_hashes
            trust: bool | None = None  # its keys are not at hand (module doc)
            if job.inserts == "forced":
                trust = True
            elif job.inserts in ("trusted", "proof") and vouched(rest) and (
                    self.written.may_append_hashes(entry.uid, spec.key, keys) if keys is not None
                    else self.written.claim(entry.uid)):
                trust = job.inserts == "trusted"  # "proof": appended once the span shows a pre-image
            fault_timer("mid_merge")
            with self._in_flight():
                res = delta.merge_frame(entry.path, entry.uid, spec, frame, seg.version, meta, trust_inserts=trust,
                                        summary=summary)
                if res.kind == "append":
                    fault_point("after_append")
                fault_point("after_merge")
                if self._running > 1:
                    fault_point("tables_in_flight")
            if keys is not None and job.inserts != "forced":
                self.written.add_hashes(entry.uid, spec.key, keys)
            return job, res
        pre = any(r.op is Op.UPDATE and r.old_columns for r in rows)
        trust = job.inserts in ("forced", "trusted") or (job.inserts == "proof" and pre)
        changes = collapse(rows, spec.key, trust_inserts=trust)
        if trust and job.inserts != "forced" and all_fresh(changes) \
                and not self.written.may_append(entry.uid, spec.key, changes):
            changes = collapse(rows, spec.key)  # an "insert" of a key this run wrote: MERGE it
        fault_timer("mid_merge")
        with self._in_flight():
            try:
                res = delta.merge(entry.path, entry.uid, spec, changes, seg.version, meta)
            except SchemaError as exc:  # e.g. a value that does not fit its column: say where it came from
                raise SchemaError(f"{exc}; the rows came from {positions(rows)}") from None
            if res.kind == "append":
                fault_point("after_append")
            fault_point("after_merge")
            if self._running > 1:
                fault_point("tables_in_flight")
        if job.inserts != "forced":
            self.written.add(entry.uid, spec.key, changes)
        return job, dataclasses.replace(res, pre_images=pre)

    @contextmanager
    def _in_flight(self) -> Iterator[None]:
        with self._lock:
            self._running += 1
        try:
            yield
        finally:
            with self._lock:
                self._running -= 1


def check_columns(entry: TableEntry, rows: Sequence[RowChange]) -> None:
    """Every column of the rows is one the replicated table has (else a DDL is missing)."""
    names = {c["name"] for c in entry.spec["columns"]}
    for row in rows:
        for col in row.columns or row.old_columns:
            if col.name not in names:
                raise SchemaError(
                    f"row of {row.schema}.{row.table} at commit ts {row.commit_ts} has column {col.name!r} "
                    f"that the replicated table does not have ({row.position}); a DDL is missing from the stream"
                )


def positions(rows: list[RowChange]) -> str:
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
