"""Progress is one object: the windower updates it, the state file persists it, and a state.json
written before positions were kept per (topic, partition) still loads (its cursors become its
source topic's) and saves with everything else in the same shape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from replicator.engine.window import Windower
from replicator.events import TP, DdlEvent, Resolved
from replicator.progress import Cursor, Progress
from replicator.warehouse import State, Warehouse

DATA = Path(__file__).parent / "data"


def _warehouse_with_old_state(tmp_path: Path) -> Warehouse:
    wh = Warehouse(tmp_path / "wh")
    wh.meta.mkdir(parents=True)
    shutil.copy(DATA / "state_format1.json", wh.state_path)
    return wh


def test_state_written_by_earlier_code_loads_into_progress(tmp_path: Path) -> None:
    state = _warehouse_with_old_state(tmp_path).load_state()
    assert state.progress == Progress(
        applied_ts=449000000000000005,
        cursors={TP("tidb-cdc", 0): Cursor(12, 449000000000000003), TP("tidb-cdc", 2): Cursor(7, 449000000000000005),
                 TP("tidb-cdc", 1): Cursor(0, 0)},
        ddl_ledger={(449000000000000004, "ALTER TABLE `t` ADD COLUMN c INT"),
                    (449000000000000005, "TRUNCATE TABLE `t`")},
    )
    assert state.applied_ts == 449000000000000005
    assert state.source == "tidb-cdc" and state.steps == 4 and state.live_table("shop", "orders") is not None


def test_an_old_state_is_saved_with_its_cursors_under_its_topic_and_the_rest_unchanged(tmp_path: Path) -> None:
    wh = _warehouse_with_old_state(tmp_path)
    before = json.loads(wh.state_path.read_bytes())
    state = wh.load_state()
    updated_at = state.updated_at
    wh.save_state(state)
    after = json.loads(wh.state_path.read_bytes())
    # key order kept: progress fields stay flat, in place; `partitions` became `positions` of the source topic
    assert list(after) == [("positions" if k == "partitions" else k) for k in before]
    assert after["positions"] == {"tidb-cdc": before["partitions"]}
    after["updated_at"] = updated_at
    assert {k: v for k, v in after.items() if k != "positions"} == {
        k: v for k, v in before.items() if k != "partitions"}
    assert wh.load_state().progress == state.progress  # and it reads back the same


def test_windower_updates_the_progress_the_warehouse_persists(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    state = wh.load_state()
    w = Windower([TP("cdc", 0)], state.progress)
    ddl = DdlEvent(10, "s", "t", 11, "TRUNCATE TABLE t")
    w.offer(TP("cdc", 0), 0, [ddl])
    w.offer(TP("cdc", 0), 1, [Resolved(10)])
    step = w.next_step()
    assert step is not None and step.ddls == (ddl,) and not step.rows
    w.commit(step)
    assert w.checkpoint()
    assert not w.checkpoint()  # nothing moved since
    wh.save_state(state)
    saved = json.loads(wh.state_path.read_bytes())
    assert saved["applied_ts"] == 10
    assert saved["positions"] == {"cdc": {"0": {"offset": 2, "watermark": 10}}} and "quiet_topics" not in saved
    assert saved["ddl_ledger"] == [[10, "TRUNCATE TABLE t"]]
    assert wh.load_state().progress == state.progress


def test_a_run_told_where_to_start_keeps_the_rest_of_its_progress() -> None:
    a0, a1, b0 = TP("a", 0), TP("a", 1), TP("b", 0)
    stored = Progress(7, {a0: Cursor(5, 6), a1: Cursor(9, 7), b0: Cursor(2, 7)}, {(7, "q")}, {"b": 6})
    assert stored.starting_at(None) is stored
    assert stored.starting_at("earliest") == Progress(7, {}, {(7, "q")}, {"b": 6})
    moved = stored.starting_at({a1: 3})
    assert moved.cursors == {a1: Cursor(3, 0), a0: Cursor(5, 6), b0: Cursor(2, 7)} and moved.applied_ts == 7
    assert stored.cursors[a1] == Cursor(9, 7)  # the stored object is not changed until progress is saved


def test_state_without_progress_fields_is_empty_progress() -> None:
    assert State.model_validate_json(b'{"format": 1}').progress == Progress()


def test_state_still_reads_in_the_state_file_shape(tmp_path: Path) -> None:
    state = _warehouse_with_old_state(tmp_path).load_state()
    assert list(state.partitions) == ["tidb-cdc:0", "tidb-cdc:2", "tidb-cdc:1"]
    assert state.partitions["tidb-cdc:2"].offset == 7 and state.partitions["tidb-cdc:2"].watermark == 449000000000000005
    assert state.ddl_ledger[0] == (449000000000000004, "ALTER TABLE `t` ADD COLUMN c INT")


def test_ended_storage_sink_versions_persist_and_a_replay_lists_them_again(tmp_path: Path) -> None:
    """A storage-sink stream read and applied to its end leaves the window (`Windower.retire`):
    its cursor goes at the next checkpoint, its table's ended version stays in state.json; a run
    told where to start forgets the ended versions (a replay may need their rows)."""
    wh = Warehouse(tmp_path / "wh")
    state = wh.load_state()
    old, new = TP("s/t/5", 0), TP("s/t/9", 0)
    w = Windower([old, new], state.progress)
    w.offer(old, 3, [Resolved(10)])
    w.offer(new, 1, [Resolved(12)])
    assert w.watermark == 10
    w.retire(old)
    state.progress.ended_versions["s/t"] = 5
    assert w.watermark == 12 and w.partitions == [new]
    w.checkpoint()
    wh.save_state(state)
    saved = json.loads(wh.state_path.read_bytes())
    assert list(saved["positions"]) == ["s/t/9"] and saved["ended_versions"] == {"s/t": 5}
    loaded = wh.load_state().progress
    assert loaded == state.progress and loaded.ended_versions == {"s/t": 5}
    assert loaded.starting_at("earliest").ended_versions == {} and loaded.starting_at({new: 0}).ended_versions == {}
