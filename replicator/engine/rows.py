"""A step's rows of one table, wherever they are: a list in driver memory (`--reader driver`), or a
`RowSpan` of them left on the Spark executors that decoded them (`--reader spark`) or spilled to
disk by a full buffer (`Spill`, read back by Spark).

Why one module: the plan splits both kinds at DDLs, the applier infers and checks tables from
them, the merger turns them into changes; each asks here instead of telling the kinds apart
itself, so a third kind (rows spilled to disk, say) would change this module and no other.
Pure logic: a span only points at its `SpanSource` (the Spark batch), it never touches Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from replicator.events import DdlEvent, RowChange
from replicator.tables import TableName

if TYPE_CHECKING:
    from replicator.changes import ChangeSummary
    from replicator.tables import TableSpec


class SpanSource(Protocol):
    """Where a span's rows are (the Spark reader's batch, sources/spark_reader.py)."""

    vouched: bool
    """The driver read every row of it (a spill): its INSERTs count as the driver's rows' do
    (engine/merging.py), which the Spark reader's, whose keys nobody here saw, do not."""

    def sample(self, table: TableName, lo: int, hi: int, n: int = 20) -> list[RowChange]:
        """The first `n` rows of a table with commit ts in (lo, hi], fetched to the driver."""

    def changes(self, spec: TableSpec, table: TableName, lo: int, hi: int) -> Any:
        """The net change per key of those rows, as a MERGE source DataFrame."""

    def summary(self, spec: TableSpec, table: TableName, lo: int, hi: int) -> ChangeSummary | None:
        """What those changes are (counts, fresh inserts, key range, keys) when known without
        a Spark job (a spill's); None: the write counts them."""


class Spill(Protocol):
    """Where the windower moves complete rows out of memory (sources/spill.py): files of them per
    topic, read back as spans."""

    rows: int
    """Rows written since the last `clear`."""

    def write(self, table: TableName, topic: str, rows: Sequence[tuple[RowChange, int, int, int]],
              ddls: Sequence[DdlEvent] = ()) -> None:
        """Some rows of a table (row, partition, offset, watermark before it), in (commit ts, arrival)
        order; `ddls`: those read and not applied yet (a CREATE TABLE among them says the table's spec)."""

    def source(self, table: TableName) -> SpanSource:
        """What a step's span of the table's spilled rows reads."""

    def clear(self) -> None:
        """Forget every row written (they were applied)."""


@dataclass(frozen=True)
class RowSpan:
    """A table's rows with commit ts in (lo, hi] that stay where they were decoded: the stand-in
    for a list of rows in a step and its segments. It may turn out empty; whoever holds the rows
    counts them. Two spans are equal by their bounds (`source` is where, not what)."""

    lo: int
    hi: int
    source: SpanSource | None = field(default=None, compare=False, repr=False)

    def where(self) -> SpanSource:
        if self.source is None:
            raise RuntimeError(f"rows in ({self.lo}, {self.hi}] without the batch that holds them")
        return self.source


Rows = list[RowChange] | RowSpan
"""A step's rows of one table, in (commit ts, arrival) order: in driver memory, or a span of them."""


def split_rows(rows: Rows, ts: int) -> tuple[Rows | None, Rows | None]:
    """`rows` split into those at or before commit ts `ts` and those after (None: certainly none)."""
    if isinstance(rows, RowSpan):
        return (RowSpan(rows.lo, min(ts, rows.hi), rows.source) if ts > rows.lo else None,
                RowSpan(max(ts, rows.lo), rows.hi, rows.source) if ts < rows.hi else None)
    end = 0
    while end < len(rows) and rows[end].commit_ts <= ts:
        end += 1
    return rows[:end] or None, rows[end:] or None


def after(rows: Rows, ts: int) -> Rows:
    """The rows with commit ts above `ts` (what a crashed run's write of the table left to do)."""
    if isinstance(rows, RowSpan):
        return RowSpan(max(rows.lo, ts), rows.hi, rows.source) if ts > rows.lo else rows
    if rows and rows[0].commit_ts <= ts:
        return [r for r in rows if r.commit_ts > ts]
    return rows


def on_driver(rows: Rows) -> list[RowChange] | None:
    """The rows themselves when they are in driver memory; None for a span on the executors."""
    return None if isinstance(rows, RowSpan) else rows


def count_on_driver(rows: Rows) -> int:
    """How many rows are in driver memory (a span's rows are counted where they are)."""
    return 0 if isinstance(rows, RowSpan) else len(rows)


def first_ts(rows: Rows) -> int | None:
    """The smallest commit ts of rows in driver memory; None when there are none, or for a span
    (where its rows start is known on the executors only)."""
    return rows[0].commit_ts if not isinstance(rows, RowSpan) and rows else None


def sample(rows: Rows, table: TableName) -> Sequence[RowChange]:
    """Rows to infer or key a table from: all of driver rows, the first few of a span."""
    if isinstance(rows, RowSpan):
        return rows.where().sample(table, rows.lo, rows.hi)
    return rows


def vouched(rows: Rows) -> bool:
    """Whether a span's INSERTs may count as fresh like driver rows (`SpanSource.vouched`)."""
    return isinstance(rows, RowSpan) and rows.where().vouched


def span_changes(rows: Rows, spec: TableSpec, table: TableName) -> Any:
    """A span's net changes per key as a MERGE source (a DataFrame). Rows in driver memory have
    none: the merger collapses them itself (changes.py)."""
    if not isinstance(rows, RowSpan):
        raise TypeError("rows in driver memory are collapsed on the driver, not fetched as a span")
    return rows.where().changes(spec, table, rows.lo, rows.hi)


def span_summary(rows: Rows, spec: TableSpec, table: TableName) -> ChangeSummary | None:
    """What `span_changes` holds, when its source knows without a Spark job (`SpanSource.summary`)."""
    if not isinstance(rows, RowSpan):
        raise TypeError("rows in driver memory are collapsed on the driver, not summarized as a span")
    return rows.where().summary(spec, table, rows.lo, rows.hi)
