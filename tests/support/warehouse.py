"""What a warehouse's progress file (`_replicator/state.json`) says, read the way a test needs it."""

from __future__ import annotations

import json
from pathlib import Path

from replicator.shards import ShardSpec
from replicator.warehouse import Warehouse


def applied_ts(warehouse: Path | str, shard: ShardSpec | None = None) -> int:
    """The applied ts of a warehouse (with `shard`, of that shard's progress): the upstream commit
    ts its state.json says every table holds; 0 before the first step commits."""
    return Warehouse(warehouse, shard=shard).load_state().applied_ts


def steps_done(warehouse: Path | str) -> int:
    """Steps committed to the warehouse's progress file (0 before the first). Read leniently, for
    a run in another process that may be writing it."""
    state = Warehouse(warehouse).state_path
    if not state.exists():
        return 0
    try:
        return int(json.loads(state.read_text())["steps"])
    except (ValueError, KeyError):  # replaced atomically, but be lenient
        return 0
