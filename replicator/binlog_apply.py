"""Apply the seed's statement-based binary log into Delta: ``replicator run --binlog PATH...``.

The log (``replicator.formats.binlog``) carries MySQL statements with their session variables, interleaved
by transaction and closed by Commit or Rollback events. This module replays the committed ones, in
commit order, statement by statement through Spark SQL on path-based Delta tables.

Three layers, the first two pure (unit-tested without Spark):

* ``TransactionAssembler`` buffers Query events per Global Transaction ID (server_id, trans_id)
  until their Commit (Rollback discards) and numbers committed transactions 1, 2, 3... in log
  order: that number (``seq``) is the resume key, because trans ids may be reused.
* ``translate`` parses one MySQL statement with sqlglot, rejects what cannot be replayed
  deterministically, substitutes ``@variables`` as string literals, and produces Delta actions whose
  SQL is built from sqlglot-generated expressions plus backtick-quoted identifiers.
* ``BinlogApplier`` runs the actions and keeps ``<warehouse>/_replicator/binlog.json``.

Exactly once: every Delta write of statement ``i`` of transaction ``seq`` runs with Delta's
idempotent-DML confs (txnAppId ``binlog/<table uid>``, txnVersion ``seq << 28 | i << 8 | step``),
so Delta itself skips a write it already committed, atomically with the data; DDL is
check-before-alter against the real Delta schema; catalog changes (CREATE/DROP TABLE) live in the
state file, which is atomically replaced after every statement together with the progress
(``seq``, statements done). A crash anywhere therefore re-runs at most the one statement in flight,
and that re-run is a no-op if its write had landed. See README "Statement binlog".
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import sqlglot
from pydantic import BaseModel, ConfigDict, Field
from sqlglot import exp

from replicator.delta.merge import column_ddl
from replicator.delta.typemap import column_from_def, quote_ident, quote_string, spec_from_create
from replicator.delta.warehouse import Warehouse, safe_segment
from replicator.errors import (
    ConfigError,
    DdlError,
    DecodeError,
    FrameError,
    ReplicatorError,
    SchemaError,
    StateError,
    TruncatedFrameError,
    UnsupportedError,
)
from replicator.formats.binlog import BinlogEvent, read_binlog, split_binlog_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("replicator.binlog_apply")

DEFAULT_DATABASE = "default"
STATE_FORMAT = 1
STATE_FILE = "binlog.json"
TABLES_DIR = "binlog"
APP_ID_PREFIX = "binlog"
# No deletion vectors (polars and deltalake read the tables' files as they are; see
# replicator/delta/features.py). Column mapping stays: DROP COLUMN needs it, and this applier
# does not rewrite tables.
TABLE_PROPERTIES = {"delta.columnMapping.mode": "name", "delta.enableChangeDataFeed": "true"}
_STMT_BITS = 20  # statements per transaction < 2**20
_STEP_BITS = 8  # Delta writes per statement < 2**8
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_VARIABLE_SUBSTITUTE = "spark.sql.variable.substitute"

NON_DETERMINISTIC = frozenset({
    "UUID", "UUID_SHORT", "NOW", "SYSDATE", "RAND", "RANDOM_BYTES", "CURRENT_TIMESTAMP", "CURRENT_DATE",
    "CURRENT_TIME", "CURRENT_DATETIME", "CURDATE", "CURTIME", "LOCALTIME", "LOCALTIMESTAMP", "UTC_TIMESTAMP",
    "UTC_DATE", "UTC_TIME", "CONNECTION_ID", "LAST_INSERT_ID", "USER", "CURRENT_USER", "SESSION_USER",
    "SYSTEM_USER", "CURRENT_SCHEMA", "DATABASE", "SCHEMA", "VERSION", "CURRENT_VERSION", "FOUND_ROWS",
    "ROW_COUNT", "SLEEP", "BENCHMARK", "GET_LOCK", "RELEASE_LOCK", "RELEASE_ALL_LOCKS", "IS_FREE_LOCK",
    "IS_USED_LOCK", "LOAD_FILE", "MASTER_POS_WAIT", "SOURCE_POS_WAIT",
})
"""MySQL functions whose value depends on the server, the session or the clock. The seed's rule is
that the master evaluates them into a variable (``SET @tmp = UUID(); INSERT ... (@tmp)``)."""
_NO_ARG_NON_DETERMINISTIC = frozenset({"UNIX_TIMESTAMP"})  # deterministic only with an argument
_SAFE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
_USE = re.compile(r"^\s*use\b", re.IGNORECASE)
_IMPLICIT_ZERO = {
    "TINYINT": "0", "SMALLINT": "0", "INT": "0", "BIGINT": "0", "FLOAT": "0", "DOUBLE": "0", "STRING": "''",
    "BINARY": "X''",
}


# =============================================================================================
# Transaction assembly (pure)


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


def parse_use(query: str) -> str | None:
    """The database named by a ``USE db`` statement, else None."""
    if not _USE.match(query):
        return None
    try:
        tree = _parse_one(query)
    except UnsupportedError:
        return None
    return tree.this.name if isinstance(tree, exp.Use) and tree.this is not None else None


class TransactionAssembler:
    """Turns the event stream into committed transactions, in commit order.

    Query events are buffered per GTID until their Commit; Rollback discards the buffer. ``USE db``
    in a Query sets the default database of its (server_id, session_id) for statements logged after
    it (not transactional, as in MySQL). A Chain that skips a file number is a gap: it raises, so the
    transactions still open are never applied.
    """

    def __init__(self, default_database: str = DEFAULT_DATABASE) -> None:
        self.default_database = default_database
        self._open: dict[tuple[int, int], list[Statement]] = {}
        self._sessions: dict[tuple[int, int], str] = {}
        self.commits = 0
        self.rollbacks = 0

    @property
    def pending(self) -> list[tuple[int, int]]:
        """GTIDs with statements but no Commit/Rollback yet (never applied)."""
        return list(self._open)

    def feed(self, event: BinlogEvent) -> Transaction | None:
        """Consume one event; returns the transaction its Commit completes, if any."""
        msg = event.message
        if event.type == "Query":
            session = (msg.header.server_id, msg.session_id)
            use = parse_use(msg.query)
            if use is not None:
                self._sessions[session] = use
                return None
            self._open.setdefault(event.gtid, []).append(Statement(
                query=msg.query,
                variables=tuple((v.name, v.value) for v in msg.variable),
                database=self._sessions.get(session, self.default_database),
                session_id=msg.session_id,
                file=event.file,
                offset=event.offset,
            ))
        elif event.type == "Commit":
            self.commits += 1
            return Transaction(self.commits, event.gtid, tuple(self._open.pop(event.gtid, ())), event.file,
                               event.offset)
        elif event.type == "Rollback":
            self._open.pop(event.gtid, None)
            self.rollbacks += 1
        elif event.type == "Chain":
            _, seq = split_binlog_name(event.file)
            if msg.next != seq + 1:
                raise DecodeError(
                    f"gap in the log: the Chain names file number {msg.next} but the next file is number "
                    f"{seq + 1}; open transactions {sorted(self._open)} are not applied",
                    offset=event.offset, where=event.file,
                )
        return None


# =============================================================================================
# Catalog (persisted in the state file)


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


# =============================================================================================
# Translation MySQL -> Spark SQL (pure)


def _parse_one(query: str) -> exp.Expression:
    sg_log = logging.getLogger("sqlglot")
    level = sg_log.level
    sg_log.setLevel(logging.ERROR)  # "falling back to parsing as a Command" is reported by us instead
    try:
        parsed = [p for p in sqlglot.parse(query, read="mysql") if p is not None]
    except sqlglot.errors.SqlglotError as exc:
        raise UnsupportedError(f"cannot parse the statement as MySQL: {str(exc).splitlines()[0]}") from None
    finally:
        sg_log.setLevel(level)
    if len(parsed) != 1:
        raise UnsupportedError(f"expected exactly one statement, found {len(parsed)}")
    tree = parsed[0]
    if isinstance(tree, exp.Command) or not isinstance(tree, exp.Expression):
        raise UnsupportedError(f"unsupported statement syntax ({tree.name.upper()} ...)")
    return tree


def parse_statement(query: str) -> tuple[exp.Expression, bool]:
    """Parse one MySQL statement; returns (tree, is_replace). REPLACE is parsed as the INSERT it mirrors."""
    try:
        tokens = sqlglot.tokenize(query, read="mysql")
    except sqlglot.errors.SqlglotError as exc:
        raise UnsupportedError(f"cannot tokenize the statement as MySQL: {str(exc).splitlines()[0]}") from None
    if tokens and tokens[0].text.upper() == "REPLACE":
        first = tokens[0]
        return _parse_one(query[: first.start] + "INSERT" + query[first.end + 1 :]), True
    return _parse_one(query), False


def function_name(node: exp.Func) -> str:
    """Upper-case MySQL-ish name of a function node (sqlglot class or anonymous call)."""
    return node.name.upper() if isinstance(node, exp.Anonymous) else node.sql_name().upper()


def check_deterministic(tree: exp.Expression, what: str = "the statement") -> None:
    """Reject server/session/clock-dependent functions and system variables."""
    for node in tree.walk():
        if isinstance(node, exp.Func):
            name = function_name(node)
            has_args = bool(node.expressions) if isinstance(node, exp.Anonymous) else any(node.args.values())
            if name in NON_DETERMINISTIC or (name in _NO_ARG_NON_DETERMINISTIC and not has_args):
                raise UnsupportedError(
                    f"{what} calls the non-deterministic function {name}(): the master must evaluate it "
                    f"into a variable and log the statement with @variable instead"
                )
        elif isinstance(node, exp.SessionParameter):
            raise UnsupportedError(f"{what} reads the system variable @@{node.name}: not replayable")
        elif isinstance(node, exp.Placeholder):
            raise UnsupportedError(f"{what} has a ? placeholder: not replayable")


def _check_raw_text(tree: exp.Expression) -> None:
    """Nodes whose text sqlglot emits verbatim must be plain names (defence against crafted input)."""
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and not _SAFE_NAME.match(node.name):
            raise UnsupportedError(f"function name {node.name!r} is not a plain identifier")
        if isinstance(node, exp.Var) and not _SAFE_NAME.match(node.name):
            raise UnsupportedError(f"keyword {node.name!r} is not a plain word")
        if isinstance(node, (exp.Subquery, exp.Select, exp.Union)):
            raise UnsupportedError("subqueries are not supported")


def substitute_variables(tree: exp.Expression, variables: Sequence[tuple[str, str]]) -> exp.Expression:
    """Replace each user variable ``@name`` with its value from the event as a SQL string literal.

    MySQL user variable names are case-insensitive; a variable the event does not carry is an
    error (MySQL would read NULL, which here almost certainly means the master forgot to log it).
    """
    values: dict[str, str] = {}
    for name, value in variables:
        key = name.lower()
        if key in values and values[key] != value:
            raise UnsupportedError(f"variables @{name} differ only by case")
        values[key] = value
    for param in list(tree.find_all(exp.Parameter)):
        name = param.this.name if param.this is not None else ""
        if name.lower() not in values:
            raise UnsupportedError(f"the statement uses @{name}, which the event does not set")
        literal = exp.Literal.string(values[name.lower()])
        if param is tree:
            return literal
        param.replace(literal)
    return tree


def spark_sql(node: exp.Expression) -> str:
    """Spark SQL text of an expression: identifiers quoted, comments dropped, unsupported = error."""
    try:
        return node.sql(dialect="spark", identify=True, comments=False,
                        unsupported_level=sqlglot.ErrorLevel.RAISE)
    except sqlglot.errors.SqlglotError as exc:
        raise UnsupportedError(f"cannot express {node.sql('mysql')!r} in Spark SQL: {exc}") from None


def _cast(sql: str, col: ColumnInfo) -> str:
    return f"CAST({sql} AS {col.spark_type})"


def _is_default_marker(node: exp.Expression) -> bool:
    if isinstance(node, exp.Var):
        return node.name.upper() == "DEFAULT"
    if isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier):
        return not node.this.quoted and node.name.upper() == "DEFAULT"
    return False


def default_sql(col: ColumnInfo) -> str:
    """Spark SQL of the value MySQL would store for an omitted column."""
    if col.auto_increment:
        raise UnsupportedError(
            f"column {col.name!r} is AUTO_INCREMENT and the statement leaves its value to the server: "
            "log the value in the statement (or as a variable)"
        )
    if col.default is None:
        return "NULL"
    tree = _parse_one(f"SELECT {col.default}")
    assert isinstance(tree, exp.Select)
    check_deterministic(tree, f"the DEFAULT of column {col.name!r}")
    value = tree.expressions[0]
    _check_raw_text(value)
    return spark_sql(value)


class _Ctx:
    """What translation of one statement needs besides the statement."""

    def __init__(self, stmt: Statement, catalog: Catalog, seq: int, index: int, tables_root: str) -> None:
        self.stmt, self.catalog, self.seq, self.index, self.tables_root = stmt, catalog, seq, index, tables_root

    def name_of(self, node: exp.Table) -> tuple[str, str]:
        if node.catalog:
            raise UnsupportedError(f"three-part table name {node.sql('mysql')}")
        if node.args.get("joins"):
            raise UnsupportedError("multi-table statements are not supported")
        return (node.db or self.stmt.database), node.name

    def table(self, node: exp.Table) -> TableInfo:
        db, name = self.name_of(node)
        info = self.catalog.live(db, name)
        if info is None:
            raise SchemaError(f"unknown table {db}.{name}: the binlog must create it (CREATE TABLE) before use")
        return info


def _bind_columns(node: exp.Expression, table: TableInfo, qualifiers: set[str]) -> exp.Expression:
    """Resolve column references against the table (case-insensitively), dropping qualifiers."""
    for col in list(node.find_all(exp.Column)):
        if col.args.get("db") or col.args.get("catalog"):
            raise UnsupportedError(f"qualified column {col.sql('mysql')}")
        if col.table and col.table not in qualifiers:
            raise UnsupportedError(f"column {col.sql('mysql')} refers to another table")
        info = table.column(col.name)
        if info is None:
            raise SchemaError(f"unknown column {col.name!r} in table {table.name}")
        new = exp.column(exp.to_identifier(info.name, quoted=True))
        if col is node:
            return new
        col.replace(new)
    return node


def _single_table(tree: exp.Expression) -> None:
    tables = list(tree.find_all(exp.Table))
    if len(tables) != 1:
        raise UnsupportedError("multi-table statements (or statements reading another table) are not supported")


def _translate_insert(tree: exp.Insert, ctx: _Ctx, replace: bool) -> list[Action]:
    kind = "REPLACE" if replace else "INSERT"
    for arg in ("conflict", "ignore", "overwrite", "returning", "partition", "where", "by_name", "alternative"):
        if tree.args.get(arg):
            raise UnsupportedError(f"{kind} with {arg.replace('_', ' ').upper()} is not supported")
    target = tree.this
    given: list[str] | None = None
    if isinstance(target, exp.Schema):
        given = [c.name for c in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table):
        raise UnsupportedError(f"{kind} into {target.sql('mysql') if target else '?'}")
    source = tree.expression
    if not isinstance(source, exp.Values) or source.alias:
        raise UnsupportedError(f"only {kind} ... VALUES is supported (not {kind} ... SELECT)")
    _single_table(tree)
    table = ctx.table(target)
    if given is None:
        columns = list(table.columns)
    else:
        columns = []
        for name in given:
            col = table.column(name)
            if col is None:
                raise SchemaError(f"unknown column {name!r} in table {table.name}")
            if col in columns:
                raise SchemaError(f"column {col.name!r} given twice")
            columns.append(col)
    omitted = [c for c in table.columns if c not in columns]
    rows: list[list[str]] = []
    for tup in source.expressions:
        if not isinstance(tup, exp.Tuple):
            raise UnsupportedError(f"{kind} row {tup.sql('mysql')!r} is not a parenthesised value list")
        values = list(tup.expressions)
        if len(values) != len(columns):
            raise SchemaError(f"{kind} row has {len(values)} values for {len(columns)} columns of {table.name}")
        by_col: dict[str, str] = {c.name: default_sql(c) for c in omitted}
        for col, value in zip(columns, values, strict=True):
            if _is_default_marker(value):
                by_col[col.name] = default_sql(col)
                continue
            if value.find(exp.Column) is not None:
                raise UnsupportedError(f"{kind} values may not reference columns ({value.sql('mysql')})")
            if col.auto_increment and (isinstance(value, exp.Null) or (value.is_int and value.to_py() == 0)):
                raise UnsupportedError(
                    f"{value.sql('mysql')} into AUTO_INCREMENT column {col.name!r} asks the server for a value: "
                    "log the value instead"
                )
            by_col[col.name] = spark_sql(value)
        rows.append([_cast(by_col[c.name], c) for c in table.columns])
    names = ", ".join(quote_ident(c.name) for c in table.columns)
    if not (replace and table.key):  # REPLACE on a table without a key is a plain INSERT (as in MySQL)
        body = ", ".join("(" + ", ".join(r) + ")" for r in rows)
        return [Dml(table, f"INSERT INTO {table.ref} ({names}) VALUES {body}")]
    src = [f"`_c{i}`" for i in range(len(table.columns))]
    pos = {c.name: i for i, c in enumerate(table.columns)}
    body = ", ".join("(" + ", ".join([*r, str(n)]) + ")" for n, r in enumerate(rows))
    by_key = ", ".join(src[pos[k]] for k in table.key)
    on = " AND ".join(f"`t`.{quote_ident(k)} = `s`.{src[pos[k]]}" for k in table.key)
    sets = ", ".join(f"`t`.{quote_ident(c.name)} = `s`.{src[i]}" for i, c in enumerate(table.columns))
    # Later rows of one REPLACE win over earlier rows with the same key, as MySQL applies them in order.
    sql = (
        f"MERGE INTO {table.ref} AS `t` USING (SELECT {', '.join(src)} FROM (SELECT *, row_number() OVER "
        f"(PARTITION BY {by_key} ORDER BY `_rn` DESC) AS `_last` FROM VALUES {body} AS `v`({', '.join(src)}, `_rn`)) "
        f"WHERE `_last` = 1) AS `s` ON {on} WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED THEN INSERT ({names}) VALUES ({', '.join('`s`.' + s for s in src)})"
    )
    return [Dml(table, sql)]


def _qualifiers(node: exp.Table) -> set[str]:
    names = {node.name}
    if node.alias:
        names.add(node.alias)
    return names


def _reject_args(tree: exp.Expression, kind: str, args: Iterable[str]) -> None:
    for arg in args:
        if tree.args.get(arg):
            raise UnsupportedError(f"{kind} with {arg.upper()} is not supported")


def _translate_update(tree: exp.Update, ctx: _Ctx) -> list[Action]:
    _reject_args(tree, "UPDATE", ("order", "limit", "from", "returning", "joins"))
    target = tree.this
    if not isinstance(target, exp.Table):
        raise UnsupportedError("multi-table UPDATE is not supported")
    _single_table(tree)
    table = ctx.table(target)
    quals = _qualifiers(target)
    assigned: dict[str, exp.Expression] = {}  # column -> new value in terms of the old row
    for eq in tree.expressions:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            raise UnsupportedError(f"UPDATE assignment {eq.sql('mysql')!r}")
        col_node = eq.this
        if col_node.table and col_node.table not in quals:
            raise UnsupportedError(f"UPDATE assigns {col_node.sql('mysql')} of another table")
        col = table.column(col_node.name)
        if col is None:
            raise SchemaError(f"unknown column {col_node.name!r} in table {table.name}")
        value = eq.expression
        if _is_default_marker(value):
            new: exp.Expression = exp.Paren(this=sqlglot.parse_one(default_sql(col), read="spark"))
        else:
            new = _bind_columns(value.copy(), table, quals)
            # MySQL evaluates single-table assignments left to right: a later one sees earlier new values.
            for ref in list(new.find_all(exp.Column)):
                earlier = assigned.get(ref.name)
                if earlier is not None:
                    repl = exp.Paren(this=earlier.copy())
                    if ref is new:
                        new = repl
                    else:
                        ref.replace(repl)
        assigned[col.name] = new
    for col in table.columns:
        if col.on_update_now and col.name not in assigned:
            raise UnsupportedError(
                f"column {col.name!r} is ON UPDATE CURRENT_TIMESTAMP and the UPDATE leaves it to the server: "
                "log its value in the statement"
            )
    sets = ", ".join(
        f"{quote_ident(name)} = {_cast(spark_sql(e), c)}"
        for name, e in assigned.items()
        if (c := table.column(name)) is not None
    )
    where = tree.args.get("where")
    cond = f" WHERE {spark_sql(_bind_columns(where.this.copy(), table, quals))}" if where is not None else ""
    return [Dml(table, f"UPDATE {table.ref} SET {sets}{cond}")]


def _translate_delete(tree: exp.Delete, ctx: _Ctx) -> list[Action]:
    _reject_args(tree, "DELETE", ("order", "limit", "using", "tables", "returning", "cluster"))
    target = tree.this
    if not isinstance(target, exp.Table):
        raise UnsupportedError("multi-table DELETE is not supported")
    _single_table(tree)
    table = ctx.table(target)
    where = tree.args.get("where")
    cond = ""
    if where is not None:
        cond = f" WHERE {spark_sql(_bind_columns(where.this.copy(), table, _qualifiers(target)))}"
    return [Dml(table, f"DELETE FROM {table.ref}{cond}")]


def _translate_truncate(tree: exp.TruncateTable, ctx: _Ctx) -> list[Action]:
    if tree.args.get("is_database") or len(tree.expressions) != 1 or not isinstance(tree.expressions[0], exp.Table):
        raise UnsupportedError("TRUNCATE of exactly one table is supported")
    table = ctx.table(tree.expressions[0])
    return [Dml(table, f"DELETE FROM {table.ref}")]  # Delta 4.0 has no TRUNCATE; DELETE is metadata-only


def _column_flags(col: exp.ColumnDef) -> tuple[bool, bool, bool]:
    """(auto_increment, on update now, primary key) from a column definition's constraints."""
    kinds = [c.args.get("kind") for c in col.constraints]
    auto = any(isinstance(k, exp.AutoIncrementColumnConstraint) for k in kinds)
    on_update = any(isinstance(k, exp.OnUpdateColumnConstraint) for k in kinds)
    pk = any(isinstance(k, exp.PrimaryKeyColumnConstraint) for k in kinds)
    return auto, on_update, pk


