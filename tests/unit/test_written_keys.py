"""WrittenKeys (replicator.engine.merging): an "insert" of a key this run already wrote is never
appended, nor after the table's key columns changed, nor past the memory bound; a TRUNCATE (`reset`)
forgets a table's keys."""

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


def test_a_truncated_table_is_tracked_again_with_no_key() -> None:
    w = WrittenKeys()
    w.add("t", ["id"], _ins(1, 2))
    w.add("other", ["id"], _ins(1))
    w.reset("t")
    assert w.may_append("t", ["id"], _ins(1, 2)), "a key written before the TRUNCATE is appended after it"
    w.add("t", ["id"], _ins(1))
    assert not w.may_append("t", ["id"], _ins(1)), "tracked again: a key written after it is remembered"
    assert not w.may_append("other", ["id"], _ins(1)), "other tables keep their keys"
    w.reset("never written")
    assert w.may_append("never written", ["id"], _ins(1))


def test_a_truncate_tracks_an_untracked_table_again_within_the_bound() -> None:
    # Decided: the keys that untracked it (past the bound, or under other key columns) are gone
    # with its rows, so it is tracked again; its new keys count against the bound once more.
    w = WrittenKeys(limit=3)
    w.add("big", ["id"], _ins(1, 2, 3, 4))
    assert not w.may_append("big", ["id"], _ins(9))
    w.reset("big")
    assert w.may_append("big", ["id"], _ins(1, 9))
    w.add("big", ["id"], _ins(1, 2))
    w.add("small", ["id"], _ins(1))
    assert not w.may_append("big", ["id"], _ins(2)) and w.may_append("big", ["id"], _ins(7))
    w.add("big", ["id"], _ins(7))  # 4 keys in all: past the bound again
    assert not w.may_append("big", ["id"], _ins(8))
    assert not w.may_append("small", ["id"], _ins(1)) and w.may_append("small", ["id"], _ins(2))

    keyed = WrittenKeys()
    keyed.add("t", ["a"], _ins(1))
    keyed.add("t", ["b"], _ins(10))  # the key columns changed: untracked
    keyed.reset("t")
    assert keyed.may_append("t", ["b"], _ins(10))
    keyed.add("t", ["b"], _ins(10))
    assert not keyed.may_append("t", ["b"], _ins(10)) and keyed.may_append("t", ["b"], _ins(11))


def test_a_reset_gives_back_its_keys_to_the_bound() -> None:
    w = WrittenKeys(limit=3)
    w.add("t", ["id"], _ins(1, 2, 3))
    w.reset("t")
    w.add("u", ["id"], _ins(1, 2, 3))  # fits: the truncated table's keys no longer count
    assert w.may_append("u", ["id"], _ins(4)) and not w.may_append("u", ["id"], _ins(3))


def test_spilled_keys_are_held_and_checked_like_driver_keys() -> None:
    """A spill's index gives `hash(Change.key)` of its keys (sources/spill_index.py)."""
    w = WrittenKeys()
    assert w.may_append_hashes("t", ["id"], {hash((1,)), hash((2,))})
    w.add_hashes("t", ["id"], {hash((1,)), hash((2,))})
    assert not w.may_append("t", ["id"], _ins(2)) and w.may_append("t", ["id"], _ins(3))
    w.add("t", ["id"], _ins(3))
    assert not w.may_append_hashes("t", ["id"], {hash((3,))}) and w.may_append_hashes("t", ["id"], {hash((4,))})
    assert not w.may_append_hashes("t", ["other"], {hash((4,))})  # its key columns changed
