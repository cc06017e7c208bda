"""What to simulate (`SimConfig`) and the model upstream's live tables.

A model table holds its live rows, a pool of live keys to draw updates and deletes from, and the
last row image of each key (an update's old image is the previous new image).
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from replicator.codec import PROTOCOLS
from replicator.codec.limits import DEFAULT_MAX_MESSAGE_BYTES
from replicator.errors import ConfigError
from replicator.events import Column, Value
from replicator.sim.columns import ColumnDef, quote
from replicator.sim.templates import Template

DEFAULT_START: Final = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
"""Wall-clock time of the first commit ts when none is given (keeps streams reproducible)."""


@dataclass(frozen=True)
class SimConfig:
    """What to simulate. ``events`` counts original row changes (replays come on top)."""

    protocol: Literal["open", "craft", "canal-json", "simple"] = "open"
    seed: int = 1
    events: int = 5000
    partitions: int = 3
    tables: int = 4
    ddl: str | Sequence[str] | None = "auto"
    start_time: dt.datetime = DEFAULT_START
    max_batch_size: int = 16  # rows per Kafka message (TiCDC's max-batch-size)
    resolved_every: int = 40  # mean transactions between resolved events, per partition
    retry_rate: float = 0.01  # per transaction: re-send a few recent events of one partition
    restart_rate: float = 0.0005  # per transaction: a changefeed restart re-sends from the checkpoint
    max_txn_rows: int = 40
    # TiCDC large-message handling (open, canal-json, simple): every message value compressed with
    # `compression` (none, lz4, snappy); with `claim_check_dir`, a row whose message would exceed
    # `max_message_bytes` is written there as a claim-check file and sent as a reference
    compression: str = "none"
    claim_check_dir: str | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # a table the plan drops is created again later (False: it stays dropped, e.g. so that its
    # topic stays quiet in a topic-per-table dispatch, sim/topics.py)
    recreate_dropped: bool = True
    # the first `insert_only` tables take inserts only (append-only tables such as logs and events,
    # the shape a Delta append suits); the rest take the usual mix
    insert_only: int = 0
    # TiCDC's partition dispatcher for rows: "index-value" (a hash of the table and the row's handle
    # key: a table's rows spread over every partition) or "table" (a hash of the table's name: all of
    # a table's rows on one partition, so a busy table makes a busy partition)
    dispatcher: Literal["index-value", "table"] = "index-value"
    # the share of row changes that go to the first table (0: every table by its template's weight,
    # else the rest share 1 - hot_share by their weights): with dispatcher="table", a skewed stream
    # whose hot table's partition carries most rows (the bench's skew section)
    hot_share: float = 0.0

    def __post_init__(self) -> None:
        if self.compression not in ("none", "lz4", "snappy"):
            raise ConfigError(f"--compression must be none, lz4 or snappy, not {self.compression!r}")
        if (self.compression != "none" or self.claim_check_dir) and self.protocol == "craft":
            raise ConfigError("large-message handling (--compression, --claim-check-dir) is for the open, "
                              "canal-json and simple protocols: TiCDC has none for craft")
        if self.max_message_bytes < 1:
            raise ConfigError("--max-message-bytes must be >= 1")
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"protocol must be {' or '.join(PROTOCOLS)}, not {self.protocol!r}")
        if self.events < 0:
            raise ConfigError("--events must be >= 0")
        if not 1 <= self.partitions <= 1024:
            raise ConfigError("--partitions must be 1..1024")
        if self.tables < 1:
            raise ConfigError("--tables must be >= 1")
        if not 0 <= self.insert_only <= self.tables:
            raise ConfigError("insert_only must be 0..tables")
        if self.dispatcher not in ("index-value", "table"):
            raise ConfigError(f"dispatcher must be index-value or table, not {self.dispatcher!r}")
        if not 0.0 <= self.hot_share < 1.0:
            raise ConfigError("hot_share must be in [0, 1)")
        if self.max_batch_size < 1 or self.resolved_every < 1 or self.max_txn_rows < 1:
            raise ConfigError("max_batch_size, resolved_every and max_txn_rows must be >= 1")


class KeyPool:
    """Live keys with O(1) insert, delete and uniform random choice."""

    def __init__(self) -> None:
        self.items: list[tuple[Value, ...]] = []
        self.index: dict[tuple[Value, ...], int] = {}

    def add(self, key: tuple[Value, ...]) -> None:
        self.index[key] = len(self.items)
        self.items.append(key)

    def remove(self, key: tuple[Value, ...]) -> None:
        i = self.index.pop(key)
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.index[last] = i

    def clear(self) -> None:
        self.items.clear()
        self.index.clear()

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class ModelTable:
    """One table of the model upstream: its template, current name and columns, and live rows."""

    template: Template
    name: str
    columns: list[ColumnDef]
    live: bool = False
    insert_only: bool = False  # inserts only: no key pool or cached image (nothing updates or deletes its rows)
    rows: dict[tuple[Value, ...], dict[str, Value]] = field(default_factory=dict)
    keys: KeyPool = field(default_factory=KeyPool)
    counter: int = 0
    freed: deque[tuple[Value, ...]] = field(default_factory=lambda: deque(maxlen=64))
    # (name, type code, flags) per column, and each live row's last image: building Column objects
    # dominates generation time, and an update's old image is the previous new image.
    shape: list[tuple[str, int, int]] = field(default_factory=list)
    images: dict[tuple[Value, ...], tuple[Column, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.set_columns(self.columns)

    def set_columns(self, columns: list[ColumnDef]) -> None:
        self.columns = columns
        self.shape = [(c.name, c.type_code, c.flags(c.name in self.template.key)) for c in columns]
        self.images.clear()

    def image(self, key: tuple[Value, ...], row: Mapping[str, Value]) -> tuple[Column, ...]:
        img = self.images.get(key)
        if img is None:
            img = tuple(Column(n, code, flags, row[n]) for n, code, flags in self.shape)
            self.images[key] = img
        return img

    def clear(self) -> None:
        self.rows.clear()
        self.keys.clear()
        self.images.clear()

    @property
    def schema(self) -> str:
        return self.template.schema

    @property
    def key(self) -> tuple[str, ...]:
        return self.template.key

    @property
    def qualified(self) -> str:
        return f"{quote(self.schema)}.{quote(self.name)}"

    def create_sql(self) -> str:
        cols = ", ".join(c.definition(c.name in self.key) for c in self.columns)
        pk = ", ".join(quote(k) for k in self.key)
        return (f"CREATE TABLE {self.qualified} ({cols}, PRIMARY KEY ({pk})) "
                "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")

    def column_def(self, name: str) -> ColumnDef | None:
        return next((c for c in self.columns if c.name == name), None)
