"""A sharded warehouse read as one (replicator/delta/shardview.py): which watermarks every shard's
tables held together, the Delta version of each table there, and the readers built on it
(`replicator tables`, `replicator status`) over step logs and states written here by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.shardview import ShardedView, table_versions_at
from replicator.progress import Progress
from replicator.shards import ShardSpec
from replicator.views.listing import list_tables
from replicator.views.status import warehouse_status
from replicator.warehouse import State, TableEntry, Warehouse


def _entry(uid: str, table: str, created: int = 1, dropped: int | None = None) -> TableEntry:
    return TableEntry(uid=uid, schema="shop", table=table, path=f"/nowhere/{uid}", spec={"key": ["id"]},
                      status="live" if dropped is None else "dropped", created_ts=created, dropped_ts=dropped)


def _shard(root: Path, i: int, applied: int, steps: list[dict[str, Any]], tables: list[TableEntry]) -> None:
    wh = Warehouse(root, shard=ShardSpec(i, 2))
    wh.check_layout()
    for n, rec in enumerate(steps, 1):
        wh.log_step({"step": n, "hi": rec["applied_ts"], "recorded_at": f"2026-11-27T10:00:0{n}+00:00",
                          "kind": "window", **rec})
    wh.save_state(State(progress=Progress(applied), steps=len(steps), tables={e.uid: e for e in tables}))


def _tables(uid: str, version: int) -> dict[str, Any]:
    return {uid: {"version": version, "upserts": 1, "deletes": 0}}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Shard 0: steps at 100 (changes from 50) and 200 (from 150), applied 250 (a commit without a
    step after 200). Shard 1: steps at 100 (from 10), 180 (from 120), 260 (from 255), applied 260;
    its table `b` was dropped at 170 and `b2` created at 175."""
    root = tmp_path / "wh"
    _shard(root, 0, 250, [{"applied_ts": 100, "lo": 50, "tables": _tables("a", 1)},
                          {"applied_ts": 200, "lo": 150, "tables": _tables("a", 2)}], [_entry("a", "orders")])
    _shard(root, 1, 260, [{"applied_ts": 100, "lo": 10, "tables": _tables("b", 1)},
                          {"applied_ts": 180, "lo": 120, "tables": {**_tables("b", 2), **_tables("c", 0)}},
                          {"applied_ts": 260, "lo": 255, "tables": _tables("c", 3)}],
           [_entry("b", "items", dropped=170), _entry("c", "items", created=175)])
    return root


def test_consistent_points_are_where_every_shard_held_its_tables(root: Path) -> None:
    view = ShardedView.read(Warehouse(root))
    assert view is not None and view.applied_ts == 250
    # 100: both shards stepped there; 200: shard 1's next step (260) starts at 255; 250: the bound,
    # shard 0 applied nothing after 200 and shard 1's step at 260 starts above it. 180 is inside
    # shard 0's step ending at 200 (its changes start at 150).
    assert view.watermarks() == [100, 200, 250]
    assert [s.held(130) for s in view.shards] == [True, False]
    with pytest.raises(ValueError, match=r"inside a step of shard\(s\) 1/2.*nearest consistent point below is 100"):
        view.check_point(130)
    with pytest.raises(ValueError, match=r"not applied by shard\(s\) 0/2 yet"):
        view.check_point(255)
    at_100 = {e.uid: v for e, v in table_versions_at(view, 100)}
    assert at_100 == {"a": 1, "b": 1}  # c not created yet
    at_250 = {e.uid: v for e, v in table_versions_at(view, 250)}
    assert at_250 == {"a": 2, "c": 0}  # b dropped at 170; c as of shard 1's step at 180


def test_a_record_without_lo_starts_right_after_the_step_before(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    _shard(root, 0, 300, [{"applied_ts": 100, "tables": _tables("a", 1)},
                          {"applied_ts": 300, "tables": _tables("a", 2)}], [_entry("a", "orders")])
    _shard(root, 1, 300, [{"applied_ts": 200, "tables": {}}, {"applied_ts": 300, "tables": {}}], [])
    view = ShardedView.read(Warehouse(root))
    assert view is not None and view.watermarks() == [100, 300]


def test_tables_and_status_read_every_shard(root: Path) -> None:
    rows = list_tables(root)[1]
    assert [(r.table, r.shard, r.applied_ts) for r in rows] == [("items", "1/2", 260), ("orders", "0/2", 250)]
    assert rows[0].to_json()["shard"] == "1/2"
    doc = json.loads(json.dumps(warehouse_status(str(root), now=1e9).to_json()))
    assert doc["applied_watermark"] == 250 and doc["holder"] is None
    assert [(s["shard"], s["applied_watermark"], s["tables"], s["last_step"]["applied_ts"]) for s in doc["shards"]] \
        == [("0/2", 250, 1, 200), ("1/2", 260, 1, 260)]
    assert doc["dead_letters"] == {"total": 0, "by_reason": {}}
    assert [t["table"] for t in doc["tables"]] == ["items", "orders"]


def test_unsharded_status_has_no_shards_key(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "plain")
    wh.save_state(State(progress=Progress(5)))
    doc = warehouse_status(str(tmp_path / "plain"), now=1e9).to_json()
    assert "shards" not in doc and doc["applied_watermark"] == 5
    assert all("shard" not in r.to_json() for r in list_tables(tmp_path / "plain")[1])


def test_status_text_has_a_line_per_shard(root: Path) -> None:
    from replicator.cli.status import plain_lines

    lines = plain_lines(warehouse_status(str(root), now=1e9))
    assert lines[1].startswith("applied watermark: 250 (") and "the slowest shard's" in lines[1]
    shard_lines = [ln for ln in lines if ln.startswith("shard ")]
    assert [ln.split(":")[0] for ln in shard_lines] == ["shard 0/2", "shard 1/2"]
    assert "watermark 250" in shard_lines[0] and "1 tables, held by nobody" in shard_lines[0]
    assert not any(ln.startswith("held by") for ln in lines)


def test_tables_tsv_has_a_shard_column_only_when_sharded(root: Path, tmp_path: Path) -> None:
    from replicator.cli.tables import tsv_lines

    sharded = tsv_lines(list_tables(root)[1])
    assert sharded[0].endswith("\tcatalog\tshard") and sharded[1].endswith("\t1/2")
    Warehouse(tmp_path / "plain").save_state(State(progress=Progress(5), tables={"a": _entry("a", "orders")}))
    plain = tsv_lines(list_tables(tmp_path / "plain")[1])
    assert plain[0].endswith("\tcatalog") and len(plain[1].split("\t")) == len(plain[0].split("\t"))