def _translate_create(tree: exp.Create, ctx: _Ctx) -> list[Action]:
    kind = str(tree.args.get("kind") or "").upper()
    if kind in ("DATABASE", "SCHEMA"):
        return [Noop("databases are name spaces of the table mapping; nothing to create")]
    if kind != "TABLE":
        raise UnsupportedError(f"CREATE {kind or '?'} is not supported")
    props = tree.args.get("properties")
    for prop in props.expressions if props is not None else []:
        if isinstance(prop, exp.TemporaryProperty):
            raise UnsupportedError("CREATE TEMPORARY TABLE is not supported (session-scoped)")
        if isinstance(prop, exp.LikeProperty):
            raise UnsupportedError("CREATE TABLE ... LIKE is not supported")
    if tree.args.get("expression") is not None:
        raise UnsupportedError("CREATE TABLE ... AS SELECT is not supported")
    schema = tree.this
    if not isinstance(schema, exp.Schema) or not isinstance(schema.this, exp.Table):
        raise UnsupportedError("CREATE TABLE without a column list is not supported")
    db, name = ctx.name_of(schema.this)
    if ctx.catalog.live(db, name) is not None:
        if tree.args.get("exists"):
            return [Noop(f"table {db}.{name} exists (IF NOT EXISTS)")]
        raise DdlError(f"table {db}.{name} already exists: the replica has diverged from the master")
    try:
        spec = spec_from_create(ctx.stmt.query, db)
    except ReplicatorError as exc:
        raise DdlError(str(exc)) from None
    flags = {c.name: _column_flags(c) for c in schema.expressions if isinstance(c, exp.ColumnDef)}
    columns = tuple(
        ColumnInfo(name=c.name, spark_type=c.spark_type, nullable=c.nullable, default=c.default,
                   auto_increment=flags.get(c.name, (False, False, False))[0],
                   on_update_now=flags.get(c.name, (False, False, False))[1], comment=c.comment)
        for c in spec.columns
    )
    lowered = [c.name.lower() for c in columns]
    if len(set(lowered)) != len(lowered):
        raise DdlError(f"table {db}.{name} has duplicate column names")
    if not columns:
        raise DdlError(f"table {db}.{name} has no columns")
    uid = table_uid(db, name, ctx.seq, ctx.index)
    path = os.path.join(ctx.tables_root, safe_segment(db), f"{safe_segment(name)}-{uid}")
    info = TableInfo(uid=uid, db=db, table=name, path=path, columns=columns, key=spec.key, created_seq=ctx.seq)
    props_sql = ", ".join(f"{quote_string(k)} = {quote_string(v)}" for k, v in TABLE_PROPERTIES.items())
    comment = f" COMMENT {quote_string(spec.comment)}" if spec.comment else ""
    sql = (
        f"CREATE TABLE IF NOT EXISTS {info.ref} ({', '.join(column_ddl(c) for c in columns)}) USING delta"
        f"{comment} TBLPROPERTIES ({props_sql})"
    )
    return [CreateTable(info, sql)]


