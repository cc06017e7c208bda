"""Durable progress and catalog of a binlog apply: ``<warehouse>/_replicator/binlog.json``.

Written by the binlog applier (``replicator.binlog_apply``); it lives in warehouse/, beside the
Kafka run's state file (store.py), because the warehouse's table listing (listing.py) reads
both catalogs and sits below the applier."""

from __future__ import annotations

import datetime as dt
import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from replicator.errors import StateError
from replicator.mysql.tokens import quote_ident
from replicator.storage import Location, as_location
from replicator.warehouse.store import read_state_file

STATE_FORMAT = 1
STATE_FILE = "binlog.json"


class ColumnInfo(BaseModel):
    """A column as the replayed statements see it (MySQL default kept as MySQL SQL text)."""

    model_config = ConfigDict(frozen=True)

    name: str
    spark_type: str
    nullable: bool = True
    default: str | None = None
    auto_increment: bool = False
    on_update_now: bool = False
    comment: str | None = None


class TableInfo(BaseModel):
    """A replayed table: MySQL (db, table) -> the path-based Delta table at ``path``."""

    model_config = ConfigDict(frozen=True)

    uid: str
    db: str
    table: str
    path: str
    columns: tuple[ColumnInfo, ...]
    key: tuple[str, ...] = ()
    status: Literal["live", "dropped"] = "live"
    created_seq: int = 0

    def column(self, name: str) -> ColumnInfo | None:
        """Column by name, case-insensitively (MySQL column names are)."""
        low = name.lower()
        return next((c for c in self.columns if c.name.lower() == low), None)

    @property
    def ref(self) -> str:
        """The table in Spark SQL: ``delta.`<path>```."""
        return "delta." + quote_ident(self.path)

    @property
    def name(self) -> str:
        return f"{self.db}.{self.table}"


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
    # The lease epoch of the run that wrote it (storage/fenced.py): a refused write compares it.
    epoch: int = 0
    updated_at: str | None = None


def load_state(path: Location | str | os.PathLike[str], data: bytes | None = None) -> BinlogState:
    """binlog.json at `path` (`data`: its bytes, already read; else read here); an empty state
    when absent."""
    state = read_state_file(as_location(path), BinlogState, STATE_FORMAT, data) or BinlogState()
    if state.current is not None and state.current.seq <= (state.applied.seq if state.applied else 0):
        raise StateError(f"{path}: the in-flight transaction is at or before the applied one")
    return state


def save_state(path: Location | str | os.PathLike[str], state: BinlogState) -> None:
    """Atomic, durable replace (the store's `write`): a crash leaves the old or the new state."""
    where = as_location(path)
    where.io.write(where.path, state_bytes(state))


def state_bytes(state: BinlogState) -> bytes:
    """binlog.json's bytes, stamped with the time."""
    state.updated_at = dt.datetime.now(dt.UTC).isoformat()
    return state.model_dump_json(indent=1).encode()
