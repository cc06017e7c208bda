"""Translation MySQL -> Spark SQL (pure): one logged statement -> the Delta actions replaying it.

The statement is parsed with sqlglot; what cannot be replayed deterministically is rejected;
``@variables`` become string literals; the SQL produced is built from sqlglot-generated
expressions plus backtick-quoted identifiers, and checked again (`verify_generated`) before Spark
sees it.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Sequence

import sqlglot
from sqlglot import exp

from replicator.binlog_apply.model import (
    Action,
    AddColumn,
    Catalog,
    CreateTable,
    Dml,
    DropColumn,
    DropTable,
    Noop,
    Statement,
    table_uid,
)
from replicator.delta.typemap import column_from_def, quote_string, spec_from_create
from replicator.delta.writer import column_ddl
from replicator.errors import DdlError, ReplicatorError, SchemaError, UnsupportedError
from replicator.mysql.tokens import quote_ident
from replicator.warehouse.binlog_state import ColumnInfo, TableInfo
from replicator.warehouse.store import safe_segment

# Column mapping: this applier's DROP COLUMN needs it (it does not rewrite tables). No change data
# feed: with column mapping, Delta's CDF path rejects an UPDATE on a column whose name holds a
# backtick ("INVALID_ATTRIBUTE_NAME_SYNTAX ... packedData.`co'l`;--`"; tests/integration/test_binlog_apply.py).
TABLE_PROPERTIES = {"delta.columnMapping.mode": "name", "delta.enableDeletionVectors": "true"}

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



def parse_use(query: str) -> str | None:
    """The database named by a ``USE db`` statement, else None."""
    if not _USE.match(query):
        return None
    try:
        tree = _parse_one(query)
    except UnsupportedError:
        return None
    return tree.this.name if isinstance(tree, exp.Use) and tree.this is not None else None



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

