"""DDL events -> Delta operations and catalog changes.

One declarative table (`DDL_TYPES`) maps every TiDB DDL type code (1-36) to its name and to a
Delta operation, or to an explicit "no-op: reason" / "unsupported: reason"; the README's DDL
table is rendered from it (`render_ddl_markdown`). The query is parsed with sqlglot (MySQL
dialect), and with small hand-parsers (`replicator.delta.ddlparse`) for what sqlglot cannot read;
upstream SQL text is never executed. Every identifier in generated Spark SQL is backtick-quoted.

Idempotence: the engine applies a DDL once (ledger), but a crash between a DDL's Delta commit
and the state commit re-applies it against the *old* catalog. So each handler derives the new
catalog from the old one and checks the live Delta schema before every change
(check-before-alter). A DdlError restores the catalog as it was, so `--on-ddl-error skip`
never commits half a DDL to the catalog.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sqlglot import exp

from replicator.delta import ddlparse as dp
from replicator.delta import features
from replicator.delta.merge import DeltaApplier, column_ddl, delta_ref, is_conflict
from replicator.delta.typemap import (
    ColumnSpec,
    TableSpec,
    column_from_def,
    parse_sql,
    quote_ident,
    quote_string,
    spec_from_create,
)
from replicator.delta.warehouse import State, TableEntry, Warehouse, table_uid
from replicator.errors import DdlError
from replicator.events import DdlEvent, RowChange, tso_to_datetime
from replicator.faults import fault_point

if TYPE_CHECKING:
    from pyspark.sql.types import StructField


@dataclass(frozen=True)
class DdlOutcome:
    """What a DDL did: 'applied' or 'no-op' (with the reason); touched table uids for the windows log."""

    action: str
    detail: str
    tables: tuple[str, ...] = ()


Handler = Callable[["DdlApplier", State, DdlEvent], DdlOutcome]
Kind = Literal["apply", "no-op", "unsupported"]

TMP_PREFIX = "__replicator_retype_"
"""Temporary column of a type rewrite (MODIFY COLUMN that Delta type widening cannot do)."""


class DdlApplier:
    """Applies DDL events to the catalog (`State.tables`) and the Delta tables it points at."""

    def __init__(self, applier: DeltaApplier, warehouse: Warehouse) -> None:
        self.delta = applier
        self.warehouse = warehouse
        self.step = 0  # the step log number of the DDL being applied (feature upgrades' userMetadata)

    def apply(self, state: State, ddl: DdlEvent) -> DdlOutcome:
        """Apply one DDL event to `state` and Delta.

        DdlError (naming code, query and Kafka position) on an unknown code, an unparsable query or
        an unsupported change; the catalog is then exactly as before, so skipping it is safe.
        """
        rule = DDL_TYPES.get(ddl.ddl_type)
        if rule is None:
            raise DdlError(_context(f"unknown DDL type code {ddl.ddl_type}", ddl))
        if rule.kind == "no-op":
            return DdlOutcome("no-op", f"{rule.name}: {rule.operation}")
        if rule.handler is None:
            raise DdlError(_context(f"DDL type {ddl.ddl_type} ({rule.name}) is {rule.operation}", ddl))
        tables = {uid: e.model_copy(deep=True) for uid, e in state.tables.items()}
        schemas = list(state.schemas)
        self.step = state.steps + 1
        try:
            return rule.handler(self, state, ddl)
        except DdlError as exc:
            state.tables, state.schemas = tables, schemas
            raise DdlError(_context(str(exc), ddl, rule.name)) from None

    # -- Delta helpers --------------------------------------------------------------------------
    def sql(self, statement: str) -> None:
        """One Delta statement of a DDL, re-run when a concurrent writer's commit rejected it (it did
        not commit, so re-running is safe)."""
        self.delta.sql_retrying(statement, statement[:120])
        fault_point("mid_ddl")

    def fields(self, path: str) -> dict[str, StructField]:
        """The live Delta schema by column name (read before every change: check-before-alter)."""
        schema = self.delta.spark.read.format("delta").load(path).schema
        return {f.name: f for f in schema.fields}

    def _snapshot(self, path: str) -> Any:
        """The table's latest Delta snapshot (py4j: protocol and metadata have no Python API)."""
        return self.delta.snapshot(path)

    def has_feature(self, path: str, feature: str) -> bool:
        """Whether the table's protocol lists a (writer) table feature, e.g. allowColumnDefaults."""
        return bool(self._snapshot(path).protocol().writerFeatureNames().contains(feature))

    def description(self, path: str) -> str | None:
        """The table comment (Delta metadata description)."""
        desc = self._snapshot(path).metadata().description()
        return None if desc is None else str(desc)

    def ensure_feature(self, path: str, feature: str) -> None:
        """Enable a Delta table feature once (setting it again would add an empty commit)."""
        if not self.has_feature(path, feature):
            self.sql(f"ALTER TABLE {delta_ref(path)} SET TBLPROPERTIES ({quote_string('delta.feature.' + feature)} "
                     "= 'supported')")

    def table_property(self, path: str, key: str) -> str | None:
        """A table property of the latest snapshot (None when unset)."""
        opt = self._snapshot(path).metadata().configuration().get(key)
        return str(opt.get()) if opt.isDefined() else None

    def enable_feature(self, path: str, feature: str, ddl: DdlEvent) -> bool:
        """Enable a reader feature (features.FEATURE_PROPERTY) once; True when this call did.

        Check-before-alter: a re-run after a kill finds the property set and changes nothing. The
        commit carries the step's userMetadata (kind "feature") like a MERGE's, so the table's
        history says which step upgraded it; the DDL's step log record names it too.
        """
        key, value = features.FEATURE_PROPERTY[feature]
        current = self.table_property(path, key)
        if features.enabled({} if current is None else {key: current}, feature):
            return False
        meta = {"replicator": {"step": self.step, "applied_ts": ddl.commit_ts, "kind": "feature",
                               "feature": feature}}
        with self.user_metadata(meta):
            self.sql(f"ALTER TABLE {delta_ref(path)} SET TBLPROPERTIES ({quote_string(key)} = {quote_string(value)})")
        return True

    @contextlib.contextmanager
    def user_metadata(self, meta: dict[str, Any]) -> Iterator[None]:
        """Session conf: the commits made inside carry `meta` as their userMetadata."""
        conf = self.delta.spark.conf
        conf.set("spark.databricks.delta.commitInfo.userMetadata", json.dumps(meta, sort_keys=True))
        try:
            yield
        finally:
            conf.unset("spark.databricks.delta.commitInfo.userMetadata")

    def ensure_types(self, path: str, types: Iterable[str]) -> None:
        """TIMESTAMP_NTZ columns added after CREATE need the `timestampNtz` feature first."""
        if any(dp.norm_type(t) == "TIMESTAMP_NTZ" for t in types):
            self.ensure_feature(path, "timestampNtz")


