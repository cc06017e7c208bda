"""The change set: the net effect of a table's row changes on each handle key (`collapse`), what a
MERGE applies (delta/merge.py).

It lives at the bottom of the package because the engine (which collapses a step's rows), the
Spark reader's executors (which key rows the same way) and the Delta edge (which merges the
changes) all use it, and the Delta edge sits below the other two. Pure: no Spark, no Kafka.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replicator.errors import SchemaError
from replicator.events import Column, Op, RowChange, Value

__all__ = ["Change", "collapse", "key_of"]


@dataclass(frozen=True, slots=True)
class Change:
    """Net effect on one key: an upsert of a full image, or a delete."""

    key: tuple[Any, ...]
    delete: bool
    image: dict[str, Value] | None


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


def collapse(rows: Sequence[RowChange], key: Sequence[str]) -> list[Change]:
    """Net change per key of rows given in (commit ts, arrival) order.

    An update whose key changed deletes the old key. Later changes win: a replayed older version
    that arrived later sorts before the newer one by commit ts, so it never overwrites it.
    Hot path (every row of a step): each image becomes a dict once, reused for its key.
    """
    net: dict[tuple[Any, ...], Change] = {}
    key = tuple(key)
    for row in rows:
        op = row.op
        if op is Op.DELETE:
            image = row.old_columns or row.columns
            k = key_of(image, key, row)
            net[k] = Change(k, True, None)
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
                    net[old_key] = Change(old_key, True, None)
        net.pop(new_key, None)  # re-insert so dict order follows the last change
        net[new_key] = Change(new_key, False, values)
    return list(net.values())
