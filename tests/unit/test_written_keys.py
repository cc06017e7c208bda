"""WrittenKeys (replicator.engine.merging): an "insert" of a key this run already wrote is never
appended, nor after the table's key columns changed, nor past the memory bound."""

from __future__ import annotations

from replicator.changes import Change
from replicator.engine.merging import WrittenKeys


def _ins(*keys: int) -> list[Change]:
    return [Change((k,), False, {"id": k}, fresh=True) for k in keys]


def test_a_key_written_before_is_not_appended_again() -> None:
    w = WrittenKeys()
    assert w.may_append("t", ["id"], _ins(1, 2))
    w.add("t", ["id"], _ins(1, 2))
    assert w.may_append("t", ["id"], _ins(3))
    assert not w.may_append("t", ["id"], _ins(3, 2))
    assert w.may_append("other", ["id"], _ins(2))


def test_changed_key_columns_stop_appending_for_the_run() -> None:
    w = WrittenKeys()
    w.add("t", ["a"], _ins(1))
    assert not w.may_append("t", ["b"], _ins(10))
    w.add("t", ["b"], _ins(10))
    assert not w.may_append("t", ["b"], _ins(11)) and not w.may_append("t", ["a"], _ins(5))


def test_past_the_bound_a_table_is_no_longer_appended() -> None:
    w = WrittenKeys(limit=3)
    w.add("small", ["id"], _ins(1))
    w.add("big", ["id"], _ins(1, 2, 3))
    assert not w.may_append("big", ["id"], _ins(9))
    assert w.may_append("small", ["id"], _ins(9)) and not w.may_append("small", ["id"], _ins(1))