def _context(reason: str, ddl: DdlEvent, name: str | None = None) -> str:
    """The error text: reason, then DDL code/name, the query and the Kafka position."""
    if "[DDL type " in reason:
        return reason
    what = f"DDL type {ddl.ddl_type}" + (f" ({name})" if name else "")
    where = f", {ddl.position}" if ddl.position else ""
    return f"{reason} [{what}, query {ddl.query!r}{where}]"


def _lookup(spec: TableSpec, name: str) -> ColumnSpec | None:
    """Column by name, case-insensitively (MySQL column names are)."""
    return spec.column(name) or next((c for c in spec.columns if c.name.lower() == name.lower()), None)


def _field(fields: dict[str, StructField], name: str) -> StructField | None:
    return fields.get(name) or next((f for k, f in fields.items() if k.lower() == name.lower()), None)


def _set_spec(entry: TableEntry, spec: TableSpec) -> None:
    entry.spec = spec.to_json()


def _target(table: exp.Expression | None, ddl: DdlEvent) -> tuple[str, str]:
    if not isinstance(table, exp.Table):
        raise DdlError("statement names no table")
    return (table.db or ddl.schema), table.name


def _unknown(schema: str, table: str) -> DdlOutcome:
    """A DDL on a table the catalog does not know: it predates the stream and has no rows yet."""
    return DdlOutcome("no-op", f"table {schema}.{table} is not in the catalog (created before the stream, no rows "
                               "replicated yet); its shape will be inferred from its first row event")


def _outcome(done: Sequence[str], uid: str, nothing: str) -> DdlOutcome:
    return DdlOutcome("applied" if done else "no-op", "; ".join(done) or nothing, (uid,))


# ---------------------------------------------------------------------------------------------
# Schemas and tables

