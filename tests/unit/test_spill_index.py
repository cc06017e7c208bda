"""The spill's driver index (sources/spill_index.py) against the driver's own `collapse`: for any
rows and any span, the summary (changes, deletes, all fresh, pre-images, key range, key hashes)
and the changes left once the superseded ones are dropped are exactly the net changes the driver
would have applied from memory."""

from __future__ import annotations

import dataclasses
from itertools import pairwise
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.changes import collapse
from replicator.events import Column, Flag, Op, RowChange, TypeCode
from replicator.sources.spill import SpillFiles
from replicator.sources.spill_index import ROW_COLUMN, ChangeIndex, DriverBudget
from replicator.tables import ColumnSpec, TableSpec

T = ("s", "t")
SPEC = TableSpec("s", "t", (ColumnSpec("id", "int"), ColumnSpec("v", "bigint")), ("id",))


def _cols(key: int, v: int) -> tuple[Column, ...]:
    return Column("id", TypeCode.LONG, Flag.HANDLE_KEY, key), Column("v", TypeCode.LONG, 0, v)


def _no_spark() -> object:
    raise AssertionError("no Spark here")


change = st.tuples(st.integers(1, 6), st.sampled_from(["ins", "upd", "upd-pre", "del"]),
                   st.integers(0, 4), st.integers(0, 4))


@settings(max_examples=60, deadline=None)
@given(st.lists(change, min_size=1, max_size=30), st.lists(st.integers(0, 30), max_size=3),
       st.integers(0, 6), st.integers(0, 7))
def test_a_spans_plan_is_what_collapse_makes_of_its_rows(
        tmp_path_factory: object, changes: list[tuple[int, str, int, int]], cuts: list[int], lo: int,
        width: int) -> None:
    changes = sorted(changes, key=lambda c: c[0])  # commit ts order; arrival order within a ts
    rows: list[RowChange] = []
    for n, (ts, kind, key, other) in enumerate(changes):
        if kind == "ins":
            rows.append(RowChange(ts, "s", "t", Op.INSERT, _cols(key, n)))
        elif kind == "del":
            rows.append(RowChange(ts, "s", "t", Op.DELETE, (), _cols(key, n)))
        else:  # an update; with its pre-image, of another key when `other` differs
            old = _cols(other, -n) if kind == "upd-pre" else ()
            rows.append(RowChange(ts, "s", "t", Op.UPDATE, _cols(key, n), old))
    root = Path(str(tmp_path_factory.mktemp("spill")))  # type: ignore[attr-defined]
    spill = SpillFiles(str(root), _no_spark, lambda *_: SPEC)  # type: ignore[arg-type]
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    for a, b in pairwise(bounds):  # several spills, in order
        spill.write(T, "topic", [(r, 0, i, 0) for i, r in enumerate(rows[a:b], start=a)])
    typed = spill.typed(T)
    assert typed is not None
    hi = lo + width
    plan = typed.index.plan(lo, hi)
    assert plan is not None and plan.superseded is not None
    span = [r for r in rows if lo < r.commit_ts <= hi]
    net = collapse(span, ("id",), trust_inserts=True)
    s = plan.summary
    assert s.rows == len(net) and s.deletes == sum(c.delete for c in net)
    assert s.key_hashes == {hash(c.key) for c in net}
    if net:
        assert s.fresh == all(c.fresh for c in net)
        assert s.pre_images == any(r.op is Op.UPDATE and r.old_columns for r in span)
        assert s.bounds == {0: (min(c.key[0] for c in net), max(c.key[0] for c in net))}
    data = pa.concat_tables([pq.read_table(f) for f in typed.files])
    kept = [r for r in data.to_pylist() if lo < r["_ts"] <= hi and r[ROW_COLUMN] not in set(plan.superseded)]
    got = {(r["_c0"], r["_op"] == 1, None if r["_op"] else r["_c1"]) for r in kept}
    assert len(kept) == len(net)
    assert got == {(c.key[0], c.delete, None if c.image is None else c.image["v"]) for c in net}
    # Read back on the driver: the same changes (none when the span has more than it reads).
    cols = ["_c0", "_c1", "_op", ROW_COLUMN]
    whole = sum(typed.file_rows)  # whole files are read back
    assert whole == data.num_rows
    with typed.read_back(plan, lo, hi, cols) as none:
        assert none is None  # a budget of 0 (the default): Spark reads it
    budget = DriverBudget(whole)
    with dataclasses.replace(typed, budget=budget).read_back(plan, lo, hi, cols) as small:
        assert small is not None
        with budget.take(1) as more:  # the budget is spent until the block ends
            assert not more
    with budget.take(whole) as again:
        assert again
    assert sorted(small.to_pylist(), key=lambda r: r[ROW_COLUMN]) == sorted(
        ({k: r[k] for k in cols} for r in kept), key=lambda r: r[ROW_COLUMN])
    spill.close()


def test_a_float_or_null_key_is_left_to_spark() -> None:
    floats = ChangeIndex(["_c0"])
    floats.add(pa.table({"_c0": pa.array([1.0]), **_order(1)}), [1])
    assert floats.plan(0, 10) is None
    nulls = ChangeIndex(["_c0"])
    nulls.add(pa.table({"_c0": pa.array([None], pa.int32()), **_order(1)}), [1])
    assert nulls.plan(0, 10) is None
    assert nulls.plan(5, 10) is not None  # a span without the NULL key


def _order(n: int) -> dict[str, pa.Array]:
    ints = {"_op": pa.int8(), "_ts": pa.int64(), "_p": pa.int32(), "_o": pa.int64(), "_i": pa.int32(),
            "_sub": pa.int8(), "_ins": pa.int8(), "_pre": pa.int8()}
    return {name: pa.array([1] * n, t) for name, t in ints.items()}
