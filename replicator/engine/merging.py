"""One segment's MERGE: a step's rows of one table, resolved against the catalog, into its Delta table."""

from __future__ import annotations

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
from replicator.events import RowChange
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
    recovering: bool  # a crashed run may have committed it: check its txnVersion first


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
                raise SchemaError(f"{exc}; the rows came from {positions(rows)}") from None
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