def _translate_alter(tree: exp.Alter, ctx: _Ctx) -> list[Action]:
    if str(tree.args.get("kind") or "").upper() != "TABLE" or not isinstance(tree.this, exp.Table):
        raise UnsupportedError("only ALTER TABLE is supported")
    table = ctx.table(tree.this)
    actions: list[Action] = []
    step = 0
    for act in tree.args.get("actions") or []:
        if isinstance(act, exp.ColumnDef):
            spec, pk = column_from_def(act)
            auto, on_update, _ = _column_flags(act)
            if table.column(spec.name) is not None:
                raise DdlError(f"column {spec.name!r} already exists in {table.name}")
            if pk or auto:
                raise UnsupportedError(f"ADD COLUMN {spec.name!r} with PRIMARY KEY/AUTO_INCREMENT is not supported")
            # Delta rejects NOT NULL in ADD COLUMNS: the column is added nullable.
            col = ColumnInfo(name=spec.name, spark_type=spec.spark_type, nullable=True, default=spec.default,
                             on_update_now=on_update, comment=spec.comment)
            cols = list(table.columns)
            where = ""
            position = act.args.get("position")
            if isinstance(position, exp.ColumnPosition):
                if str(position.args.get("position") or "").upper() == "FIRST":
                    cols.insert(0, col)
                    where = " FIRST"
                else:
                    after = table.column(position.this.name) if position.this is not None else None
                    if after is None:
                        raise DdlError(f"ADD COLUMN ... AFTER an unknown column of {table.name}")
                    cols.insert(cols.index(after) + 1, col)
                    where = f" AFTER {quote_ident(after.name)}"
            else:
                cols.append(col)
            table = table.model_copy(update={"columns": tuple(cols)})
            add = f"ALTER TABLE {table.ref} ADD COLUMNS ({column_ddl(col, with_not_null=False)}{where})"
            actions.append(AddColumn(table, col.name, add))
            # MySQL gives existing rows the default (or the type's implicit zero for NOT NULL): backfill.
            fill: str | None = None
            if spec.default is not None and spec.default.upper() != "NULL":
                fill = default_sql(col)
            elif spec.default is None and not spec.nullable:
                fill = _IMPLICIT_ZERO.get(col.spark_type.upper())
                if fill is None and not col.spark_type.upper().startswith("DECIMAL"):
                    raise UnsupportedError(f"ADD COLUMN {col.name!r} NOT NULL without DEFAULT for {col.spark_type}")
                fill = fill or "0"
            if fill is not None:
                step += 1
                actions.append(Dml(table, f"UPDATE {table.ref} SET {quote_ident(col.name)} = {_cast(fill, col)}",
                                   step))
        elif isinstance(act, exp.Drop) and str(act.args.get("kind") or "").upper() == "COLUMN":
            for target in act.args.get("tables") or []:
                gone = table.column(target.name)
                if gone is None:
                    if act.args.get("exists"):
                        actions.append(Noop(f"column {target.name!r} absent (IF EXISTS)"))
                        continue
                    raise DdlError(f"unknown column {target.name!r} in table {table.name}")
                if len(table.columns) == 1:
                    raise DdlError(f"cannot drop {gone.name!r}, the only column of {table.name}")
                table = table.model_copy(update={
                    "columns": tuple(c for c in table.columns if c is not gone),
                    "key": tuple(k for k in table.key if k != gone.name),
                })
                actions.append(DropColumn(table, gone.name,
                                          f"ALTER TABLE {table.ref} DROP COLUMN {quote_ident(gone.name)}"))
        else:
            raise DdlError(f"unsupported ALTER TABLE action {act.sql('mysql')!r} (only ADD COLUMN / DROP COLUMN)")
    if not actions:
        raise DdlError("ALTER TABLE without actions")
    return actions


