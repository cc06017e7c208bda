"""ALTER TABLE: columns, defaults, keys, comments. Each change checks the live Delta schema first
(check-before-alter); on the `compatible` profile a change Delta cannot do in place rewrites the table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from replicator.delta import features, schemachange
from replicator.delta.ddl.base import (
    TMP_PREFIX,
    DdlOutcome,
    _field,
    _lookup,
    _set_spec,
    _target,
    _unknown,
)
from replicator.delta.ddl.defaults import backfill_literal, delta_default
from replicator.delta.ddl.tables import _rename_pairs
from replicator.delta.ddl.widening import can_widen, cast_expr, norm_type
from replicator.delta.rowcount import Inexact, live_bytes
from replicator.delta.session import as_storage_error
from replicator.delta.typemap import column_from_def, parse_sql, quote_string
from replicator.delta.writer import column_ddl, delta_ref, is_conflict
from replicator.errors import DdlError
from replicator.events import DdlEvent, tso_to_datetime
from replicator.faults import fault_point
from replicator.mysql.statements import parse_add_column_list
from replicator.mysql.tokens import quote_ident, sanitize
from replicator.tables import ColumnSpec, TableSpec
from replicator.warehouse import State, TableEntry

if TYPE_CHECKING:
    from pyspark.sql.types import StructField

    from replicator.delta.ddl.ops import DdlOps

# ---------------------------------------------------------------------------------------------
# ALTER TABLE: columns, defaults, keys, comments

@dataclass
class _Alter:
    """One ALTER TABLE in progress: the evolving catalog spec plus notes for the outcome."""

    applier: DdlOps
    entry: TableEntry
    spec: TableSpec
    ddl: DdlEvent
    done: list[str]
    choice: schemachange.Choice | None = None
    reader_changes: list[dict[str, str]] = field(default_factory=list)

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

    def feature(self, name: str, why: str | None = None) -> None:
        """Enable a table feature this change needs (once; noted in the DDL's outcome, and with
        `why` as a change of the table's reader requirements: summary, catalog, `tables --json`)."""
        if self.applier.enable_feature(self.path, name, self.ddl, why):
            self.done.append(f"table feature {name} enabled" + (f" ({why})" if why else ""))
            if why:
                self.reader_changes.append({"feature": name, "why": why})

    def mapping_for(self, names: Sequence[str]) -> bool:
        """Enable column mapping when Delta can store `names` only with it (features.py); True then."""
        if not features.needs_column_mapping(names):
            return False
        self.feature("columnMapping", f"column name {', '.join(names)} needs column mapping")
        return True

    def has(self, feature: str) -> bool:
        """Whether the table has `feature` already."""
        key, _ = features.FEATURE_PROPERTY[feature]
        return features.enabled({key: self.applier.table_property(self.path, key) or ""}, feature)

    def mapped(self) -> bool:
        """Whether the table has column mapping (the `fast` profile enables it now), with no size
        choice: for a type change that is a rewrite either way (`_rewrite_column`)."""
        if self.has("columnMapping"):
            return True
        if self.applier.delta.table_features == "fast":
            self.feature("columnMapping")
            return True
        return False

    def choose(self) -> schemachange.Choice:
        """Rewrite or metadata-only for this table (`--schema-change`, `--rewrite-limit`), measured
        once per ALTER: the bytes of the snapshot's live data files."""
        if self.choice is None:
            delta = self.applier.delta
            size = None
            if delta.schema_change == "auto":
                # The fresh snapshot's checksum (.crc, written with every commit) has the size;
                # without one, the log's replay (no Spark job), and only then Delta's own state.
                snapshot = delta.snapshot(self.path)
                checksum = snapshot.checksumOpt()
                if checksum.isDefined():
                    size = int(checksum.get().tableSizeBytes())
                else:
                    try:
                        size = live_bytes(self.path)
                    except Inexact:
                        size = int(snapshot.sizeInBytes())
            self.choice = schemachange.choose(delta.schema_change, delta.rewrite_limit, size)
        return self.choice

    def in_place(self, feature: str, what: str) -> bool:
        """Change the table in place with `feature` (it has it, the `fast` profile enables it now,
        or the size choice is metadata-only: enabled now, as a reader change), or False: rewrite it
        instead, keeping it readable by deltalake and polars (features.py, schemachange.py)."""
        if self.has(feature):
            return True
        if self.applier.delta.table_features == "fast":
            self.feature(feature)
            return True
        choice = self.choose()
        if choice.metadata:
            self.feature(feature, f"{what} metadata-only: {choice.why}")
            return True
        return False


def _alter_table(self: DdlOps, state: State, ddl: DdlEvent) -> DdlOutcome:
    """Every ALTER TABLE action in statement order (codes 5, 6, 12, 15, 17, 32, 33 share it)."""
    query = sanitize(ddl.query)
    listed = parse_add_column_list(query)
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
    reader_changes: tuple[dict[str, Any], ...] = ()
    if alt.reader_changes:
        readers = features.readers_of(features.reader_features(entry.path))
        reader_changes = tuple({"table": f"{entry.schema_name}.{entry.table}", **c, "readers": readers,
                                "ddl": ddl.query, "commit_ts": ddl.commit_ts} for c in alt.reader_changes)
        entry.reader_changes = [*entry.reader_changes, *reader_changes]
    return DdlOutcome("applied" if changed else "no-op", "; ".join(alt.done) or "nothing to change", (entry.uid,),
                      reader_changes)


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
        new.append((replace(col, nullable=True), backfill_literal(col, when)))
        if pk:
            key = [col.name]
    if not new:
        alt.done.append("columns already exist (IF NOT EXISTS)")
        return
    fields = alt.applier.fields(alt.path)
    missing = [c for c, _ in new if _field(fields, c.name) is None]
    if missing:
        alt.mapping_for([c.name for c in missing])
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
    if present and alt.in_place("columnMapping", "DROP COLUMN"):  # metadata-only, only with column mapping
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
    if old in fields and new not in fields and (alt.in_place("columnMapping", "RENAME COLUMN")
                                                 or alt.mapping_for([new])):
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
    if norm_type(delta_type) == norm_type(target):
        what = ("same Delta type" if norm_type(old.spark_type) == norm_type(target)
                else "Delta type already changed")
    elif can_widen(delta_type, target):
        alt.applier.ensure_types(alt.path, [target])
        if alt.in_place("typeWidening", f"widening {delta_type} -> {target}"):
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
        if alt.applier.delta.table_features != "fast" and alt.choose().metadata:
            what += "; not metadata-only: Delta type widening does not cover it, rewritten under any --schema-change"
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
    if _field(fields, name) is not None and not alt.mapped():
        # No column mapping (the DROP and RENAME below need it): one overwrite with the cast instead
        # (dropping a temp column an interrupted rewrite of an older build left behind).
        alt.applier.ensure_types(alt.path, [new.spark_type])
        _rewrite_table(alt, f"retype {name} to {new.spark_type}",
                       cast={name: cast_expr(name, delta_type, new.spark_type)},
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
                            f"{cast_expr(name, delta_type, new.spark_type)}")
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


REWRITE_CHURN = "churn: every row of the table is deleted and re-inserted in this commit; no row changed"
"""The rewrite commit's `change_feed` in its userMetadata: a change-data-feed reader sees every row
of the table at this version as a `delete` and an `insert` of the same values (docs/schema-change.md)."""


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
                           "rewrite": what, "change_feed": REWRITE_CHURN}}
    attempt = 0
    while True:
        df = spark.read.format("delta").load(alt.path)
        cols = [(F.expr(cast[f.name]) if f.name in cast else F.col(quote_ident(f.name)))
                .alias(rename.get(f.name, f.name), metadata=f.metadata)
                for f in df.schema.fields if f.name not in drop]
        alt.applier.delta.fence()  # a write outside `sql()`: the lease is checked here (storage/lease.py)
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
            store = as_storage_error(exc)
            if store is not None:
                raise store from None
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
    wanted = delta_default(col)
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
