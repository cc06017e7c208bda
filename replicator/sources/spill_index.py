"""What the driver keeps of a table's spilled typed changes, so that Spark applies a span of them
in one job: the job that counted the span's net changes is not needed, and neither is the window
that picks each key's last change, unless many changes were superseded.

Why: a spilled table cost two Spark jobs where rows in memory cost one (issue 49): one persisting
and counting the span's net changes (rows, deletes, whether all are fresh inserts, the key range
the MERGE prunes to), then the write; and the count ran the last-change-per-key window with its
shuffle. On a small machine each is about half a second per table. The driver saw every change as
it spilled it, so it keeps the few columns those answers need (the key's typed values, the order,
`_op`, `_ins`, `_pre`, a row number, and the hash of the key as `collapse` keys it) and answers
them for any span with Arrow (`ChangeIndex.plan`). The superseded changes' row numbers then drop
them from the span instead of a window: a redelivered INSERT, an updated key. The key hashes let
the run's guard against upserts sent as INSERTs (engine/merging.py `WrittenKeys`) hold spilled
keys too. Memory: a few dozen bytes a spilled row (`--spill-rows` bounds them). Pure: Arrow only.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from replicator.changes import ChangeSummary
from replicator.sources.executor import ORDER_COLUMNS

ROW_COLUMN = "_row"
"""A typed spill file's row number (per table and run): how a plan names the changes it drops."""

MAX_SUPERSEDED = 20_000
"""Above this many superseded changes in a span, the window drops them (a literal set this big
makes a heavy plan)."""


@dataclasses.dataclass(frozen=True)
class SpanPlan:
    """A span's net changes as the driver knows them: `summary`, and the row numbers of the
    changes a later change of their key supersedes (None: too many, let the window drop them)."""

    summary: ChangeSummary
    superseded: list[int] | None


