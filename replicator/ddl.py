"""DDL events -> Delta operations and catalog changes.

One declarative table (`DDL_TYPES`) maps every TiDB DDL type code to its name and handler. The
query is parsed with sqlglot (MySQL dialect) to learn what changed; upstream SQL text is never
executed. Every handler is idempotent (check before altering), because a crash between a DDL's
Delta commit and the progress commit re-applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from replicator.apply import DeltaApplier
from replicator.errors import DdlError
from replicator.events import DdlEvent
from replicator.typemap import parse_sql, spec_from_create
from replicator.warehouse import State, TableEntry, Warehouse, table_uid

DDL_NAMES: dict[int, str] = {
    1: "Create Schema", 2: "Drop Schema", 3: "Create Table", 4: "Drop Table", 5: "Add Column",
    6: "Drop Column", 7: "Add Index", 8: "Drop Index", 9: "Add Foreign Key", 10: "Drop Foreign Key",
    11: "Truncate Table", 12: "Modify Column", 13: "Rebase Auto ID", 14: "Rename Table",
    15: "Set Default Value", 16: "Shard RowID", 17: "Modify Table Comment", 18: "Rename Index",
    19: "Add Table Partition", 20: "Drop Table Partition", 21: "Create View",
    22: "Modify Table Charset And Collate", 23: "Truncate Table Partition", 24: "Drop View",
    25: "Recover Table", 26: "Modify Schema Charset And Collate", 27: "Lock Table", 28: "Unlock Table",
    29: "Repair Table", 30: "Set TiFlash Replica", 31: "Update TiFlash Replica Status",
    32: "Add Primary Key", 33: "Drop Primary Key", 34: "Create Sequence", 35: "Alter Sequence",
    36: "Drop Sequence",
}


@dataclass(frozen=True)
class DdlOutcome:
    """What a DDL did: 'applied', 'no-op' (with reason); touched table uids for the windows log."""

    action: str
    detail: str
    tables: tuple[str, ...] = ()


Handler = Callable[["DdlApplier", State, DdlEvent], DdlOutcome]


class DdlApplier:
    def __init__(self, applier: DeltaApplier, warehouse: Warehouse) -> None:
        self.delta = applier
        self.warehouse = warehouse

    def apply(self, state: State, ddl: DdlEvent) -> DdlOutcome:
        handler = HANDLERS.get(ddl.ddl_type)
        name = DDL_NAMES.get(ddl.ddl_type)
        where = f" ({ddl.position})" if ddl.position else ""
        if name is None:
            raise DdlError(f"unknown DDL type code {ddl.ddl_type} for query {ddl.query!r}{where}")
        if handler is None:
            raise DdlError(
                f"DDL type {ddl.ddl_type} ({name}) is not yet supported: {ddl.query!r}{where}"
            )
        try:
            return handler(self, state, ddl)
        except DdlError as exc:
            if ddl.position and str(ddl.position) not in str(exc):
                raise DdlError(f"{exc} [DDL type {ddl.ddl_type} ({name}){where}]") from None
            raise

    # -- helpers ------------------------------------------------------------------------------
    def require_table(self, state: State, schema: str, table: str, ddl: DdlEvent) -> TableEntry:
        entry = state.live_table(schema, table)
        if entry is None:
            raise DdlError(f"DDL on unknown table {schema}.{table}: {ddl.query!r}")
        return entry


def _create_schema(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    stmt = parse_sql(ddl.query)
    name = stmt.this.name if isinstance(stmt, exp.Create) and stmt.this is not None else ddl.schema
    name = name or ddl.schema
    if name not in state.schemas:
        state.schemas.append(name)
        return DdlOutcome("applied", f"schema {name} recorded")
    return DdlOutcome("no-op", f"schema {name} already exists")


def _drop_schema(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    stmt = parse_sql(ddl.query)
    name = (stmt.this.name if isinstance(stmt, exp.Drop) and stmt.this is not None else "") or ddl.schema
    dropped = []
    for entry in state.live_tables():
        if entry.schema_name == name:
            entry.status, entry.dropped_ts = "dropped", ddl.commit_ts
            dropped.append(entry.uid)
    if name in state.schemas:
        state.schemas.remove(name)
    return DdlOutcome("applied", f"schema {name} dropped ({len(dropped)} tables kept recoverable)", tuple(dropped))


def _create_table(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    stmt = parse_sql(ddl.query)
    if not isinstance(stmt, exp.Create):
        raise DdlError(f"not a CREATE TABLE statement: {ddl.query!r}")
    if_not_exists = bool(stmt.args.get("exists"))
    like = None
    props = stmt.args.get("properties")
    if props is not None:
        like = next((p for p in props.expressions if isinstance(p, exp.LikeProperty)), None)
    if like is not None:
        target = stmt.this
        assert isinstance(target, exp.Table)
        schema, table = target.db or ddl.schema, target.name
        src_tbl = like.this
        src = self.require_table(state, src_tbl.db or ddl.schema, src_tbl.name, ddl)
        from dataclasses import replace

        spec = replace(src.table_spec, schema=schema, table=table)
    else:
        spec = spec_from_create(ddl.query, ddl.schema, ddl.table)
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
    self.delta.create_table(path, spec)
    state.tables[uid] = TableEntry(
        uid=uid, schema=spec.schema, table=spec.table, path=path, spec=spec.to_json(), created_ts=ddl.commit_ts
    )
    if spec.schema not in state.schemas:
        state.schemas.append(spec.schema)
    return DdlOutcome("applied", f"table {spec.schema}.{spec.table} created at {path}", (uid,))


def _drop_table(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    stmt = parse_sql(ddl.query)
    if not isinstance(stmt, exp.Drop):
        raise DdlError(f"not a DROP TABLE statement: {ddl.query!r}")
    tables = stmt.args.get("tables") or ([stmt.this] if stmt.this is not None else [])
    done = []
    for t in tables:
        schema, name = (t.db or ddl.schema), t.name
        entry = state.live_table(schema, name)
        if entry is None:
            continue  # IF EXISTS, or already applied before a crash
        entry.status, entry.dropped_ts = "dropped", ddl.commit_ts
        done.append(entry.uid)
    return DdlOutcome("applied" if done else "no-op", f"dropped {len(done)} table(s); data kept until purged",
                      tuple(done))


HANDLERS: dict[int, Handler] = {
    1: _create_schema,
    2: _drop_schema,
    3: _create_table,
    4: _drop_table,
}
