"""What the binlog applier works with: statements and committed transactions, the table catalog
(persisted in ``binlog.json``) and the Delta actions one statement translates to. Pure."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from replicator.errors import UnsupportedError
from replicator.warehouse.binlog_state import TableInfo

DEFAULT_DATABASE = "default"
_STMT_BITS = 20  # statements per transaction < 2**20
_STEP_BITS = 8  # Delta writes per statement < 2**8


# =============================================================================================
# Statements and transactions


@dataclass(frozen=True)
class Statement:
    """One Query event's statement with everything needed to replay it."""

    query: str
    variables: tuple[tuple[str, str], ...] = ()
    database: str = DEFAULT_DATABASE
    session_id: int = 0
    file: str = ""
    offset: int = 0


@dataclass(frozen=True)
class Transaction:
    """A committed transaction: ``seq`` is its 1-based position in commit order."""

    seq: int
    gtid: tuple[int, int]
    statements: tuple[Statement, ...]
    file: str = ""
    offset: int = 0  # of the Commit event



# =============================================================================================
# Catalog (its tables persisted in the state file, replicator/warehouse/binlog_state.py)


class Catalog:
    """Live and dropped tables by uid; (db, table) names are case-sensitive as on MySQL/Linux."""

    def __init__(self, tables: Iterable[TableInfo] = ()) -> None:
        self._by_uid: dict[str, TableInfo] = {t.uid: t for t in tables}

    def live(self, db: str, table: str) -> TableInfo | None:
        return next((t for t in self._by_uid.values() if t.status == "live" and t.db == db and t.table == table),
                    None)

    def put(self, table: TableInfo) -> None:
        self._by_uid[table.uid] = table

    def tables(self) -> list[TableInfo]:
        return list(self._by_uid.values())

    def copy(self) -> Catalog:
        return Catalog(self._by_uid.values())


# =============================================================================================
# Actions: what one statement does to Delta


@dataclass(frozen=True)
class Dml:
    """One idempotent Delta write (INSERT/MERGE/UPDATE/DELETE); ``step`` orders writes of a statement."""

    table: TableInfo
    sql: str
    step: int = 0


@dataclass(frozen=True)
class CreateTable:
    table: TableInfo
    sql: str


@dataclass(frozen=True)
class AddColumn:
    table: TableInfo  # after the change
    column: str
    sql: str


@dataclass(frozen=True)
class DropColumn:
    table: TableInfo  # after the change
    column: str
    sql: str


@dataclass(frozen=True)
class DropTable:
    table: TableInfo  # status dropped; the data stays at its path


@dataclass(frozen=True)
class Noop:
    reason: str


Action = Dml | CreateTable | AddColumn | DropColumn | DropTable | Noop


def txn_version(seq: int, index: int, step: int = 0) -> int:
    """Delta txnVersion of write ``step`` of statement ``index`` of transaction ``seq``: monotone in log order."""
    if not 0 <= index < 1 << _STMT_BITS:
        raise UnsupportedError(f"a transaction may hold at most {1 << _STMT_BITS} statements")
    if not 0 <= step < 1 << _STEP_BITS:
        raise UnsupportedError(f"a statement may make at most {1 << _STEP_BITS} Delta writes")
    return (seq << (_STMT_BITS + _STEP_BITS)) | (index << _STEP_BITS) | step


def table_uid(db: str, table: str, seq: int, index: int) -> str:
    """Deterministic: the CREATE re-run after a crash lands on the same path (IF NOT EXISTS no-op)."""
    return hashlib.sha256(f"{db}\x00{table}\x00{seq}\x00{index}".encode()).hexdigest()[:12]