def _create_schema(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    """Schemas are only names (directories): record it so `replicator tables` can group by it."""
    stmt = parse_sql(dp.sanitize(ddl.query))
    name = ""
    if isinstance(stmt, exp.Create) and isinstance(stmt.this, exp.Table):
        name = stmt.this.name or stmt.this.db
    name = name or ddl.schema
    if name not in state.schemas:
        state.schemas.append(name)
        return DdlOutcome("applied", f"schema {name} recorded")
    return DdlOutcome("no-op", f"schema {name} already exists")


def _drop_schema(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
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


def _create_table(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    """A new Delta table at a deterministic path (same uid on re-run); LIKE copies the catalog spec."""
    head, clause = dp.split_partition_clause(dp.sanitize(ddl.query))
    stmt = parse_sql(head)
    if not isinstance(stmt, exp.Create):
        raise DdlError("not a CREATE TABLE statement")
    if_not_exists = bool(stmt.args.get("exists"))
    props = stmt.args.get("properties")
    like = next((p for p in props.expressions if isinstance(p, exp.LikeProperty)), None) if props else None
    if like is not None:
        schema, table = _target(stmt.this, ddl)
        src_schema, src_table = _target(like.this, ddl)
        src = state.live_table(src_schema, src_table)
        if src is None:
            raise DdlError(f"CREATE TABLE .. LIKE {src_schema}.{src_table}: the source table is not in the catalog")
        spec = replace(src.table_spec, schema=schema, table=table)
    else:
        spec = spec_from_create(head, ddl.schema, ddl.table)
        if clause is not None:
            try:
                spec = replace(spec, partition_def=dp.parse_partitioning(clause).render())
            except DdlError:
                spec = replace(spec, partition_def=clause)  # kept verbatim; partition DDL will say why
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


def _recover_table(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    """Make the latest dropped table of that name live again (optionally under a new name)."""
    stmt = dp.parse_recover(ddl.query)
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


def _truncate_table(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
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
                      tuple(uids))


def _rename_table(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    """`RENAME TABLE a TO b[, ...]` or `ALTER TABLE a RENAME [TO|AS] b`: catalog only."""
    query = dp.sanitize(ddl.query)
    pairs = dp.parse_rename_tables(query)
    if pairs is None:
        single = dp.parse_alter_rename(query)
        if single is None:
            raise DdlError("not a RENAME TABLE / ALTER TABLE .. RENAME statement")
        pairs = [single]
    return _rename_pairs(state, ddl, pairs)


def _rename_pairs(state: State, ddl: DdlEvent, pairs: Sequence[tuple[dp.Name, dp.Name]]) -> DdlOutcome:
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
# ALTER TABLE: columns, defaults, keys, comments

@dataclass
class _Alter:
    """One ALTER TABLE in progress: the evolving catalog spec plus notes for the outcome."""

    applier: DdlApplier
    entry: TableEntry
    spec: TableSpec
    ddl: DdlEvent
    done: list[str]

    @property
    def path(self) -> str:
        return self.entry.path

    @property
    def ref(self) -> str:
        return delta_ref(self.entry.path)

    def column(self, name: str) -> ColumnSpec:
        col = _lookup(self.spec, name)
        if col is None:
            raise DdlError(f"table {self.spec.schema}.{self.spec.table} has no column {name!r}")
        return col

    def put(self, old_name: str, col: ColumnSpec) -> None:
        self.spec = self.spec.with_columns([col if c.name == old_name else c for c in self.spec.columns])

    def feature(self, name: str) -> None:
        """Enable a table feature this change needs (once; noted in the DDL's outcome)."""
        if self.applier.enable_feature(self.path, name, self.ddl):
            self.done.append(f"table feature {name} enabled")

    def in_place(self, feature: str) -> bool:
        """Change the table in place with `feature` (it has it, or the `fast` profile enables it now),
        or False: rewrite it instead, keeping it readable by deltalake and polars (features.py)."""
        key, _ = features.FEATURE_PROPERTY[feature]
        if features.enabled({key: self.applier.table_property(self.path, key) or ""}, feature):
            return True
        if self.applier.delta.table_features == "fast":
            self.feature(feature)
            return True
        return False


def _alter_table(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    """Every ALTER TABLE action in statement order (codes 5, 6, 12, 15, 17, 32, 33 share it)."""
    query = dp.sanitize(ddl.query)
    listed = dp.parse_add_column_list(query)
    options: list[exp.Expression] = []
    if listed is not None:
        (schema_name, table_name), defs_text, if_not_exists = listed
        schema, table = schema_name or ddl.schema, table_name
        created = parse_sql(f"CREATE TABLE `_` ({defs_text})")
        if not isinstance(created, exp.Create) or not isinstance(created.this, exp.Schema):
            raise DdlError("cannot read the column list of ADD COLUMN (...)")
        actions: list[exp.Expression] = []
        for d in created.this.expressions:
            if not isinstance(d, exp.ColumnDef):
                raise DdlError("ADD COLUMN (...) holds something other than column definitions")
            d.set("exists", if_not_exists)
            actions.append(d)
    else:
        stmt = parse_sql(query)
        if not isinstance(stmt, exp.Alter) or str(stmt.args.get("kind", "")).upper() != "TABLE":
            raise DdlError("not an ALTER TABLE statement sqlglot can read")
        schema, table = _target(stmt.this, ddl)
        actions = list(stmt.args.get("actions") or [])
        options = list(stmt.args.get("options") or [])
    entry = state.live_table(schema, table)
    if entry is None:
        return _unknown(schema, table)
    alt = _Alter(self, entry, entry.table_spec, ddl, [])
    pending: list[exp.ColumnDef] = []
    for action in actions:
        if isinstance(action, exp.ColumnDef):
            pending.append(action)
            continue
        if pending:
            _add_columns(alt, pending)
            pending = []
        if isinstance(action, exp.AlterRename):
            _set_spec(entry, alt.spec)
            new_schema, new_table = _target(action.this, ddl)
            renamed = _rename_pairs(state, ddl, [((schema, table), (new_schema, new_table))])
            alt.done.append(renamed.detail)
            alt.spec = entry.table_spec
            continue
        _alter_action(alt, action)
    if pending:
        _add_columns(alt, pending)
    for option in options:
        if isinstance(option, exp.SchemaCommentProperty):
            _table_comment(alt, option.this.name if option.this is not None else "")
        else:
            alt.done.append(f"table option {option.sql('mysql')} ignored (no Delta equivalent)")
    _set_spec(entry, alt.spec)
    changed = [d for d in alt.done if "ignored" not in d]
    return DdlOutcome("applied" if changed else "no-op", "; ".join(alt.done) or "nothing to change", (entry.uid,))


def _alter_action(alt: _Alter, action: exp.Expression) -> None:
    """One non-ADD action; index/constraint changes are recorded as ignored."""
    if isinstance(action, exp.Drop):
        kind = str(action.args.get("kind") or "").upper()
        if kind == "COLUMN":
            _drop_columns(alt, action)
        else:
            alt.done.append(f"DROP {kind} ignored (Delta has no indexes/constraints of that kind)")
    elif isinstance(action, exp.RenameColumn):
        old = alt.column(action.this.name)
        new_name = action.args["to"].name
        _rename_column(alt, old.name, new_name)
    elif isinstance(action, exp.ModifyColumn):
        _modify_column(alt, action)
    elif isinstance(action, exp.AlterColumn):
        _alter_column(alt, action)
    elif isinstance(action, exp.AddConstraint):
        for c in action.expressions:
            pk = _primary_key(c)
            if pk is not None:
                _set_key(alt, [alt.column(_key_part(e)).name for e in pk.expressions])
            else:
                alt.done.append(f"ADD {type(c).__name__} ignored (no Delta indexes/constraints)")
    elif isinstance(action, exp.DropPrimaryKey):
        _set_key(alt, [])
    elif isinstance(action, exp.RenameIndex | exp.AlterIndex):
        alt.done.append("index change ignored (Delta has no secondary indexes)")
    else:
        raise DdlError(f"unsupported ALTER TABLE action {action.sql('mysql')!r}")


def _primary_key(c: exp.Expression) -> exp.PrimaryKey | None:
    """The PRIMARY KEY of `ADD PRIMARY KEY (..)` or `ADD CONSTRAINT name PRIMARY KEY (..)`."""
    if isinstance(c, exp.PrimaryKey):
        return c
    if isinstance(c, exp.Constraint):
        return next((x for x in c.expressions if isinstance(x, exp.PrimaryKey)), None)
    return None


def _key_part(e: exp.Expression) -> str:
    """Column name of a key part (`a`, `a(10)`, `a DESC`)."""
    while isinstance(e, exp.Ordered | exp.Paren):
        e = e.this
    if isinstance(e, exp.Anonymous):
        return str(e.this)
    return e.name


def _add_columns(alt: _Alter, defs: Sequence[exp.ColumnDef]) -> None:
    """ADD COLUMNS (nullable, at the end) then one UPDATE giving existing rows the upstream default."""
    when = tso_to_datetime(alt.ddl.commit_ts)
    new: list[tuple[ColumnSpec, str | None]] = []
    key: list[str] = []
    for d in defs:
        col, pk = column_from_def(d)
        if _lookup(alt.spec, col.name) is not None or any(c.name.lower() == col.name.lower() for c, _ in new):
            if d.args.get("exists"):
                continue
            raise DdlError(f"column {col.name!r} already exists")
        new.append((replace(col, nullable=True), dp.backfill_literal(col, when)))
        if pk:
            key = [col.name]
    if not new:
        alt.done.append("columns already exist (IF NOT EXISTS)")
        return
    fields = alt.applier.fields(alt.path)
    missing = [c for c, _ in new if _field(fields, c.name) is None]
    if missing:
        alt.applier.ensure_types(alt.path, (c.spark_type for c in missing))
        cols = ", ".join(column_ddl(c, with_not_null=False) for c in missing)
        alt.applier.sql(f"ALTER TABLE {alt.ref} ADD COLUMNS ({cols})")
    sets = [(c, lit) for c, lit in new if lit is not None]
    if sets:
        assignments = ", ".join(f"{quote_ident(c.name)} = {lit}" for c, lit in sets)
        alt.applier.sql(f"UPDATE {alt.ref} SET {assignments}")
    alt.spec = alt.spec.with_columns([*alt.spec.columns, *(c for c, _ in new)])
    alt.done.append("added " + ", ".join(
        f"{c.name} {c.spark_type}" + (f" (existing rows = {lit})" if lit else "") for c, lit in new))
    if key:
        _set_key(alt, key)


def _drop_columns(alt: _Alter, action: exp.Drop) -> None:
    """DROP COLUMNS of the ones still in Delta (metadata-only with column mapping)."""
    names = []
    for t in action.args.get("tables") or []:
        col = _lookup(alt.spec, t.name)
        if col is None:
            if action.args.get("exists"):
                continue
            raise DdlError(f"table {alt.spec.schema}.{alt.spec.table} has no column {t.name!r}")
        if col.name in alt.spec.key:
            raise DdlError(f"cannot drop column {col.name!r}: it is part of the merge key {list(alt.spec.key)}")
        names.append(col.name)
    if not names:
        return
    fields = alt.applier.fields(alt.path)
    present = [n for n in names if _field(fields, n) is not None]
    if present and alt.in_place("columnMapping"):  # metadata-only, and only allowed, with column mapping
        alt.applier.sql(f"ALTER TABLE {alt.ref} DROP COLUMNS ({', '.join(quote_ident(n) for n in present)})")
    elif present:
        _rewrite_table(alt, f"drop {', '.join(present)}", drop=present)
    alt.spec = alt.spec.with_columns([c for c in alt.spec.columns if c.name not in names])
    alt.done.append("dropped " + ", ".join(names))


def _rename_column(alt: _Alter, old: str, new: str) -> None:
    """RENAME COLUMN unless Delta already has the new name (re-run); the merge key follows."""
    if old == new:
        return
    clash = _lookup(alt.spec, new)
    if clash is not None and clash.name.lower() != old.lower():
        raise DdlError(f"cannot rename column {old!r} to {new!r}: that column exists")
    fields = alt.applier.fields(alt.path)
    if old in fields and new not in fields and alt.in_place("columnMapping"):
        alt.applier.sql(f"ALTER TABLE {alt.ref} RENAME COLUMN {quote_ident(old)} TO {quote_ident(new)}")
    elif old in fields and new not in fields:
        _rewrite_table(alt, f"rename {old} -> {new}", rename={old: new})
    elif new not in fields:
        raise DdlError(f"Delta table {alt.path} has neither column {old!r} nor {new!r}")
    col = alt.column(old)
    alt.put(col.name, replace(col, name=new))
    alt.spec = replace(alt.spec, key=tuple(new if k == old else k for k in alt.spec.key))
    alt.done.append(f"renamed column {old} to {new}")


def _modify_column(alt: _Alter, action: exp.ModifyColumn) -> None:
    """MODIFY / CHANGE: rename, then widen in place, rewrite, or just record; comment/NULL/default."""
    cd = action.this
    if not isinstance(cd, exp.ColumnDef):
        raise DdlError(f"unsupported MODIFY COLUMN {action.sql('mysql')!r}")
    rename_from = action.args.get("rename_from")
    old = alt.column(rename_from.name if rename_from is not None else cd.name)
    new, pk = column_from_def(cd)
    _rename_column(alt, old.name, new.name)
    if new.name in alt.spec.key or pk:
        new = replace(new, nullable=False)  # key columns are NOT NULL upstream whatever MODIFY says
    fields = alt.applier.fields(alt.path)
    field = _field(fields, new.name)
    if field is None:
        raise DdlError(f"Delta table {alt.path} has no column {new.name!r}")
    delta_type = field.dataType.simpleString()
    target = new.spark_type
    nullable = field.nullable
    if dp.norm_type(delta_type) == dp.norm_type(target):
        what = ("same Delta type" if dp.norm_type(old.spark_type) == dp.norm_type(target)
                else "Delta type already changed")
    elif dp.can_widen(delta_type, target):
        alt.applier.ensure_types(alt.path, [target])
        if alt.in_place("typeWidening"):
            alt.applier.sql(f"ALTER TABLE {alt.ref} ALTER COLUMN {quote_ident(new.name)} TYPE {target}")
            what = f"widened {delta_type} -> {target}"
        else:
            _rewrite_table(alt, f"widen {new.name} to {target}",
                           cast={new.name: f"CAST({quote_ident(new.name)} AS {target})"})
            what = f"widened {delta_type} -> {target} (table rewritten)"
    else:
        _rewrite_column(alt, new, delta_type)
        nullable = True
        what = f"rewritten {delta_type} -> {target} (values cast)"
    if not nullable and new.nullable:
        alt.applier.sql(f"ALTER TABLE {alt.ref} ALTER COLUMN {quote_ident(new.name)} DROP NOT NULL")
        nullable = True
    fields = alt.applier.fields(alt.path)
    field = _field(fields, new.name)
    assert field is not None
    if (field.metadata.get("comment") or None) != (new.comment or None):
        alt.applier.sql(f"ALTER TABLE {alt.ref} ALTER COLUMN {quote_ident(new.name)} "
                        f"COMMENT {quote_string(new.comment or '')}")
    col = replace(new, nullable=nullable)
    if "CURRENT_DEFAULT" in field.metadata:
        _sync_delta_default(alt, col, field)
    alt.put(new.name, col)
    alt.done.append(f"modified column {new.name} ({what})")
    if pk:
        _set_key(alt, [new.name])


def _rewrite_column(alt: _Alter, new: ColumnSpec, delta_type: str) -> None:
    """A type change Delta cannot widen: temp column, UPDATE with CAST, drop old, rename, reposition.

    Each step checks the live schema first, so a re-run after a crash resumes where it stopped.
    ANSI casts fail on values that do not convert: the temp column is dropped and a DdlError raised
    (no data is lost or silently nulled).
    """
    name, tmp = new.name, TMP_PREFIX + new.name
    fields = alt.applier.fields(alt.path)
    if _field(fields, tmp) is None and _field(fields, name) is None:
        raise DdlError(f"Delta table {alt.path} has no column {name!r}")
    if _field(fields, name) is not None and not alt.in_place("columnMapping"):
        # No column mapping (the DROP and RENAME below need it): one overwrite with the cast instead
        # (dropping a temp column an interrupted rewrite of an older build left behind).
        alt.applier.ensure_types(alt.path, [new.spark_type])
        _rewrite_table(alt, f"retype {name} to {new.spark_type}",
                       cast={name: dp.cast_expr(name, delta_type, new.spark_type)},
                       drop=[tmp] if _field(fields, tmp) is not None else [],
                       failure=f"values of column {name!r} do not convert from {delta_type} to {new.spark_type}")
        retyped = _field(alt.applier.fields(alt.path), name)
        if retyped is not None and not retyped.nullable:  # as the temp-column path leaves it: nullable
            alt.applier.sql(f"ALTER TABLE {alt.ref} ALTER COLUMN {quote_ident(name)} DROP NOT NULL")
        return
    if _field(fields, tmp) is None:
        alt.applier.ensure_types(alt.path, [new.spark_type])
        tmp_col = replace(new, name=tmp, nullable=True)
        alt.applier.sql(f"ALTER TABLE {alt.ref} ADD COLUMNS ({column_ddl(tmp_col, with_not_null=False)})")
    if _field(fields, name) is not None:
        try:
            alt.applier.sql(f"UPDATE {alt.ref} SET {quote_ident(tmp)} = "
                            f"{dp.cast_expr(name, delta_type, new.spark_type)}")
        except Exception as exc:  # Spark's AnalysisException / SparkException (ANSI cast errors)
            if is_conflict(exc):
                raise  # a concurrent writer: retryable, not a property of the data
            alt.applier.sql(f"ALTER TABLE {alt.ref} DROP COLUMNS ({quote_ident(tmp)})")
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DdlError(f"values of column {name!r} do not convert from {delta_type} to {new.spark_type}: "
                           f"{first}") from None
        alt.applier.sql(f"ALTER TABLE {alt.ref} DROP COLUMNS ({quote_ident(name)})")
    alt.applier.sql(f"ALTER TABLE {alt.ref} RENAME COLUMN {quote_ident(tmp)} TO {quote_ident(name)}")
    # Back to its catalog position (the rewritten column was appended at the end).
    order = [c.name for c in alt.spec.columns]
    pos = next(i for i, c in enumerate(order) if c.lower() == name.lower())
    live = alt.applier.fields(alt.path)
    before = [c for c in order[:pos] if _field(live, c) is not None]
    where = f"AFTER {quote_ident(before[-1])}" if before else "FIRST"
    if pos < len(order) - 1:
        alt.applier.sql(f"ALTER TABLE {alt.ref} ALTER COLUMN {quote_ident(name)} {where}")


def _rewrite_table(alt: _Alter, what: str, *, rename: dict[str, str] | None = None, drop: Sequence[str] = (),
                   cast: dict[str, str] | None = None, failure: str | None = None) -> None:
    """Rename, drop or retype columns by rewriting the table in one overwrite commit.

    Why (profile `compatible`): RENAME/DROP COLUMN in place need column mapping, and a widening
    MODIFY type widening; both are reader features polars (and, for type widening, deltalake)
    cannot read, and deltalake 1.6 reads a column renamed after column mapping was enabled on an
    existing table as NULLs (tests/integration/test_table_features.py). An overwrite keeps the
    protocol as it is. Atomic (one commit): a kill leaves the old or the new table, and the re-run
    sees the new schema (check-before-alter in the callers). Column metadata (comment, default)
    is carried over; NOT NULL is not (a Delta overwrite writes every column nullable, and Delta
    cannot SET NOT NULL afterwards; the MERGE never writes a NULL key). `cast` maps a column to a
    SQL expression (`failure`: a value that does not convert becomes a DdlError, nothing committed).
    """
    from pyspark.sql import functions as F

    rename, cast = rename or {}, cast or {}
    spark = alt.applier.delta.spark
    meta = {"replicator": {"step": alt.applier.step, "applied_ts": alt.ddl.commit_ts, "kind": "ddl",
                           "rewrite": what}}
    attempt = 0
    while True:
        df = spark.read.format("delta").load(alt.path)
        cols = [(F.expr(cast[f.name]) if f.name in cast else F.col(quote_ident(f.name)))
                .alias(rename.get(f.name, f.name), metadata=f.metadata)
                for f in df.schema.fields if f.name not in drop]
        try:
            with alt.applier.user_metadata(meta):
                (df.select(*cols).write.format("delta").mode("overwrite").option("overwriteSchema", "true")
                 .save(alt.path))
            break
        except Exception as exc:
            if is_conflict(exc) and attempt < alt.applier.delta.max_retries:
                attempt += 1
                alt.applier.delta.conflict_backoff(attempt, f"rewrite of {alt.path}", exc)
                continue
            if failure is None or is_conflict(exc):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DdlError(f"{failure}: {first}") from None
    fault_point("mid_ddl")
    alt.done.append(f"table rewritten ({what})")


def _alter_column(alt: _Alter, action: exp.AlterColumn) -> None:
    """ALTER COLUMN c SET DEFAULT x / DROP DEFAULT: catalog default + Delta column default."""
    col = alt.column(action.this.name)
    if action.args.get("drop"):
        new_default = None
    elif action.args.get("default") is not None:
        new_default = action.args["default"].sql("mysql")
    else:
        alt.done.append(f"ALTER COLUMN {col.name} {action.sql('mysql')} ignored")
        return
    col = replace(col, default=new_default)
    field = _field(alt.applier.fields(alt.path), col.name)
    if field is None:
        raise DdlError(f"Delta table {alt.path} has no column {col.name!r}")
    _sync_delta_default(alt, col, field)
    alt.put(col.name, col)


def _sync_delta_default(alt: _Alter, col: ColumnSpec, field: StructField) -> None:
    """Make the Delta column default mirror the upstream one (feature allowColumnDefaults)."""
    current = field.metadata.get("CURRENT_DEFAULT")
    wanted = dp.delta_default(col)
    ref, name = alt.ref, quote_ident(col.name)
    if col.default is None or wanted is None:
        if current is not None:
            alt.applier.sql(f"ALTER TABLE {ref} ALTER COLUMN {name} DROP DEFAULT")
        note = "" if col.default is None else " (not expressible as a Delta default: catalog only)"
        alt.done.append(f"default of {col.name} dropped{note}" if col.default is None
                        else f"default of {col.name} = {col.default}{note}")
        return
    if current != wanted:
        alt.applier.ensure_feature(alt.path, "allowColumnDefaults")
        alt.applier.sql(f"ALTER TABLE {ref} ALTER COLUMN {name} SET DEFAULT {wanted}")
    alt.done.append(f"default of {col.name} = {col.default} (Delta DEFAULT {wanted})")


def _set_key(alt: _Alter, key: Sequence[str]) -> None:
    """The merge key the engine builds every MERGE ON clause from."""
    alt.spec = replace(alt.spec, key=tuple(key))
    alt.done.append(f"merge key = {list(key)}" if key else
                    "merge key cleared (the next rows' handle-key columns become the key)")


def _table_comment(alt: _Alter, comment: str) -> None:
    """Table comment = Delta `comment` property (shown as the description)."""
    if alt.applier.description(alt.path) != comment:
        alt.applier.sql(f"ALTER TABLE {alt.ref} SET TBLPROPERTIES ('comment' = {quote_string(comment)})")
    alt.spec = replace(alt.spec, comment=comment or None)
    alt.done.append(f"table comment = {comment!r}")


# ---------------------------------------------------------------------------------------------
# Partitions

def _partition_op(self: DdlApplier, state: State, ddl: DdlEvent) -> DdlOutcome:
    """ADD (catalog), DROP and TRUNCATE PARTITION (DELETE of exactly those partitions' rows)."""
    op = dp.parse_partition_op(dp.sanitize(ddl.query))
    if op is None:
        raise DdlError("not an ALTER TABLE .. ADD/DROP/TRUNCATE PARTITION statement")
    schema, table = op.schema or ddl.schema, op.table
    entry = state.live_table(schema, table)
    if entry is None:
        return _unknown(schema, table)
    spec = entry.table_spec
    if spec.partition_def is None:
        raise DdlError(f"table {schema}.{table} has no partition definition in the catalog")
    part = dp.parse_partitioning(spec.partition_def)
    ref = delta_ref(entry.path)
    if op.op == "add":
        new = dp.add_partitions(part, op)
        _set_spec(entry, replace(spec, partition_def=new.render()))
        added = [p.name for p in new.partitions[len(part.partitions):]]
        return _outcome([f"partitions {added} added to the catalog"] if added else [], entry.uid,
                        "partitions already defined")
    if op.op == "truncate" and op.all:
        self.sql(f"DELETE FROM {ref}")
        return DdlOutcome("applied", f"all partitions of {schema}.{table} truncated", (entry.uid,))
    names = [n for n in op.names if not (op.if_exists and not part.has(n))]
    if op.op == "drop" and part.method in ("HASH", "KEY"):
        raise DdlError(f"DROP PARTITION on {part.method} partitioning (upstream allows only COALESCE)")
    if names:
        predicate = dp.partition_predicate(part, names, spec.columns, spec.key)
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


# ---------------------------------------------------------------------------------------------
# The mapping

@dataclass(frozen=True)
class DdlRule:
    """One TiDB DDL type code: its name and Delta operation (or the reason it is a no-op)."""

    code: int
    name: str
    kind: Kind
    operation: str
    handler: Handler | None = None


def _noop(code: int, name: str, reason: str) -> DdlRule:
    """A code with nothing to do on the Delta side, and why."""
    return DdlRule(code, name, "no-op", reason)


_ALTER = "ALTER TABLE"
_RULES: tuple[DdlRule, ...] = (
    DdlRule(1, "Create Schema", "apply", "catalog: record the schema (a directory; no Delta object)",
            _create_schema),
    DdlRule(2, "Drop Schema", "apply", "catalog: its live tables become dropped (files kept, recoverable)",
            _drop_schema),
    DdlRule(3, "Create Table", "apply", "`CREATE TABLE IF NOT EXISTS` at a new path (CDF; `--table-features "
            "fast`: also column mapping, deletion vectors, type widening); `IF NOT EXISTS`; `LIKE` copies the "
            "catalog spec; the partition definition is kept in the catalog", _create_table),
    DdlRule(4, "Drop Table", "apply", "catalog: each named table becomes dropped (hidden from `replicator "
            "tables`, files kept until purged)", _drop_table),
    DdlRule(5, "Add Column", "apply", f"`{_ALTER} ADD COLUMNS` (nullable, at the end), then one `UPDATE` giving "
            "existing rows the upstream default (the type's zero value for NOT NULL without default)", _alter_table),
    DdlRule(6, "Drop Column", "apply", f"`{_ALTER} DROP COLUMNS` (metadata-only; enables column mapping first)",
            _alter_table),
    _noop(7, "Add Index", "no-op: Delta has no secondary indexes"),
    _noop(8, "Drop Index", "no-op: Delta has no secondary indexes"),
    _noop(9, "Add Foreign Key", "no-op: Delta enforces no foreign keys"),
    _noop(10, "Drop Foreign Key", "no-op: Delta enforces no foreign keys"),
    DdlRule(11, "Truncate Table", "apply", "`DELETE FROM` without predicate (metadata-only)", _truncate_table),
    DdlRule(12, "Modify Column", "apply", "`RENAME COLUMN` when renamed (enables column mapping); same Delta type "
            f"(e.g. VARCHAR length, ENUM labels): catalog only; widening: `{_ALTER} ALTER COLUMN .. TYPE` with type "
            "widening (`fast`, or a table that has it), else one overwrite of the table with the column cast; any "
            "other type: rewrite (temp column, `UPDATE` with `CAST`, drop, rename, reposition; column mapping); "
            "`DROP NOT NULL`, comment and default follow",
            _alter_table),
    _noop(13, "Rebase Auto ID", "no-op: auto-increment counters are not table data"),
    DdlRule(14, "Rename Table", "apply", "catalog: the entry (uid, path, history) takes the new name; `RENAME TABLE` "
            "with one or several pairs, `ALTER TABLE .. RENAME`", _rename_table),
    DdlRule(15, "Set Default Value", "apply", f"`{_ALTER} ALTER COLUMN .. SET|DROP DEFAULT` (table feature "
            "`allowColumnDefaults`) and the catalog default; existing rows unchanged, as upstream", _alter_table),
    _noop(16, "Shard RowID", "no-op: row-id sharding is TiKV layout"),
    DdlRule(17, "Modify Table Comment", "apply", f"`{_ALTER} SET TBLPROPERTIES ('comment' = ..)`", _alter_table),
    _noop(18, "Rename Index", "no-op: Delta has no secondary indexes"),
    DdlRule(19, "Add Table Partition", "apply", "catalog: partition definitions appended (Delta rows are not "
            "physically partitioned)", _partition_op),
    DdlRule(20, "Drop Table Partition", "apply", "`DELETE WHERE <partition predicate>`: exactly the dropped "
            "partitions' rows; definitions removed from the catalog", _partition_op),
    _noop(21, "Create View", "no-op: views are not replicated (query the Delta tables)"),
    _noop(22, "Modify Table Charset And Collate", "no-op: strings are UTF-8 `STRING` in Delta"),
    DdlRule(23, "Truncate Table Partition", "apply", "`DELETE WHERE <partition predicate>` (`ALL`: no predicate)",
            _partition_op),
    _noop(24, "Drop View", "no-op: views are not replicated"),
    DdlRule(25, "Recover Table", "apply", "catalog: the most recently dropped table of that name is live again, "
            "with its rows (`RECOVER TABLE`, `FLASHBACK TABLE .. TO`)", _recover_table),
    _noop(26, "Modify Schema Charset And Collate", "no-op: strings are UTF-8 `STRING` in Delta"),
    _noop(27, "Lock Table", "no-op: upstream session locks"),
    _noop(28, "Unlock Table", "no-op: upstream session locks"),
    _noop(29, "Repair Table", "no-op: repairs TiDB metadata, not data"),
    _noop(30, "Set TiFlash Replica", "no-op: TiFlash replicas are upstream storage"),
    _noop(31, "Update TiFlash Replica Status", "no-op: TiFlash replicas are upstream storage"),
    DdlRule(32, "Add Primary Key", "apply", "catalog: the merge key becomes the primary key columns", _alter_table),
    DdlRule(33, "Drop Primary Key", "apply", "catalog: merge key cleared; the next rows' handle-key columns (TiCDC's "
            "fallback unique index) become the key", _alter_table),
    _noop(34, "Create Sequence", "no-op: sequences are not table data"),
    _noop(35, "Alter Sequence", "no-op: sequences are not table data"),
    _noop(36, "Drop Sequence", "no-op: sequences are not table data"),
)

DDL_TYPES: dict[int, DdlRule] = {r.code: r for r in _RULES}
DDL_NAMES: dict[int, str] = {r.code: r.name for r in _RULES}
HANDLERS: dict[int, Handler] = {r.code: r.handler for r in _RULES if r.handler is not None}

README_NOTES = """\
- Column facts from `ALTER`: `NOT NULL` is replicated as nullable (Delta rejects `NOT NULL` in
  `ADD COLUMNS`; `MODIFY` only ever drops `NOT NULL`); position clauses (`FIRST`/`AFTER`) are ignored.
- Backfill of `ADD COLUMN`: the default as TiDB stores it for existing rows; `CURRENT_TIMESTAMP`
  becomes the DDL's commit time (UTC, truncated to the column's precision); zero dates become
  NULL; a per-row expression default (e.g. `(UUID())`) stops with a DdlError.
- Type rewrites cast with Spark's ANSI `CAST` (fractional -> integer rounds like MySQL); a value
  that does not convert stops with a DdlError and leaves the table as it was.
- Partitions: the predicate re-evaluates the partitioning on each row. Understood: `RANGE`,
  `RANGE COLUMNS`, `LIST`, `LIST COLUMNS` (incl. `DEFAULT`) on columns or `YEAR`/`MONTH`/`DAY`/
  `TO_DAYS`/`UNIX_TIMESTAMP` of a column (UTC), `HASH` (`abs(expr % n)`, NULL as 0) and `KEY` on
  integer columns (CRC32 of the values' text, as TiDB's `LocateKeyPartition`); anything else
  fails at the partition DDL with "unsupported partition expression".
- Errors: an unknown code or an unparsable query stops the run naming code, query and Kafka
  position; `--on-ddl-error skip` records it in the dead-letter table and continues. DDL on a
  table the catalog does not know (created before the stream) is a recorded no-op.
"""


def render_ddl_markdown() -> str:
    """The README section between the ddl-table markers, rendered from `DDL_TYPES`."""
    lines = [
        "### DDL events (TiDB type code -> Delta)",
        "",
        "Generated from `replicator/delta/ddl.py` (`DDL_TYPES`); a test keeps it in sync. Each DDL is applied",
        "once, as a barrier between the rows before and after it, and check-before-alter (a re-run after",
        "a crash changes nothing twice).",
        "",
        "| code | name | Delta operation |",
        "| --- | --- | --- |",
    ]
    for r in _RULES:
        op = r.operation if r.kind != "unsupported" else f"unsupported: {r.operation}"
        lines.append(f"| {r.code} | {r.name} | {op.replace('|', chr(92) + '|')} |")
    return "\n".join([*lines, "", README_NOTES.rstrip()])


README_START, README_END = "<!-- ddl-table:start -->", "<!-- ddl-table:end -->"


def readme_region(text: str) -> str:
    """The text between the ddl-table markers of a README (stripped)."""
    start, end = text.index(README_START) + len(README_START), text.index(README_END)
    return text[start:end].strip()


def update_readme(path: str | Path) -> bool:
    """Rewrite the README's ddl-table region from the mapping; True when it changed."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    start, end = text.index(README_START) + len(README_START), text.index(README_END)
    new = text[:start] + "\n" + render_ddl_markdown() + "\n" + text[end:]
    if new != text:
        p.write_text(new, encoding="utf-8")
    return new != text

