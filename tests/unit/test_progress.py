"""Progress is one object: the windower updates it, the state file persists it, and a state.json
written before progress had its own type still loads and saves in the same shape."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from replicator.delta.warehouse import State, Warehouse
from replicator.engine.progress import Cursor, Progress
from replicator.engine.window import Windower
from replicator.events import DdlEvent, Resolved

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
        cursors={0: Cursor(12, 449000000000000003), 2: Cursor(7, 449000000000000005), 1: Cursor(0, 0)},
        ddl_ledger={(449000000000000004, "ALTER TABLE `t` ADD COLUMN c INT"),
                    (449000000000000005, "TRUNCATE TABLE `t`")},
    )
    assert state.applied_ts == 449000000000000005
    assert state.source == "tidb-cdc" and state.steps == 4 and state.live_table("shop", "orders") is not None


def test_state_is_saved_in_the_same_shape_byte_for_byte(tmp_path: Path) -> None:
    wh = _warehouse_with_old_state(tmp_path)
    before = wh.state_path.read_bytes()
    state = wh.load_state()
    updated_at = state.updated_at
    wh.save_state(state)
    after = json.loads(wh.state_path.read_bytes())
    assert list(after) == list(json.loads(before))  # key order kept: progress fields stay flat, in place
    after["updated_at"] = updated_at
    assert json.dumps(after, indent=1, ensure_ascii=False).encode() == before


def test_windower_updates_the_progress_the_warehouse_persists(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    state = wh.load_state()
    w = Windower([0], state.progress)
    ddl = DdlEvent(10, "s", "t", 11, "TRUNCATE TABLE t")
    w.offer(0, 0, [ddl])
    w.offer(0, 1, [Resolved(10)])
    step = w.next_step()
    assert step is not None and step.ddls == (ddl,) and not step.rows
    w.commit(step)
    assert w.checkpoint()
    assert not w.checkpoint()  # nothing moved since
    wh.save_state(state)
    saved = json.loads(wh.state_path.read_bytes())
    assert saved["applied_ts"] == 10
    assert saved["partitions"] == {"0": {"offset": 2, "watermark": 10}}
    assert saved["ddl_ledger"] == [[10, "TRUNCATE TABLE t"]]
    assert wh.load_state().progress == state.progress


def test_a_run_told_where_to_start_keeps_the_rest_of_its_progress() -> None:
    stored = Progress(7, {0: Cursor(5, 6), 1: Cursor(9, 7)}, {(7, "q")})
    assert stored.starting_at(None) is stored
    assert stored.starting_at("earliest") == Progress(7, {}, {(7, "q")})
    moved = stored.starting_at({1: 3})
    assert moved.cursors == {1: Cursor(3, 0), 0: Cursor(5, 6)} and moved.applied_ts == 7
    assert stored.cursors[1] == Cursor(9, 7)  # the stored object is not changed until progress is saved


def test_state_without_progress_fields_is_empty_progress() -> None:
    assert State.model_validate_json(b'{"format": 1}').progress == Progress()


def test_state_still_reads_in_the_state_file_shape(tmp_path: Path) -> None:
    state = _warehouse_with_old_state(tmp_path).load_state()
    assert list(state.partitions) == ["0", "2", "1"]
    assert state.partitions["2"].offset == 7 and state.partitions["2"].watermark == 449000000000000005
    assert state.ddl_ledger[0] == (449000000000000004, "ALTER TABLE `t` ADD COLUMN c INT")
