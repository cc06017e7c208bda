"""The typed event model every stage shares.

Both codecs produce these and nothing after the codec knows which wire format an event came
from. Events are immutable; a decoded column value is a plain Python value (see `Value`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum, IntEnum
from typing import NamedTuple, TypeAlias

# Python value of a column: ints (full signed/unsigned 64-bit range), float, Decimal (exact),
# date / datetime (DATETIME naive, TIMESTAMP tz-aware), str (text, TIME as its TiDB text, JSON text),
# bytes (binary), None (SQL NULL).
Value: TypeAlias = int | float | Decimal | dt.date | dt.datetime | str | bytes | None


class TypeCode(IntEnum):
    """MySQL/TiDB column type codes as TiCDC writes them (seed 'Column Type Code')."""

    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    VECTOR = 0xE1
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


INTEGER_TYPES = frozenset({TypeCode.TINY, TypeCode.SHORT, TypeCode.LONG, TypeCode.LONGLONG, TypeCode.INT24})
BLOB_TYPES = frozenset({TypeCode.TINY_BLOB, TypeCode.MEDIUM_BLOB, TypeCode.LONG_BLOB, TypeCode.BLOB})
STRING_TYPES = frozenset({TypeCode.VARCHAR, TypeCode.VAR_STRING, TypeCode.STRING})
DECIMAL_TYPES = frozenset({TypeCode.DECIMAL, TypeCode.NEWDECIMAL})
DATE_TYPES = frozenset({TypeCode.DATE, TypeCode.NEWDATE})


class Flag(IntEnum):
    """Column flag bits (seed 'Bit flags of columns'); Open Protocol `f` and Craft flags alike."""

    BINARY = 0x01
    HANDLE_KEY = 0x02
    GENERATED = 0x04
    PRIMARY_KEY = 0x08
    UNIQUE_KEY = 0x10
    MULTIPLE_KEY = 0x20
    NULLABLE = 0x40
    UNSIGNED = 0x80


class DdlCode(IntEnum):
    """The TiDB DDL type codes (`DdlEvent.ddl_type`) the pipeline itself branches on: the window
    (a table's topic goes quiet), the DDL scope, the table filter and the simulator's topics.
    Every code's Delta operation is in delta/ddl/rules.py."""

    CREATE_SCHEMA = 1
    DROP_SCHEMA = 2
    CREATE_TABLE = 3
    DROP_TABLE = 4
    RENAME_TABLE = 14
    RECOVER_TABLE = 25


class Op(str, Enum):
    """What a row change did."""

    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


class EventKind(str, Enum):
    ROW = "row"
    DDL = "ddl"
    RESOLVED = "resolved"


class TopicPartition(NamedTuple):
    """A partition of a topic: every position and watermark is kept per (topic, partition), since
    one replicator may follow several topics."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}"


TP = TopicPartition


@dataclass(frozen=True, slots=True)
class Position:
    """Where an event came from: a Kafka record (or an archived copy of one)."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"topic {self.topic!r} partition {self.partition} offset {self.offset}"


@dataclass(frozen=True, slots=True)
class Record:
    """A raw Kafka record (or an archived copy of one), as every source hands it out; here, beside
    `Position`, because the sources, the engine and the dead-letter table all take it."""

    topic: str
    partition: int
    offset: int
    timestamp: int  # ms since epoch (Kafka record timestamp), -1 when unknown
    key: bytes | None
    value: bytes | None


def where(rec: Record) -> str:
    """The record's place, in the words of `Position` (errors and logs name it the same way)."""
    return str(Position(rec.topic, rec.partition, rec.offset))


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a row image."""

    name: str
    type_code: int
    flags: int
    value: Value

    @property
    def is_handle_key(self) -> bool:
        return bool(self.flags & Flag.HANDLE_KEY)

    @property
    def is_binary(self) -> bool:
        return bool(self.flags & Flag.BINARY)

    @property
    def is_unsigned(self) -> bool:
        return bool(self.flags & Flag.UNSIGNED)


@dataclass(frozen=True, slots=True)
class RowChange:
    """A row changed event.

    `columns` is the new image (insert/update), `old_columns` the old image (update, when old
    values are enabled upstream; delete). `partition_id` is the physical partition table id
    (`ptn`) of a partitioned upstream table, else None. `only_handle_key` / `claim_check` mark
    rows that carry only the handle-key columns (TiCDC large messages): the engine dead-letters the
    first and replaces the second, a claim-check location, by the row its file holds
    (sources/claimcheck.py); any codec marks its references with these two fields.
    """

    commit_ts: int
    schema: str
    table: str
    op: Op
    columns: tuple[Column, ...] = ()
    old_columns: tuple[Column, ...] = ()
    partition_id: int | None = None
    row_id: int | None = None
    only_handle_key: bool = False
    claim_check: str | None = None
    position: Position | None = field(default=None, compare=False)

    kind = EventKind.ROW

    @property
    def image(self) -> tuple[Column, ...]:
        """The image that identifies the row after this change (old image for deletes)."""
        return self.old_columns if self.op is Op.DELETE else self.columns


@dataclass(frozen=True, slots=True)
class DdlEvent:
    """A DDL event: TiDB DDL action type code (1-36 in the seeds) and the MySQL query text."""

    commit_ts: int
    schema: str
    table: str
    ddl_type: int
    query: str
    position: Position | None = field(default=None, compare=False)

    kind = EventKind.DDL


@dataclass(frozen=True, slots=True)
class Resolved:
    """Every event with commit ts <= `ts` on this partition has been sent."""

    ts: int
    position: Position | None = field(default=None, compare=False)

    kind = EventKind.RESOLVED


Event: TypeAlias = RowChange | DdlEvent | Resolved


def tso_physical_ms(ts: int) -> int:
    """Physical part of a TiDB TSO: milliseconds since the Unix epoch."""
    return ts >> 18


def tso_from_ms(ms: int, logical: int = 0) -> int:
    """The TSO of `ms` milliseconds since the Unix epoch."""
    return (ms << 18) | logical


def tso_logical(ts: int) -> int:
    return ts & ((1 << 18) - 1)


def tso_to_datetime(ts: int) -> dt.datetime:
    """Wall-clock time (UTC) of a TSO."""
    return dt.datetime.fromtimestamp(tso_physical_ms(ts) / 1000, tz=dt.UTC)


def tso_from_datetime(when: dt.datetime, logical: int = 0) -> int:
    """TSO for a wall-clock time (naive datetimes are taken as UTC)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return tso_from_ms(int(when.timestamp() * 1000), logical)
