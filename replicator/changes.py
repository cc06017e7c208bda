"""The change set: the net effect of a table's row changes on each handle key (`collapse`), what a
MERGE applies (delta/writer.py).

It lives at the bottom of the package because the engine (which collapses a step's rows), the
Spark reader's executors (which key rows the same way) and the Delta writer (which merges the
changes) all use it, and the Delta edge sits below the other two. Pure: no Spark, no Kafka.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from replicator.errors import SchemaError
from replicator.events import Column, Op, RowChange, Value

__all__ = ["Change", "ChangeSummary", "all_fresh", "collapse", "key_of"]


@dataclass(frozen=True, slots=True)
class Change:
    """Net effect on one key: an upsert of a full image, or a delete."""

    key: tuple[Any, ...]
    delete: bool
    image: dict[str, Value] | None
    # The key's first change in the rows collapsed was a trusted INSERT: the key was absent before
    # them, so its net effect needs no lookup of the table (an append, or nothing for a delete).
    fresh: bool = False


@dataclass(frozen=True)
class ChangeSummary:
    """What a write of net changes (one per key) decides by before it writes them: how many, how
    many deletes, whether all are fresh inserts, the key range it may prune the table to. A Spark
    source is counted by a Spark job for it; a spilled span's driver knew it as it spilled the
    rows (sources/spill_index.py), which spares that job."""

    rows: int  # keys changed (net changes)
    deletes: int
    fresh: bool  # every key's first change was an INSERT
    pre_images: bool  # one change was an UPDATE with its pre-image (the stream tells inserts apart)
    bounds: Mapping[int, tuple[Any, Any]]  # per key column index: (min, max) of its typed values
    key_hashes: frozenset[int] | None = None  # hash(Change.key) of every key changed (None: not known)


def _missing_key(row: RowChange, name: str) -> SchemaError:
    return SchemaError(
        f"row of {row.schema}.{row.table} at commit ts {row.commit_ts} lacks handle-key column "
        f"{name!r}" + (f" ({row.position})" if row.position else "")
    )


def key_of(image: Sequence[Column], key: Sequence[str], row: RowChange) -> tuple[Any, ...]:
    values: dict[str, Value] = {c.name: c.value for c in image}
    try:
        return tuple([values[k] for k in key])
    except KeyError as exc:
        raise _missing_key(row, exc.args[0]) from None


def collapse(rows: Sequence[RowChange], key: Sequence[str], *, trust_inserts: bool = False) -> list[Change]:
    """Net change per key of rows given in (commit ts, arrival) order.

    An update whose key changed deletes the old key. Later changes win: a replayed older version
    that arrived later sorts before the newer one by commit ts, so it never overwrites it.
    With `trust_inserts` (the rows' INSERTs are known to be inserts, not updates without a
    pre-image), a change whose key's first change was an INSERT is marked `fresh`.
    Hot path (every row of a step): each image becomes a dict once, reused for its key.
    """
    net: dict[tuple[Any, ...], Change] = {}
    first: dict[tuple[Any, ...], bool] = {}  # per key: was its first change a trusted INSERT
    key = tuple(key)
    for row in rows:
        op = row.op
        if op is Op.DELETE:
            image = row.old_columns or row.columns
            k = key_of(image, key, row)
            fresh = first.setdefault(k, False)
            net[k] = Change(k, True, None, fresh)
            continue
        values: dict[str, Value] = {c.name: c.value for c in row.columns}
        try:
            new_key = tuple([values[k] for k in key])
        except KeyError as exc:
            raise _missing_key(row, exc.args[0]) from None
        if op is Op.UPDATE and row.old_columns:
            old: dict[str, Value] = {c.name: c.value for c in row.old_columns}
            if all(k in old for k in key):
                old_key = tuple([old[k] for k in key])
                if old_key != new_key:
                    net[old_key] = Change(old_key, True, None, first.setdefault(old_key, False))
        fresh = first.setdefault(new_key, trust_inserts and op is Op.INSERT)
        net.pop(new_key, None)  # re-insert so dict order follows the last change
        net[new_key] = Change(new_key, False, values, fresh)
    return list(net.values())


def all_fresh(changes: Sequence[Change]) -> bool:
    """Every key's first change was a trusted INSERT: the changes can be appended (their upserts;
    a fresh delete undoes its own insert) without reading the table."""
    return all(c.fresh for c in changes)
