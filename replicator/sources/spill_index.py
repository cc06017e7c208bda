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
from collections.abc import Sequence
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


@dataclasses.dataclass(frozen=True)
class TypedRows:
    """A table's rows already made `executor.change_batches` under a spec of `shape`, in Parquet
    `files` with a ROW_COLUMN (a spill's, sources/spill.py), and the driver's `index` of them."""

    shape: tuple[Any, ...]
    files: tuple[str, ...]
    index: ChangeIndex


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
