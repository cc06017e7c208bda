"""One segment's write: a step's rows of one table, resolved against the catalog, into its Delta
table: appended when they are fresh inserts, else merged (delta/merge.py).

Fresh inserts: a key whose first change in the segment is an INSERT was absent from the table,
which holds upstream as of the segment's start. Only an INSERT the stream vouches for counts:
canal-json and Simple name the operation; the Open Protocol and Craft write an update without old
values exactly like an insert, so theirs count once the stream has shown an update with its
pre-image (`inserts`: "proof"), or always with `--fresh-inserts append`."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from replicator.changes import collapse
from replicator.delta.warehouse import TableEntry
from replicator.engine.plan import RowSpan, Segment
from replicator.engine.spark_edge import SparkEdge
from replicator.errors import SchemaError
from replicator.events import Op, RowChange
from replicator.faults import fault_point, fault_timer
from replicator.metrics import Metrics

if TYPE_CHECKING:
    from replicator.delta.merge import MergeResult
    from replicator.delta.typemap import TableSpec
    from replicator.sources.spark_reader import SparkBatch


@dataclass(frozen=True)
class Job:
    """A segment ready to MERGE: resolved against the catalog on the scheduling thread."""

    segment: Segment
    entry: TableEntry | None  # None: a row span that turned out empty (nothing to apply)
    spec: TableSpec | None
    step: int
    # how its INSERTs count (module doc): "trusted", "proof" (once the rows show a pre-image), or
    # "off" (never appended: --fresh-inserts merge, or the warehouse skipped a dead letter)
    inserts: str = "off"


class SegmentMerger:
    """Runs `Job`s, each on the calling thread's own Spark session (a pool worker's), counting the
    MERGEs in flight (the `tables_in_flight` fault instant)."""

    def __init__(self, edge: SparkEdge, metrics: Metrics, batch: Callable[[], SparkBatch]) -> None:
        self.edge = edge
        self.metrics = metrics
        self._batch = batch  # where a step's row spans are (--reader spark)
        self._running = 0
        self._lock = threading.Lock()

    def merge(self, job: Job) -> tuple[Job, MergeResult]:
        """One segment's MERGE, on the calling thread's own Spark session (a pool worker's)."""
        schema, table = job.segment.table
        with self.metrics.table_context(f"{schema}.{table}"):  # its conflict retries count against it
            return self._merge_segment(job)

    def _merge_segment(self, job: Job) -> tuple[Job, MergeResult]:
        from replicator.delta.merge import MergeResult
        delta = self.edge.session_delta()
        seg, entry, spec = job.segment, job.entry, job.spec
        if entry is None or spec is None:
            return job, MergeResult(0, 0, 0, -1, True, kind="none")
        rows = seg.rows
        held = delta.applied_ts(entry.path, entry.uid)  # what the table already holds (a crashed run's step)
        if seg.version <= held:
            # Committed by the crashed run; its table may already be past a DDL the catalog is not.
            return job, MergeResult(len(rows) if isinstance(rows, list) else 0, 0, 0,
                                    delta.cached_version(entry.path), True, kind="none")
        meta = {"replicator": {"step": job.step, "applied_ts": seg.version, "kind": "window"}}
        if isinstance(rows, RowSpan):
            frame = self._batch().changes(spec, seg.table, max(rows.lo, held), rows.hi)
            trust = None if job.inserts == "off" else job.inserts == "trusted"
            fault_timer("mid_merge")
            with self._in_flight():
                res = delta.merge_frame(entry.path, entry.uid, spec, frame, seg.version, meta, trust_inserts=trust)
                if res.kind == "append":
                    fault_point("after_append")
                fault_point("after_merge")
                if self._running > 1:
                    fault_point("tables_in_flight")
            return job, res
        if rows and rows[0].commit_ts <= held:  # the crashed run cut its step elsewhere: the rest is new
            rows = [r for r in rows if r.commit_ts > held]
        pre = any(r.op is Op.UPDATE and r.old_columns for r in rows)
        trust = job.inserts == "trusted" or (job.inserts == "proof" and pre)
        changes = collapse(rows, spec.key, trust_inserts=trust)
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
