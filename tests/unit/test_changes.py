"""The change set (replicator.changes): a key's net change and whether it is a fresh insert,
against an upstream table simulated operation by operation."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.changes import Change, all_fresh, collapse
from replicator.events import Column, Flag, Op, RowChange, TypeCode

KEY = ("id",)


def _image(k: int, v: Any) -> tuple[Column, ...]:
    return (Column("id", TypeCode.LONG, Flag.HANDLE_KEY, k), Column("v", TypeCode.LONG, 0, v))


@st.composite
def _history(draw: st.DrawFn) -> tuple[dict[int, int], list[RowChange], dict[int, int], bool]:
    """A table before (key -> value), the row changes upstream made to it as a changefeed with or
    without old values sends them (each operation one TiDB could do), and the table after."""
    before: dict[int, int] = dict.fromkeys(draw(st.sets(st.integers(0, 6), max_size=4)), 0)
    table = dict(before)
    old_values = draw(st.booleans())
    rows: list[RowChange] = []
    for ts in range(1, draw(st.integers(0, 14)) + 1):
        absent = [k for k in range(8) if k not in table]
        present = sorted(table)
        op = draw(st.sampled_from((["insert"] if absent else []) + (["update", "move", "delete"] if present else [])))
        v = draw(st.integers(1, 99))
        if op == "insert":
            k = draw(st.sampled_from(absent))
            table[k] = v
            rows.append(RowChange(ts, "s", "t", Op.INSERT, _image(k, v)))
        elif op in ("update", "move"):
            k = draw(st.sampled_from(present))
            new_k = draw(st.sampled_from(absent)) if op == "move" and absent else k
            old = _image(k, table.pop(k))
            table[new_k] = v
            if old_values:
                rows.append(RowChange(ts, "s", "t", Op.UPDATE, _image(new_k, v), old))
            elif new_k != k:  # a key change goes out as a delete and an insert
                rows.append(RowChange(ts, "s", "t", Op.DELETE, (), old[:1]))
                rows.append(RowChange(ts, "s", "t", Op.INSERT, _image(new_k, v)))
            else:  # without old values an update reads as an insert (Open Protocol, Craft)
                rows.append(RowChange(ts, "s", "t", Op.INSERT, _image(new_k, v)))
        else:
            k = draw(st.sampled_from(present))
            old = _image(k, table.pop(k))
            rows.append(RowChange(ts, "s", "t", Op.DELETE, (), old if old_values else old[:1]))
    return before, rows, table, old_values


def _merge(table: dict[int, int], changes: list[Change]) -> dict[int, int]:
    out = dict(table)
    for c in changes:
        if c.delete:
            out.pop(c.key[0], None)
        else:
            assert c.image is not None
            out[c.key[0]] = c.image["v"]  # type: ignore[assignment]
    return out


@settings(max_examples=400, deadline=None)
@given(_history())
def test_a_merge_of_the_net_changes_gives_the_table_after(history: Any) -> None:
    before, rows, after, _old_values = history
    assert _merge(before, collapse(rows, KEY)) == after


@settings(max_examples=400, deadline=None)
@given(_history())
def test_fresh_keys_were_absent_and_all_fresh_changes_append_to_the_table_after(history: Any) -> None:
    before, rows, after, old_values = history
    changes = collapse(rows, KEY, trust_inserts=old_values)  # inserts count only when the stream tells
    assert all(c.key[0] not in before for c in changes if c.fresh)
    if all_fresh(changes):
        appended = [c for c in changes if not c.delete]
        assert not {c.key[0] for c in appended} & set(before)
        assert {**before, **{c.key[0]: c.image["v"] for c in appended if c.image}} == after


def test_without_trust_nothing_is_fresh_and_an_update_without_old_values_would_fool_it() -> None:
    update_as_insert = [RowChange(5, "s", "t", Op.INSERT, _image(1, 2))]  # key 1 was there before
    assert not any(c.fresh for c in collapse(update_as_insert, KEY))
    assert all_fresh(collapse(update_as_insert, KEY, trust_inserts=True))  # why Open / Craft need proof first


def test_an_insert_deleted_again_is_fresh_and_a_key_moved_away_is_not() -> None:
    rows = [RowChange(1, "s", "t", Op.INSERT, _image(1, 1)), RowChange(2, "s", "t", Op.DELETE, (), _image(1, 1)),
            RowChange(3, "s", "t", Op.UPDATE, _image(4, 1), _image(3, 0))]
    fresh = {c.key[0]: (c.delete, c.fresh) for c in collapse(rows, KEY, trust_inserts=True)}
    assert fresh == {1: (True, True), 3: (True, False), 4: (False, False)}