def _translate_drop(tree: exp.Drop, ctx: _Ctx) -> list[Action]:
    kind = str(tree.args.get("kind") or "").upper()
    if kind != "TABLE":
        raise UnsupportedError(f"DROP {kind or '?'} is not supported")
    if tree.args.get("temporary"):
        raise UnsupportedError("DROP TEMPORARY TABLE is not supported")
    actions: list[Action] = []
    for node in tree.args.get("tables") or []:
        if not isinstance(node, exp.Table):
            raise UnsupportedError(f"DROP TABLE {node.sql('mysql')}")
        db, name = ctx.name_of(node)
        info = ctx.catalog.live(db, name)
        if info is None:
            if tree.args.get("exists"):
                actions.append(Noop(f"table {db}.{name} absent (IF EXISTS)"))
                continue
            raise DdlError(f"unknown table {db}.{name}: the replica has diverged from the master")
        actions.append(DropTable(info.model_copy(update={"status": "dropped"})))
    return actions


def translate(stmt: Statement, catalog: Catalog, *, seq: int = 1, index: int = 0,
              tables_root: str = "/warehouse/binlog") -> list[Action]:
    """The Delta actions replaying one MySQL statement, given the catalog before it.

    Raises UnsupportedError (syntax, non-determinism), SchemaError (unknown table/column) or
    DdlError (DDL that does not fit the replica); the caller adds the GTID and the statement.
    """
    tree, replace = parse_statement(stmt.query)
    ctx = _Ctx(stmt, catalog, seq, index, tables_root)
    if isinstance(tree, (exp.Create, exp.Alter, exp.Drop)):
        if tree.find(exp.Parameter) is not None:
            raise UnsupportedError("variables are not supported in DDL")
        if isinstance(tree, exp.Create):
            return _translate_create(tree, ctx)
        if isinstance(tree, exp.Alter):
            return _translate_alter(tree, ctx)
        return _translate_drop(tree, ctx)
    if not isinstance(tree, (exp.Insert, exp.Update, exp.Delete, exp.TruncateTable)):
        raise UnsupportedError(f"{type(tree).__name__.upper()} statements are not supported")
    if isinstance(tree, exp.Insert) and not isinstance(tree.expression, exp.Values):
        raise UnsupportedError(f"only {'REPLACE' if replace else 'INSERT'} ... VALUES is supported (not ... SELECT)")
    check_deterministic(tree)
    substitute_variables(tree, stmt.variables)  # never the root here: replaced in place
    _check_raw_text(tree)
    if isinstance(tree, exp.Insert):
        return _translate_insert(tree, ctx, replace)
    if replace:
        raise UnsupportedError("REPLACE ... SET/SELECT is not supported")
    if isinstance(tree, exp.Update):
        return _translate_update(tree, ctx)
    if isinstance(tree, exp.Delete):
        return _translate_delete(tree, ctx)
    return _translate_truncate(tree, ctx)


