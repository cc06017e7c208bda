"""Durable progress and catalog of a binlog apply: ``<warehouse>/_replicator/binlog.json``."""

from __future__ import annotations

import datetime as dt
import os

from pydantic import BaseModel, Field

from replicator.binlog_apply.model import TableInfo
from replicator.errors import StateError
from replicator.storage import Location, as_location

STATE_FORMAT = 1
STATE_FILE = "binlog.json"


class Position(BaseModel):
    """A committed transaction: its commit-order number, GTID and Commit event position."""

    seq: int
    gtid: tuple[int, int]
    file: str
    offset: int


class InFlight(Position):
    """A transaction whose first ``done`` statements are applied (and recorded)."""

    done: int


class BinlogState(BaseModel):
    """``<warehouse>/_replicator/binlog.json``: progress and catalog, replaced atomically together."""

    format: int = STATE_FORMAT
    log: str | None = None
    applied: Position | None = None
    current: InFlight | None = None
    tables: list[TableInfo] = Field(default_factory=list)
    transactions: int = 0
    statements: int = 0
    updated_at: str | None = None


def load_state(path: Location | str | os.PathLike[str]) -> BinlogState:
    where = as_location(path)
    data = where.io.read(where.path)
    if data is None:
        return BinlogState()
    try:
        state = BinlogState.model_validate_json(data)
    except ValueError as exc:
        raise StateError(f"{path} is unreadable: {exc}") from None
    if state.format != STATE_FORMAT:
        raise StateError(f"{path} has format {state.format}; this replicator reads {STATE_FORMAT}")
    if state.current is not None and state.current.seq <= (state.applied.seq if state.applied else 0):
        raise StateError(f"{path}: the in-flight transaction is at or before the applied one")
    return state


def save_state(path: Location | str | os.PathLike[str], state: BinlogState) -> None:
    """Atomic, durable replace (the store's `write`): a crash leaves the old or the new state."""
    where = as_location(path)
    state.updated_at = dt.datetime.now(dt.UTC).isoformat()
    where.io.write(where.path, state.model_dump_json(indent=1).encode())
