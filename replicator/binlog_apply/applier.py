"""Applying committed transactions to Delta, exactly once (see the package docstring)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicator.binlog_apply.assembly import TransactionAssembler
from replicator.binlog_apply.model import (
    DEFAULT_DATABASE,
    Action,
    AddColumn,
    Catalog,
    CreateTable,
    Dml,
    DropColumn,
    DropTable,
    Transaction,
    txn_version,
)
from replicator.binlog_apply.translate import translate, verify_generated
from replicator.delta.session import DeltaSession, is_conflict
from replicator.errors import (
    ConfigError,
    DecodeError,
    FrameError,
    ReplicatorError,
    SchemaError,
    StateError,
    TruncatedFrameError,
    UnsupportedError,
)
from replicator.formats.binlog import read_binlog, split_binlog_name
from replicator.storage.lease import DEFAULT_LEASE_SECONDS
from replicator.warehouse import Warehouse
from replicator.warehouse.binlog_state import STATE_FILE, BinlogState, InFlight, Position, load_state, state_bytes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("replicator.binlog_apply")

TABLES_DIR = "binlog"
APP_ID_PREFIX = "binlog"
VARIABLE_SUBSTITUTE = "spark.sql.variable.substitute"


@dataclass
class Summary:
    """What one run did (printed by the CLI)."""

    applied: int = 0
    skipped: int = 0
    rolled_back: int = 0
    statements: int = 0
    resumed: bool = False
    pending: list[tuple[int, int]] = field(default_factory=list)
    last_gtid: tuple[int, int] | None = None
    last_seq: int = 0
    stopped: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "transactions_applied": self.applied, "transactions_skipped": self.skipped,
            "transactions_rolled_back": self.rolled_back, "statements": self.statements, "resumed": self.resumed,
            "pending": [list(g) for g in self.pending],
            "last_gtid": list(self.last_gtid) if self.last_gtid else None, "last_seq": self.last_seq,
            "stopped": self.stopped,
        }

    def render(self) -> str:
        last = f"({self.last_gtid[0]},{self.last_gtid[1]}) (commit #{self.last_seq})" if self.last_gtid else "none"
        lines = [
            f"binlog: {self.applied} transaction(s) applied ({self.statements} statement(s)), "
            f"{self.skipped} already applied, {self.rolled_back} rolled back, "
            f"{len(self.pending)} uncommitted{' (resumed one in flight)' if self.resumed else ''}",
            f"last applied GTID: {last}",
        ]
        if self.stopped:
            lines.append(f"stopped: {self.stopped}")
        return "\n".join(lines)


Hook = Callable[[str, int, int], None]
"""Test hook called as hook(point, seq, index) with point "before" a statement runs and "after" its
Delta writes, before its progress is recorded; raising from it simulates a crash there."""


def check_paths(paths: Sequence[str | os.PathLike[str]]) -> None:
    """A log must be read from its first file: later files may commit transactions begun earlier."""
    if not paths:
        raise ConfigError("--binlog needs at least one file")
    bases: set[Path] = set()
    for p in paths:
        base, seq = split_binlog_name(p)
        if seq > 1 and base.resolve() not in bases:
            raise ConfigError(
                f"{p} is file {seq} of the log that starts at {base}: give {base} first (starting in the "
                "middle would miss the statements of transactions that began in earlier files)"
            )
        bases.add(base.resolve())


def _short(query: str, limit: int = 300) -> str:
    one = " ".join(query.split())
    return one if len(one) <= limit else one[:limit] + "..."


def _relocate(exc: ReplicatorError, where: str) -> ReplicatorError:
    """The same kind of error, prefixed with the GTID and statement it concerns."""
    if isinstance(exc, DecodeError):
        return exc
    return type(exc)(f"{where}: {exc}")


class BinlogApplier:
    """Replays committed transactions of a binlog into a warehouse, exactly once."""

    def __init__(self, warehouse: str | os.PathLike[str], spark: SparkSession | None = None,
                 *, hook: Hook | None = None, default_database: str = DEFAULT_DATABASE,
                 lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self.warehouse = Warehouse(warehouse, lease_seconds=lease_seconds)
        self.state_path = self.warehouse.meta / STATE_FILE
        self.tables_root = (self.warehouse.base / TABLES_DIR).path
        self._spark = spark
        self._delta: DeltaSession | None = None
        self.hook = hook
        self.default_database = default_database
        self.summary = Summary()
        self.state = BinlogState()
        self.catalog = Catalog()

    @property
    def spark(self) -> SparkSession:
        """Created on first use: a run with nothing new to apply never starts a JVM."""
        if self._spark is None:
            from replicator.runtime.spark import get_spark

            self._spark = get_spark()
        return self._spark

    @property
    def delta(self) -> DeltaSession:
        """Every Delta statement goes through one DeltaSession: idempotent-write confs, conflict retries."""
        if self._delta is None:
            lease = self.warehouse.lease
            if lease is not None and self.warehouse.on_object_store:  # commits fenced in the JVM too
                from replicator.runtime import commitfence

                commitfence.arm(self.spark, lease, self.warehouse.root)
            self._delta = DeltaSession(self.spark)
            self._delta.fence = self.warehouse.fence
            self._delta.epoch = self.warehouse.epoch
        return self._delta

    def run(self, paths: Sequence[str | os.PathLike[str]], *, wait: bool = False) -> Summary:
        """Apply every committed transaction not yet applied; stop at the first corrupt frame or gap."""
        check_paths(paths)
        self.summary = Summary()
        with self.warehouse.locked(wait=wait):
            self._delta = None  # built (and its commits fenced) under this run's lease
            held = self.warehouse.read_own(self.state_path)  # the holder's read: its writes are conditional on it
            self.state = load_state(self.state_path, held) if held is not None else BinlogState()
            self.catalog = Catalog(self.state.tables)
            self.state.log = str(Path(paths[0]).resolve())
            assembler = TransactionAssembler(self.default_database)
            try:
                try:
                    for event in read_binlog(paths):
                        txn = assembler.feed(event)
                        if txn is not None:
                            self._transaction(txn)
                except TruncatedFrameError as exc:
                    # A writer mid-append (or killed mid-append): the complete frames before it count.
                    self.summary.stopped = f"log ends inside a frame, the rest is read next time ({exc})"
                except DecodeError as exc:
                    what = "corrupt log" if isinstance(exc, FrameError) else "log unreadable"
                    self.summary.stopped = f"{what}, nothing after this point applied: {exc}"
                    raise
                applied = self.state.applied.seq if self.state.applied else 0
                expected = self.state.current.seq if self.state.current else applied
                if assembler.commits < expected:
                    raise StateError(
                        f"the warehouse has applied commit #{expected} but this log holds only "
                        f"{assembler.commits} commits: is it the same log?"
                    )
            finally:
                self.summary.rolled_back = assembler.rollbacks
                self.summary.pending = assembler.pending
                if self.state.applied is not None:
                    self.summary.last_gtid = self.state.applied.gtid
                    self.summary.last_seq = self.state.applied.seq
        return self.summary

    # -- one transaction -------------------------------------------------------------------------
    def _check_same(self, recorded: Position, txn: Transaction) -> None:
        if tuple(recorded.gtid) != txn.gtid or Path(recorded.file).name != Path(txn.file).name \
                or recorded.offset != txn.offset:
            raise StateError(
                f"this log's commit #{txn.seq} is GTID {txn.gtid} at {txn.file}:{txn.offset}, but the warehouse "
                f"recorded GTID {tuple(recorded.gtid)} at {recorded.file}:{recorded.offset}: a different log?"
            )

    def _transaction(self, txn: Transaction) -> None:
        state = self.state
        if state.applied is not None and txn.seq <= state.applied.seq:
            if txn.seq == state.applied.seq:
                self._check_same(state.applied, txn)
            self.summary.skipped += 1
            return
        start = 0
        if state.current is not None and state.current.seq == txn.seq:
            self._check_same(state.current, txn)
            start = state.current.done
            self.summary.resumed = True
        n = len(txn.statements)
        for index in range(start, n):
            self._statement(txn, index)
            if index + 1 < n:
                state.current = InFlight(seq=txn.seq, gtid=txn.gtid, file=txn.file, offset=txn.offset, done=index + 1)
                self._save()
        state.applied = Position(seq=txn.seq, gtid=txn.gtid, file=txn.file, offset=txn.offset)
        state.current = None
        state.transactions += 1
        self._save()
        self.summary.applied += 1
        self.summary.last_gtid, self.summary.last_seq = txn.gtid, txn.seq

    def _save(self) -> None:
        """binlog.json, written by token: conditional on what this holder last read or wrote, and
        stamped with its lease epoch (a stale run's late write never replaces a newer one's)."""
        self.state.tables = self.catalog.tables()
        self.state.epoch = self.warehouse.epoch()
        self.warehouse.write_own(self.state_path, state_bytes(self.state))

    def _statement(self, txn: Transaction, index: int) -> None:
        stmt = txn.statements[index]
        where = (
            f"GTID ({txn.gtid[0]},{txn.gtid[1]}) (commit #{txn.seq}, statement {index + 1} of "
            f"{len(txn.statements)} at {stmt.file}:{stmt.offset}) {_short(stmt.query)!r}"
        )
        try:
            actions = translate(stmt, self.catalog, seq=txn.seq, index=index, tables_root=self.tables_root)
        except ReplicatorError as exc:
            raise _relocate(exc, where) from None
        if self.hook is not None:
            self.hook("before", txn.seq, index)
        meta = json.dumps({"gtid": list(txn.gtid), "seq": txn.seq, "statement": index}, sort_keys=True)
        for action in actions:
            self._action(action, txn.seq, index, meta, where)
        if self.hook is not None:
            self.hook("after", txn.seq, index)
        self.state.statements += 1
        self.summary.statements += 1

    # -- Delta -----------------------------------------------------------------------------------
    def _sql(self, sql: str, where: str, path: str) -> None:
        try:
            verify_generated(sql, path)
        except UnsupportedError as exc:
            raise UnsupportedError(f"{where}: {exc}") from None
        conf = self.spark.conf
        # Spark rewrites ${name} / ${env:NAME} in the SQL *text* before parsing, string literals
        # included: a logged value must never be able to pull in a conf or environment variable.
        previous = conf.get(VARIABLE_SUBSTITUTE, None)
        conf.set(VARIABLE_SUBSTITUTE, "false")
        try:
            self.delta.sql_retrying(sql, f"{where}: Delta write to {path}")
        except ReplicatorError:
            raise
        except Exception as exc:  # Spark's AnalysisException, ParseException, runtime errors...
            first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            if is_conflict(exc):
                raise StateError(
                    f"{where}: a concurrent writer committed first {self.delta.max_retries + 1} times ({first}); "
                    "nothing of this statement committed: run again once the other writer is done"
                ) from None
            raise SchemaError(f"{where}: Spark rejected it: {first}") from None
        finally:
            if previous is None:
                conf.unset(VARIABLE_SUBSTITUTE)
            else:
                conf.set(VARIABLE_SUBSTITUTE, previous)

    def _columns_in_delta(self, path: str) -> set[str]:
        fields = self.spark.read.format("delta").load(path).schema.fieldNames()
        return {f.lower() for f in fields}

    def _action(self, action: Action, seq: int, index: int, meta: str, where: str) -> None:
        if isinstance(action, Dml):
            app_id = f"{APP_ID_PREFIX}/{action.table.uid}"
            with self.delta.idempotent(app_id, txn_version(seq, index, action.step), meta):
                self._sql(action.sql, where, action.table.path)
        elif isinstance(action, CreateTable):
            # IF NOT EXISTS at a deterministic path: a re-run after a crash is a no-op
            self._sql(action.sql, where, action.table.path)
            self.catalog.put(action.table)
        elif isinstance(action, AddColumn):
            if action.column.lower() not in self._columns_in_delta(action.table.path):
                self._sql(action.sql, where, action.table.path)
            self.catalog.put(action.table)
        elif isinstance(action, DropColumn):
            if action.column.lower() in self._columns_in_delta(action.table.path):
                self._sql(action.sql, where, action.table.path)
            self.catalog.put(action.table)
        elif isinstance(action, DropTable):
            self.catalog.put(action.table)
        else:
            log.info("%s: %s", where, action.reason)