class DriverBudget:
    """At most `rows` spilled changes read back on the driver at once, over every table and pool
    thread (`TypedRows.read_back`)."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self._used = 0
        self._lock = threading.Lock()

    @contextmanager
    def take(self, n: int) -> Iterator[bool]:
        """Whether `n` more fit now; if so they count until the block ends."""
        with self._lock:
            ok = n <= self.rows - self._used
            if ok:
                self._used += n
        try:
            yield ok
        finally:
            if ok:
                with self._lock:
                    self._used -= n


@dataclasses.dataclass(frozen=True)
class TypedRows:
    """A table's rows already made `executor.change_batches` under a spec of `shape`, in Parquet
    `files` (of `file_rows` changes each) with a ROW_COLUMN (a spill's, sources/spill.py), and the
    driver's `index` of them.

    A span may be read back on the driver (`read`: one file as Arrow; `read_back`) and handed to
    Spark as the rows a step keeps in memory are: planning a Parquet read costs about half a second
    a table on a small machine, reading a few thousand typed rows with Arrow a few milliseconds.
    `budget` bounds the changes read back at once (the run's `--max-buffer-rows`): typed Arrow
    takes a fraction of what the same rows took in the buffer as Python objects (about a tenth for
    a row of short columns), so the bound on memory holds. Beyond it Spark reads the files."""

    shape: tuple[Any, ...]
    files: tuple[str, ...]
    index: ChangeIndex
    read: Callable[[str], pa.Table] | None = None
    budget: DriverBudget | None = None
    file_rows: tuple[int, ...] = ()

    @contextmanager
    def read_back(self, plan: SpanPlan, lo: int, hi: int, columns: Sequence[str]) -> Iterator[pa.Table | None]:
        """The span (lo, hi]'s net changes (`columns` of them) read on the driver, held within the
        budget until the block ends; None when they do not fit it now, or the plan leaves the
        superseded changes to Spark's window."""
        if self.read is None or self.budget is None or plan.superseded is None:
            yield None
            return
        with self.budget.take(sum(self.file_rows)) as fits:  # whole files are read, then filtered
            try:
                yield self._net_changes(plan, lo, hi, columns) if fits else None
            finally:
                if fits:  # Arrow's allocator keeps what it freed: about 15 MiB more RSS over a step, else
                    pa.default_memory_pool().release_unused()

    def _net_changes(self, plan: SpanPlan, lo: int, hi: int, columns: Sequence[str]) -> pa.Table:
        assert self.read is not None and plan.superseded is not None
        drop = pa.array(plan.superseded, type=pa.int64())
        parts = []
        for path in self.files:
            t = self.read(path)
            keep = pc.and_(pc.greater(t["_ts"], lo), pc.less_equal(t["_ts"], hi))
            if len(drop):
                keep = pc.and_(keep, pc.invert(pc.is_in(t[ROW_COLUMN], value_set=drop)))
            parts.append(t.filter(keep).select(list(columns)))
        return pa.concat_tables(parts)


class ChangeIndex:
    """The driver's columns of a table's typed spilled changes (module doc). `key`: the key's
    positional columns (`_c<i>`)."""

    _KEEP = ("_op", *ORDER_COLUMNS, "_ins", "_pre")

    def __init__(self, key: Sequence[str]) -> None:
        self.key = tuple(key)
        self._chunks: list[pa.Table] = []
        self._table: pa.Table | None = None
        self.rows = 0
        self.plannable = True  # False: a float key (Spark groups NaN and -0.0 as Arrow does not)

    def add(self, data: pa.Table, key_hashes: Sequence[int]) -> pa.Table:
        """Keep `data`'s changes (one `key_hashes` each); returns `data` with its row numbers."""
        rows = pa.array(range(self.rows, self.rows + data.num_rows), type=pa.int64())
        data = data.append_column(ROW_COLUMN, rows)
        self.rows += data.num_rows
        if any(pa.types.is_floating(data.schema.field(k).type) for k in self.key):
            self.plannable = False
        if self.plannable:
            kept = data.select([*self.key, *self._KEEP, ROW_COLUMN])
            self._chunks.append(kept.append_column("_kh", pa.array(key_hashes, type=pa.int64())))
            self._table = None
        return data

    def plan(self, lo: int, hi: int) -> SpanPlan | None:
        """The span (lo, hi]'s net changes as Spark's last-change-per-key window would find them
        (executor.ORDER_COLUMNS, the key's typed values); None when this index cannot say (a
        NULL or float key: Spark counts it)."""
        if not self.plannable:
            return None
        if self._table is None:
            self._table = pa.concat_tables(self._chunks) if self._chunks else None
        if self._table is None:
            return SpanPlan(ChangeSummary(0, 0, True, False, {}, frozenset()), [])
        t = self._table
        t = t.filter(pc.and_(pc.greater(t["_ts"], lo), pc.less_equal(t["_ts"], hi)))
        n = t.num_rows
        if n == 0:
            return SpanPlan(ChangeSummary(0, 0, True, False, {}, frozenset()), [])
        if any(t[k].null_count for k in self.key):
            return None
        t = t.sort_by([(k, "ascending") for k in (*self.key, *ORDER_COLUMNS)])
        new_key: Any = pa.array([False] * (n - 1), type=pa.bool_())
        for k in self.key:  # a change whose key differs from the one before it starts a key
            col = t[k].combine_chunks()
            new_key = pc.or_(new_key, pc.not_equal(col.slice(1), col.slice(0, n - 1)))
        first = pa.concat_arrays([pa.array([True]), new_key])
        last = pa.concat_arrays([new_key, pa.array([True])])
        winners = t.filter(last)
        superseded = t.filter(pc.invert(last))[ROW_COLUMN]
        bounds = {}
        for k in self.key:
            mm = pc.min_max(t[k])
            bounds[int(k[2:])] = (mm["min"].as_py(), mm["max"].as_py())
        summary = ChangeSummary(
            rows=winners.num_rows, deletes=int(pc.sum(winners["_op"]).as_py() or 0),
            fresh=pc.min(t.filter(first)["_ins"]).as_py() == 1, pre_images=pc.max(t["_pre"]).as_py() == 1,
            bounds=bounds, key_hashes=frozenset(t["_kh"].to_pylist()))
        return SpanPlan(summary, superseded.to_pylist() if len(superseded) <= MAX_SUPERSEDED else None)
