"""Which tables a DDL affects: the barrier it puts between rows (engine/plan.py).

Read from the event and its query, before the DDL is applied and without the catalog: the table
itself and every table the statement names (both names of a RENAME, the source of CREATE TABLE
LIKE, every table of a DROP TABLE / TRUNCATE list), every table of a DROP SCHEMA's schema, none for
codes that are no-ops on the Delta side. When the query cannot be read, or the code is unknown,
the DDL is a barrier for every table: too wide a scope only costs concurrency, too narrow a one
would reorder rows.
"""

from __future__ import annotations

from sqlglot import exp

from replicator.delta.ddl.rules import DDL_TYPES
from replicator.delta.typemap import parse_sql
from replicator.errors import DdlError
from replicator.events import DdlCode, DdlEvent
from replicator.mysql.partitions import parse_partition_op, split_partition_clause
from replicator.mysql.statements import Name, parse_add_column_list, parse_recover, parse_renames
from replicator.mysql.tokens import sanitize
from replicator.tables import EVERYTHING, NOTHING, DdlScope

RERUNNABLE = frozenset({2, 3, 4, 14, 15, 17, 19, 25, 32, 33})
"""Codes whose re-application after later rows of their tables changes none of those rows: catalog
only (drop/rename/recover, partition definitions, keys) or an idempotent Delta change that leaves
columns and rows alone (CREATE TABLE IF NOT EXISTS at its deterministic path, a comment, a
default). The others (ADD/DROP/MODIFY COLUMN with their backfills and rewrites, TRUNCATE, partition
deletes) must not run again after rows that follow them, so those rows wait for the next step."""


def ddl_scope(ddl: DdlEvent) -> DdlScope:
    """The tables `ddl` is a barrier for (see the module doc)."""
    rule = DDL_TYPES.get(ddl.ddl_type)
    if rule is None:
        return EVERYTHING
    if rule.kind != "apply" or ddl.ddl_type == DdlCode.CREATE_SCHEMA:
        return NOTHING  # no table data or shape changes
    try:
        if ddl.ddl_type == DdlCode.DROP_SCHEMA:
            return _drop_schema(ddl)
        names = _named_tables(ddl)
    except (DdlError, ValueError):
        return EVERYTHING
    if ddl.table:
        names.add((ddl.schema, ddl.table))
    return DdlScope.of(*names, rerunnable=ddl.ddl_type in RERUNNABLE) if names else EVERYTHING


def _drop_schema(ddl: DdlEvent) -> DdlScope:
    stmt = parse_sql(sanitize(ddl.query))
    name = ""
    if isinstance(stmt, exp.Drop) and isinstance(stmt.this, exp.Table):
        name = stmt.this.name or stmt.this.db
    name = name or ddl.schema
    return DdlScope.of(schemas=[name], rerunnable=True) if name else EVERYTHING


def _named_tables(ddl: DdlEvent) -> set[tuple[str, str]]:
    """Every table the query names, schema-qualified (the event's schema by default)."""
    query = sanitize(ddl.query)
    names: set[tuple[str, str]] = set()

    def add(name: Name) -> None:
        names.add((name[0] or ddl.schema, name[1]))

    if ddl.ddl_type == DdlCode.RENAME_TABLE:
        for old, new in parse_renames(query):
            add(old)
            add((new[0] or old[0], new[1]))
        return names
    if ddl.ddl_type == DdlCode.RECOVER_TABLE:
        stmt = parse_recover(query)
        schema = stmt.schema or ddl.schema
        names.add((schema, stmt.table or ddl.table))
        if stmt.new_name:
            names.add((schema, stmt.new_name))
        return names
    listed = parse_add_column_list(query)
    if listed is not None:
        add(listed[0])
        return names
    head, _ = split_partition_clause(query)
    try:
        parsed = parse_sql(head)
    except DdlError:
        op = parse_partition_op(query)  # ALTER TABLE .. ADD/DROP/TRUNCATE PARTITION
        if op is None:
            raise
        names.add((op.schema or ddl.schema, op.table))
        return names
    for table in parsed.find_all(exp.Table):
        if table.name:
            names.add((table.db or ddl.schema, table.name))
    return names