_GENERATED = (exp.Insert, exp.Merge, exp.Update, exp.Delete, exp.Create, exp.Alter)


def verify_generated(sql: str, path: str) -> None:
    """Self-check before Spark sees generated SQL: one statement of a generated kind, touching only
    ``delta.`path```. Quoting is meant to make this impossible to fail; this keeps it so."""
    try:
        parsed = [p for p in sqlglot.parse(sql, read="spark") if p is not None]
    except sqlglot.errors.SqlglotError as exc:
        raise UnsupportedError(f"generated SQL does not parse back ({exc.__class__.__name__})") from None
    if len(parsed) != 1 or not isinstance(parsed[0], _GENERATED):
        raise UnsupportedError("generated SQL is not exactly one INSERT/MERGE/UPDATE/DELETE/CREATE/ALTER")
    for table in parsed[0].find_all(exp.Table):
        if table.db != "delta" or table.name != path or table.catalog:
            raise UnsupportedError(f"generated SQL refers to table {table.sql('spark')!r}, not the target")


# =============================================================================================
# Durable state


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


def load_state(path: Path) -> BinlogState:
    if not path.exists():
        return BinlogState()
    try:
        state = BinlogState.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise StateError(f"{path} is unreadable: {exc}") from None
    if state.format != STATE_FORMAT:
        raise StateError(f"{path} has format {state.format}; this replicator reads {STATE_FORMAT}")
    if state.current is not None and state.current.seq <= (state.applied.seq if state.applied else 0):
        raise StateError(f"{path}: the in-flight transaction is at or before the applied one")
    return state


