"""DDL on schemas, tables and partitions: CREATE/DROP/RECOVER/TRUNCATE/RENAME, partition DDL,
and the merge key a table adopts from its rows after DROP PRIMARY KEY."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from sqlglot import exp

from replicator.delta.ddl.base import (
    DdlOutcome,
    _outcome,
    _set_spec,
    _target,
    _unknown,
)
from replicator.delta.ddl.partitions import partition_predicate
from replicator.delta.typemap import parse_sql, spec_from_create
from replicator.delta.writer import delta_ref
from replicator.errors import DdlError
from replicator.events import DdlEvent, RowChange
from replicator.mysql.partitions import add_partitions, parse_partition_op, parse_partitioning, split_partition_clause
from replicator.mysql.statements import Name, parse_recover, parse_renames
from replicator.mysql.tokens import sanitize
from replicator.tables import TableSpec
from replicator.warehouse import State, TableEntry, table_uid

if TYPE_CHECKING:
    from replicator.delta.ddl.ops import DdlOps
    pass

# ---------------------------------------------------------------------------------------------
# Schemas and tables

def _create_schema(self: DdlOps, state: State, ddl: DdlEvent) -> DdlOutcome:
    """Schemas are only names (directories): record it so `replicator tables` can group by it."""
    stmt = parse_sql(sanitize(ddl.query))
    name = ""
    if isinstance(stmt, exp.Create) and isinstance(stmt.this, exp.Table):
        name = stmt.this.name or stmt.this.db
    name = name or ddl.schema
    if name not in state.schemas:
        state.schemas.append(name)
        return DdlOutcome("applied", f"schema {name} recorded")
    return DdlOutcome("no-op", f"schema {name} already exists")


def _drop_schema(self: DdlOps, state: State, ddl: DdlEvent) -> DdlOutcome:
    """Drop = hide: every live table of the schema becomes dropped, its files stay recoverable."""
    stmt = parse_sql(ddl.query)
    name = ""
    if isinstance(stmt, exp.Drop):
        target = (stmt.args.get("tables") or [stmt.this])[0]
        if isinstance(target, exp.Table):
            name = target.name or target.db
    name = name or ddl.schema
    dropped = []
    for entry in state.live_tables():
        if entry.schema_name == name:
            entry.status, entry.dropped_ts = "dropped", ddl.commit_ts
            dropped.append(entry.uid)
    if name in state.schemas:
        state.schemas.remove(name)
    return DdlOutcome("applied", f"schema {name} dropped ({len(dropped)} tables kept recoverable)", tuple(dropped))


def _parse_create(ddl: DdlEvent) -> tuple[exp.Create, str, str | None]:
    head, clause = split_partition_clause(sanitize(ddl.query))
    stmt = parse_sql(head)
    if not isinstance(stmt, exp.Create):
        raise DdlError("not a CREATE TABLE statement")
    return stmt, head, clause


def _like_of(stmt: exp.Create) -> exp.LikeProperty | None:
    props = stmt.args.get("properties")
    return next((p for p in props.expressions if isinstance(p, exp.LikeProperty)), None) if props else None


def _spec_from_statement(ddl: DdlEvent, head: str, clause: str | None) -> TableSpec:
    spec = spec_from_create(head, ddl.schema, ddl.table)
    if clause is not None:
        try:
            spec = replace(spec, partition_def=parse_partitioning(clause).render())
        except DdlError:
            spec = replace(spec, partition_def=clause)  # kept verbatim; partition DDL will say why
    return spec


def planned_table(ddl: DdlEvent) -> tuple[TableSpec, str] | None:
    """(spec, uid) of the table a CREATE TABLE (not LIKE) event makes, from the event alone; None for
    any other statement or one that cannot be read (the handler then says why)."""
    if ddl.ddl_type != 3:
        return None
    try:
        stmt, head, clause = _parse_create(ddl)
        if _like_of(stmt) is not None:
            return None
        spec = _spec_from_statement(ddl, head, clause)
    except DdlError:
        return None
    return spec, table_uid(spec.schema, spec.table, ddl.commit_ts)


def _create_table(self: DdlOps, state: State, ddl: DdlEvent) -> DdlOutcome:
    """A new Delta table at a deterministic path (same uid on re-run); LIKE copies the catalog spec."""
    stmt, head, clause = _parse_create(ddl)
    if_not_exists = bool(stmt.args.get("exists"))
    like = _like_of(stmt)
    if like is not None:
        schema, table = _target(stmt.this, ddl)
        src_schema, src_table = _target(like.this, ddl)
        src = state.live_table(src_schema, src_table)
        if src is None:
            raise DdlError(f"CREATE TABLE .. LIKE {src_schema}.{src_table}: the source table is not in the catalog")
        spec = replace(src.table_spec, schema=schema, table=table)
    else:
        spec = _spec_from_statement(ddl, head, clause)
    uid = table_uid(spec.schema, spec.table, ddl.commit_ts)
    existing = state.live_table(spec.schema, spec.table)
    if existing is not None:
        if existing.uid == uid or if_not_exists:
            return DdlOutcome("no-op", f"table {spec.schema}.{spec.table} already exists", (existing.uid,))
        raise DdlError(
            f"CREATE TABLE {spec.schema}.{spec.table} at ts {ddl.commit_ts}, but the warehouse already has "
            f"a live table of that name (created at ts {existing.created_ts})"
        )
    path = self.warehouse.new_table_path(spec.schema, spec.table, uid)
    if path not in self.created:  # created ahead, concurrently with its step's other tables
        self.delta.create_table(path, spec)
    state.tables[uid] = TableEntry(
        uid=uid, schema=spec.schema, table=spec.table, path=path, spec=spec.to_json(), created_ts=ddl.commit_ts
    )
    if spec.schema not in state.schemas:
        state.schemas.append(spec.schema)
    return DdlOutcome("applied", f"table {spec.schema}.{spec.table} created at {path}", (uid,))


def _drop_table(self: DdlOps, state: State, ddl: DdlEvent) -> DdlOutcome:
    """Catalog-only, so RECOVER TABLE can bring the rows back; files stay until purged."""
    stmt = parse_sql(ddl.query)
    if not isinstance(stmt, exp.Drop):
        raise DdlError("not a DROP TABLE statement")
    tables = stmt.args.get("tables") or ([stmt.this] if stmt.this is not None else [])
    done = []
    for t in tables:
        schema, name = _target(t, ddl)
        entry = state.live_table(schema, name)
        if entry is None:
            continue  # IF EXISTS, or a table created before the stream
        entry.status, entry.dropped_ts = "dropped", ddl.commit_ts
        done.append(entry.uid)
    return DdlOutcome("applied" if done else "no-op", f"dropped {len(done)} table(s); data kept until purged",
                      tuple(done))


def _recover_table(self: DdlOps, state: State, ddl: DdlEvent) -> DdlOutcome:
    """Make the latest dropped table of that name live again (optionally under a new name)."""
    stmt = parse_recover(ddl.query)
    schema = stmt.schema or ddl.schema
    table = stmt.table or ddl.table
    dropped = [e for e in state.tables.values()
               if e.status == "dropped" and e.schema_name == schema and e.table == table]
    if not dropped:
        return DdlOutcome("no-op", f"no dropped table {schema}.{table} in the catalog (dropped before the stream?)")
    entry = max(dropped, key=lambda e: e.dropped_ts or 0)
    name = stmt.new_name or table
    if state.live_table(schema, name) is not None:
        raise DdlError(f"cannot recover {schema}.{table} as {name}: a live table has that name")
    entry.status, entry.dropped_ts, entry.table = "live", None, name
    _set_spec(entry, replace(entry.table_spec, table=name))
    if schema not in state.schemas:
        state.schemas.append(schema)
    return DdlOutcome("applied", f"table {schema}.{name} recovered with its data ({entry.path})", (entry.uid,))


def _truncate_table(self: DdlOps, state: State, ddl: DdlEvent) -> DdlOutcome:
    """Predicate-less DELETE: Delta removes whole files (metadata only); re-running deletes nothing new."""
    stmt = parse_sql(ddl.query)
    if not isinstance(stmt, exp.TruncateTable):
        raise DdlError("not a TRUNCATE TABLE statement")
    done, uids = [], []
    for t in stmt.expressions:
        schema, name = _target(t, ddl)
        entry = state.live_table(schema, name)
        if entry is None:
            continue
        self.sql(f"DELETE FROM {delta_ref(entry.path)}")  # no predicate: metadata-only
        done.append(f"{schema}.{name} truncated")
        uids.append(entry.uid)
    return DdlOutcome("applied" if done else "no-op", "; ".join(done) or "no replicated table to truncate",
                      tuple(uids), emptied=tuple(uids))


def _rename_table(self: DdlOps, state: State, ddl: DdlEvent) -> DdlOutcome:
    """`RENAME TABLE a TO b[, ...]` or `ALTER TABLE a RENAME [TO|AS] b`: catalog only."""
    return _rename_pairs(state, ddl, parse_renames(ddl.query))


def _rename_pairs(state: State, ddl: DdlEvent, pairs: Sequence[tuple[Name, Name]]) -> DdlOutcome:
    """Catalog-only renames, in order (so `a TO tmp, b TO a, tmp TO b` swaps); paths never move."""
    done, uids = [], []
    for (os_, ot), (ns, nt) in pairs:
        old_schema, new_schema = os_ or ddl.schema, ns or os_ or ddl.schema
        entry = state.live_table(old_schema, ot)
        if entry is None:
            done.append(f"{old_schema}.{ot} not in the catalog")
            continue
        clash = state.live_table(new_schema, nt)
        if clash is not None and clash.uid != entry.uid:
            raise DdlError(f"cannot rename {old_schema}.{ot} to {new_schema}.{nt}: that name is taken")
        entry.schema_name, entry.table = new_schema, nt
        _set_spec(entry, replace(entry.table_spec, schema=new_schema, table=nt))
        if new_schema not in state.schemas:
            state.schemas.append(new_schema)
        done.append(f"{old_schema}.{ot} renamed to {new_schema}.{nt} (path and history kept)")
        uids.append(entry.uid)
    return DdlOutcome("applied" if uids else "no-op", "; ".join(done), tuple(uids))




# ---------------------------------------------------------------------------------------------
# Partitions

def _partition_op(self: DdlOps, state: State, ddl: DdlEvent) -> DdlOutcome:
    """ADD (catalog), DROP and TRUNCATE PARTITION (DELETE of exactly those partitions' rows)."""
    op = parse_partition_op(sanitize(ddl.query))
    if op is None:
        raise DdlError("not an ALTER TABLE .. ADD/DROP/TRUNCATE PARTITION statement")
    schema, table = op.schema or ddl.schema, op.table
    entry = state.live_table(schema, table)
    if entry is None:
        return _unknown(schema, table)
    spec = entry.table_spec
    if spec.partition_def is None:
        raise DdlError(f"table {schema}.{table} has no partition definition in the catalog")
    part = parse_partitioning(spec.partition_def)
    ref = delta_ref(entry.path)
    if op.op == "add":
        new = add_partitions(part, op)
        _set_spec(entry, replace(spec, partition_def=new.render()))
        added = [p.name for p in new.partitions[len(part.partitions):]]
        return _outcome([f"partitions {added} added to the catalog"] if added else [], entry.uid,
                        "partitions already defined")
    if op.op == "truncate" and op.all:
        self.sql(f"DELETE FROM {ref}")
        return DdlOutcome("applied", f"all partitions of {schema}.{table} truncated", (entry.uid,),
                          emptied=(entry.uid,))
    # Some partitions' rows go, the rest stay: not `emptied`, so the keys this run wrote stay
    # remembered (their hashes do not say which partition a key was in).
    names = [n for n in op.names if not (op.if_exists and not part.has(n))]
    if op.op == "drop" and part.method in ("HASH", "KEY"):
        raise DdlError(f"DROP PARTITION on {part.method} partitioning (upstream allows only COALESCE)")
    if names:
        predicate = partition_predicate(part, names, spec.columns, spec.key)
        self.sql(f"DELETE FROM {ref} WHERE {predicate}")
    if op.op == "drop":
        drop = {n.lower() for n in names}
        left = tuple(p for p in part.partitions if p.name.lower() not in drop)
        if not left:
            raise DdlError("cannot drop every partition (upstream requires DROP TABLE)")
        _set_spec(entry, replace(spec, partition_def=replace(part, partitions=left).render()))
    verb = "dropped" if op.op == "drop" else "truncated"
    return _outcome([f"partitions {names} {verb}: their rows deleted"] if names else [], entry.uid,
                    "no such partition (IF EXISTS)")


# ---------------------------------------------------------------------------------------------
# Merge key from row events (after DROP PRIMARY KEY)

def adopt_handle_key(entry: TableEntry, rows: Sequence[RowChange]) -> TableSpec:
    """A table whose merge key was cleared takes the handle-key columns its rows are flagged with.

    After DROP PRIMARY KEY, TiCDC falls back to the next unique NOT NULL index and flags those
    columns (0x02) in every row; without one it stops sending the table. Unchanged when no row
    carries a flag (the MERGE then refuses the table, naming the missing key).
    """
    spec = entry.table_spec
    if spec.key:
        return spec
    for row in rows:
        key = tuple(c.name for c in (row.columns or row.old_columns) if c.is_handle_key)
        if key and all(spec.column(k) is not None for k in key):
            spec = replace(spec, key=key)
            _set_spec(entry, spec)
            return spec
    return spec