def save_state(path: Path, state: BinlogState) -> None:
    """Atomic, durable replace (temp file, fsync, rename, fsync directory)."""
    import datetime as dt

    path.parent.mkdir(parents=True, exist_ok=True)
    state.updated_at = dt.datetime.now(dt.UTC).isoformat()
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "wb") as f:
        f.write(state.model_dump_json(indent=1).encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


# =============================================================================================
# Applying


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
                 *, hook: Hook | None = None, default_database: str = DEFAULT_DATABASE) -> None:
        self.warehouse = Warehouse(warehouse)
        self.state_path = self.warehouse.meta / STATE_FILE
        self.tables_root = str(self.warehouse.root / TABLES_DIR)
        self._spark = spark
        self.hook = hook
        self.default_database = default_database
        self.summary = Summary()
        self.state = BinlogState()
        self.catalog = Catalog()

    @property
    def spark(self) -> SparkSession:
        """Created on first use: a run with nothing new to apply never starts a JVM."""
        if self._spark is None:
            from replicator.delta.spark import get_spark

            self._spark = get_spark()
        return self._spark

    def run(self, paths: Sequence[str | os.PathLike[str]], *, wait: bool = False) -> Summary:
        """Apply every committed transaction not yet applied; stop at the first corrupt frame or gap."""
        check_paths(paths)
        self.summary = Summary()
        with self.warehouse.locked(wait=wait):
            self.state = load_state(self.state_path)
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
        self.state.tables = self.catalog.tables()
        save_state(self.state_path, self.state)

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
        previous = conf.get(_VARIABLE_SUBSTITUTE, None)
        conf.set(_VARIABLE_SUBSTITUTE, "false")
        try:
            self.spark.sql(sql).collect()
        except ReplicatorError:
            raise
        except Exception as exc:  # Spark's AnalysisException, ParseException, runtime errors...
            first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            raise SchemaError(f"{where}: Spark rejected it: {first}") from None
        finally:
            if previous is None:
                conf.unset(_VARIABLE_SUBSTITUTE)
            else:
                conf.set(_VARIABLE_SUBSTITUTE, previous)

    def _columns_in_delta(self, path: str) -> set[str]:
        fields = self.spark.read.format("delta").load(path).schema.fieldNames()
        return {f.lower() for f in fields}

    def _action(self, action: Action, seq: int, index: int, meta: str, where: str) -> None:
        if isinstance(action, Dml):
            conf = self.spark.conf
            conf.set(_TXN_APP_ID, f"{APP_ID_PREFIX}/{action.table.uid}")
            conf.set(_TXN_VERSION, str(txn_version(seq, index, action.step)))
            conf.set(_USER_METADATA, meta)
            try:
                self._sql(action.sql, where, action.table.path)
            finally:
                conf.unset(_TXN_APP_ID)
                conf.unset(_TXN_VERSION)
                conf.unset(_USER_METADATA)
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


def cmd_run_binlog(args: Any, settings: Any, out: IO[str] | None = None) -> int:
    """``replicator run --binlog PATH... --warehouse DIR``: apply, print the summary, exit 0/non-zero."""
    stream = out if out is not None else sys.stdout
    warehouse = settings.get("warehouse", required=True)
    applier = BinlogApplier(warehouse)
    try:
        applier.run(list(args.binlog), wait=bool(settings.get("wait")))
    finally:
        if settings.get("json_summary"):
            stream.write(json.dumps(applier.summary.to_json()) + "\n")
        else:
            stream.write(applier.summary.render() + "\n")
        stream.flush()
    return 0


__all__ = [
    "Action", "AddColumn", "BinlogApplier", "BinlogState", "Catalog", "ColumnInfo", "CreateTable", "Dml",
    "DropColumn", "DropTable", "Noop", "Statement", "Summary", "TableInfo", "Transaction", "TransactionAssembler",
    "check_deterministic", "check_paths", "cmd_run_binlog", "parse_statement", "substitute_variables",
    "translate", "txn_version",
]
