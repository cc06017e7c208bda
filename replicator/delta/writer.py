"""Apply collapsed changes to Delta: per table per step one append (fresh inserts) or one MERGE.

Idempotence: every data commit carries in its userMetadata the upstream commit ts it brings the
table to (`applied_ts`, the step's upper bound or the DDL its rows precede). A write at or below
the table's last such ts is skipped (`applied_ts()`: remembered per table once read back from the
newest commit files, which costs no Spark job). So a step re-applied after a crash changes nothing
in tables it already reached. Delta's own txnAppId / txnVersion are not used: with them an append
rebuilds the table's state to look its transactions up (4 Spark jobs instead of 1).

Fresh inserts: when every key's first change in the changes is a trusted INSERT (`Change.fresh`:
the key was absent from the table), the table needs no lookup: the upserts are appended with one
`INSERT INTO` (one Spark job) and the deletes, which undo their own inserts, dropped.

The MERGE source is an Arrow table whose columns are positional (`_c0`, `_c1`, ... and `_op`),
so upstream names never appear on the source side; target names are always backtick-quoted.

Scale: the ON clause also bounds every orderable key column to the source's [min, max] (literals
computed from the Arrow source). Those conjuncts reference only the target, so Delta uses them to
skip files by their min/max statistics; CDC change sets concentrate on recent keys, so a MERGE
then reads the few files holding that range instead of the whole table (`make bench`, Scale).
Tables under KEY_RANGE_MIN_TABLE_BYTES get no such conjuncts: there they cost more than they save.

Empty tables: into a table without data files (a new table's first window, or after a TRUNCATE)
the change set is applied as `INSERT INTO ... SELECT <upserts>` instead: with no row to match, the
MERGE would do exactly that, at five Spark jobs instead of one; change-data readers see the same
inserts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import posixpath
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from replicator.changes import Change, ChangeSummary, all_fresh
from replicator.delta.features import DEFAULT_PROFILE, Profile, check_profile, create_properties
from replicator.delta.schemachange import DEFAULT_REWRITE_LIMIT, DEFAULT_SCHEMA_CHANGE, SchemaChange
from replicator.delta.session import DeltaSession, frame_summary, is_commit_raced, one_file
from replicator.delta.session import is_conflict as is_conflict  # re-exported: callers import it from here
from replicator.delta.typemap import arrow_type_name, converter_for, quote_string
from replicator.errors import SchemaError, StateError
from replicator.mysql.tokens import quote_ident
from replicator.storage import fileio_for
from replicator.tables import TableSpec

log = logging.getLogger("replicator")

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

MERGE_CONF = {
    # The source is an in-memory Arrow table: deterministic, so Delta need not checkpoint it to
    # disk before the MERGE (its `auto` default does for every non-Delta source).
    "spark.databricks.delta.merge.materializeSource": "none",
}

# Below this table size the key-range conjuncts cost more than the scan they can save: their bounds
# are literals Spark inlines into generated code, so every MERGE with new bounds recompiles its
# whole-stage code (7 classes, 0.1-0.2 s on the 2-core machine), while scanning a few MiB of key
# column takes tens of milliseconds. Only what is read changes, never which rows match.
KEY_RANGE_MIN_TABLE_BYTES = 4 * 1024 * 1024

# A small MERGE (a table under SMALL_MERGE_MAX_TABLE_BYTES, a source of at most
# SMALL_MERGE_MAX_SOURCE_ROWS changes) also gets SMALL_MERGE_CONF. Adaptive execution runs every
# exchange of a plan as a job of its own (11 jobs per MERGE instead of 5 here) to re-plan on sizes
# that are tiny anyway; one shuffle partition writes the rewritten rows and their change-data rows
# as one file each instead of one per partition, so small tables do not collect small files.
# Neither changes what the MERGE writes, only how it is planned and split (`make bench`, features).
SMALL_MERGE_MAX_TABLE_BYTES = KEY_RANGE_MIN_TABLE_BYTES
SMALL_MERGE_MAX_SOURCE_ROWS = 20_000
SMALL_MERGE_CONF = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
}

# Every new table's Delta log checkpoints every CHECKPOINT_INTERVAL commits instead of Delta's 10:
# a follower's tables commit in lockstep, so every tenth step checkpointed all of them at once and
# set the follower's p99 lag; measured, and what a cold reader pays instead: docs/delta.md, "Log
# checkpoints". A table keeps whatever interval it has.
CHECKPOINT_INTERVAL = 100
LOG_PROPERTIES = {"delta.checkpointInterval": str(CHECKPOINT_INTERVAL)}

_DECIMAL_RE = re.compile(r"^DECIMAL\(\d+,\d+\)$")
_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")


def range_literal(spark_type: str, value: Any) -> str | None:
    """A Spark SQL literal of `value` that compares like the column does, or None when the type's
    order is not safe to reproduce as text (floats with NaN, timestamps, binary)."""
    st = spark_type.upper().replace(" ", "")
    if st in _INTEGRAL and type(value) is int:
        return str(value)
    if st == "STRING" and isinstance(value, str):
        return quote_string(value)  # UTF8_BINARY order = code point order = Arrow's byte order
    if st == "DATE" and isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return f"DATE '{value.isoformat()}'"
    if _DECIMAL_RE.match(st) and isinstance(value, Decimal) and value.is_finite():
        return f"CAST({quote_string(format(value, 'f'))} AS {st})"
    return None


def _insert_lists(spec: TableSpec) -> tuple[str, str]:
    """The target column list and the positional source values of an insert of every column."""
    return (", ".join(quote_ident(c.name) for c in spec.columns),
            ", ".join(f"s.`_c{i}`" for i in range(len(spec.columns))))


def key_range_predicate(spec: TableSpec, source: pa.Table) -> str:
    """Target-only conjuncts bounding each orderable key column to the source's [min, max].

    Sound for any key: a target row matching a source row has exactly that row's key values, which
    lie inside the bounds; NULL keys never match, so min/max may ignore them. Empty when no key
    column qualifies.
    """
    def bounds(i: int) -> tuple[Any, Any]:
        mm = pc.min_max(source.column(f"_c{i}"))
        return mm["min"].as_py(), mm["max"].as_py()

    return key_range_from(spec, bounds)


def key_range_from(spec: TableSpec, bounds: Callable[[int], tuple[Any, Any]]) -> str:
    """`key_range_predicate` from each key column's (min, max), by column index."""
    idx = {c.name: i for i, c in enumerate(spec.columns)}
    parts: list[str] = []
    for k in spec.key:
        i = idx[k]
        low, high = bounds(i)
        lo = range_literal(spec.columns[i].spark_type, low)
        hi = range_literal(spec.columns[i].spark_type, high)
        if lo is not None and hi is not None:
            parts.append(f"t.{quote_ident(k)} >= {lo} AND t.{quote_ident(k)} <= {hi}")
    return " AND ".join(parts)


_COMMIT_FILE = re.compile(r"^\d{20}\.(json|checkpoint\b.*)$|^_last_checkpoint$")


def _has_commit(names: Iterable[str]) -> bool:
    return any(_COMMIT_FILE.match(name) for name in names)


def clear_unborn_table(path: str, fence: Callable[[], None] | None = None) -> bool:
    """Remove a table directory that a crash left with a `_delta_log` but no commit in it.

    Why: a process killed inside CREATE TABLE can leave `_delta_log/` (e.g. only `_staged_commits/`)
    without version 0. Delta then takes the path for an existing table, so `CREATE TABLE IF NOT
    EXISTS` silently does nothing and every later MERGE fails with DELTA_TABLE_NOT_FOUND, on every
    rerun. Such a directory holds no data (nothing was ever committed), and the replicator's table
    paths are its own, so it is safe to remove. True when something was removed.

    Fenced like a commit: `fence` (the writer lease's check, `Warehouse.fence`) runs right before
    the removal and raises LeaseLostError once this run no longer holds the warehouse, whose new
    holder may be creating this very table. Exactly the files of one listing are removed (then the
    directories left empty), so a commit written after it is never removed.
    """
    io = fileio_for(path)
    log_dir = io.join(path, "_delta_log")
    if not io.exists(log_dir) or _has_commit(io.children(log_dir)):
        return False
    listed = [file for file, _size in io.files(path)]
    if _has_commit(posixpath.basename(file) for file in listed
                   if posixpath.dirname(file).rstrip("/") == log_dir.rstrip("/")):
        return False  # committed since the first look
    if fence is not None:
        fence()
    log.warning("removing %s: a table directory without any Delta commit (left by a crash in CREATE TABLE)", path)
    io.remove_listed(path, listed)
    return True


def delta_ref(path: str) -> str:
    return "delta." + quote_ident(path)


def arrow_type(spark_type: str) -> pa.DataType:
    name, args = arrow_type_name(spark_type)
    if name == "timestamp_utc":
        return pa.timestamp("us", tz="UTC")
    if name == "timestamp":
        return pa.timestamp("us")
    factory = getattr(pa, name)
    return factory(*args) if args else factory()


class ColumnLike(Protocol):
    """What a column definition needs (tables.ColumnSpec, binlog_apply.ColumnInfo)."""

    @property
    def name(self) -> str: ...
    @property
    def spark_type(self) -> str: ...
    @property
    def nullable(self) -> bool: ...
    @property
    def comment(self) -> str | None: ...


def column_ddl(col: ColumnLike, *, with_not_null: bool = True) -> str:
    """`name TYPE [NOT NULL] [COMMENT '...']` with the name quoted."""
    text = f"{quote_ident(col.name)} {col.spark_type}"
    if with_not_null and not col.nullable:
        text += " NOT NULL"
    if col.comment:
        text += f" COMMENT {quote_string(col.comment)}"
    return text


def is_missing_file(exc: BaseException) -> bool:
    """A data or deletion-vector file of the current snapshot is gone (not retryable)."""
    text = str(exc)
    return "FILE_NOT_EXIST" in text or "java.io.FileNotFoundException" in text


def _merge_metrics(row: Any) -> tuple[int, int, int]:
    """(inserted, updated, deleted) target rows from the row Delta's MERGE returns."""
    values = row.asDict()
    return (int(values.get("num_inserted_rows") or 0), int(values.get("num_updated_rows") or 0),
            int(values.get("num_deleted_rows") or 0))


@dataclass(frozen=True)
class MergeResult:
    """One MERGE: `rows` changes (`upserts` + `deletes`, one per key) and what they did to the table
    (`inserted`, `updated`, `deleted` target rows, from Delta's MERGE metrics; 0 when skipped)."""

    rows: int
    upserts: int
    deletes: int
    version: int
    skipped: bool
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    # how it was written: "append" (fresh inserts), "merge", "insert" (into an empty table), "none"
    # (nothing to write: skipped, or only inserts deleted again)
    kind: str = "merge"
    # a change was an UPDATE with its pre-image: the stream tells inserts from updates
    pre_images: bool = False


class TableWriter(DeltaSession):
    """All Delta writes of the engine go through here (one SparkSession, serial per table).

    Statement execution, conflict retries and Delta log lookups are the Delta session's (`DeltaSession`)."""

    def __init__(self, spark: SparkSession, table_features: str = DEFAULT_PROFILE) -> None:
        super().__init__(spark)
        # What a new table gets (`--table-features`); a table keeps whatever it already has.
        self.table_features: Profile = check_profile(table_features)
        # How a RENAME / DROP COLUMN or type change reaches a table without the feature it needs:
        # rewrite or metadata-only, by size (`--schema-change`, `--rewrite-limit`; schemachange.py).
        self.schema_change: SchemaChange = DEFAULT_SCHEMA_CHANGE
        self.rewrite_limit = DEFAULT_REWRITE_LIMIT
        # Per-MERGE session confs (`make bench` measures them; see MERGE_CONF).
        self.merge_conf = dict(MERGE_CONF)
        # Bound the ON clause to the source's key range so Delta skips files (see module doc), on
        # tables of at least `key_range_min_bytes`; `make bench` turns it off to measure the
        # difference, tests lower the size to exercise it on small tables.
        self.key_range_pruning = True
        self.key_range_min_bytes = KEY_RANGE_MIN_TABLE_BYTES
        # Extra confs of a small MERGE (see SMALL_MERGE_CONF); `make bench` empties it to compare.
        self.small_merge_conf = dict(SMALL_MERGE_CONF)
        # Into a table without data files, insert instead of MERGE (see `merge`); tests and
        # `make bench` turn it off to compare.
        self.insert_into_empty = True
        # Changes that are all fresh inserts are appended (module doc); `make bench` compares.
        self.append_fresh = True
        # Per (path, table uid): the upstream commit ts the table holds, as written or read back
        # from its log (`applied_ts`); shared with the appliers `for_session` derives.
        self._applied: dict[tuple[str, str], int] = {}

    def for_session(self, spark: SparkSession) -> TableWriter:
        """The same applier on another Spark session (a concurrent MERGE worker's): same settings,
        conflict retries counted together; session confs stay per session."""
        other = TableWriter(spark, self.table_features)
        other.schema_change, other.rewrite_limit = self.schema_change, self.rewrite_limit
        other.merge_conf = dict(self.merge_conf)
        other.key_range_pruning = self.key_range_pruning
        other.key_range_min_bytes = self.key_range_min_bytes
        other.small_merge_conf = dict(self.small_merge_conf)
        other.insert_into_empty = self.insert_into_empty
        other.append_fresh = self.append_fresh
        other._applied = self._applied
        other.share_counts(self)
        return other

    # -- tables ----------------------------------------------------------------------------------
    def create_table(self, path: str, spec: TableSpec) -> None:
        """CREATE TABLE IF NOT EXISTS at `path` (idempotent: re-running after a crash is a no-op)."""
        clear_unborn_table(path, self.fence)
        cols = ", ".join(column_ddl(c) for c in spec.columns)
        properties = {**create_properties(self.table_features, (c.name for c in spec.columns)), **LOG_PROPERTIES}
        props = ", ".join(f"{quote_string(k)} = {quote_string(v)}" for k, v in properties.items())
        comment = f" COMMENT {quote_string(spec.comment)}" if spec.comment else ""
        self.sql(f"CREATE TABLE IF NOT EXISTS {delta_ref(path)} ({cols}) USING delta{comment} TBLPROPERTIES ({props})")

    # -- merge -----------------------------------------------------------------------------------
    def source_table(self, spec: TableSpec, changes: Sequence[Change]) -> pa.Table:
        """Positional Arrow source: `_c<i>` per table column plus `_op` (0 upsert, 1 delete)."""
        n = len(changes)
        key_index = {k: i for i, k in enumerate(spec.key)}
        arrays: dict[str, pa.Array] = {}
        for i, col in enumerate(spec.columns):
            conv = converter_for(col)
            name = col.name
            ki = key_index.get(name)
            values: list[Any] = [None] * n
            for j, ch in enumerate(changes):
                if ch.image is not None:
                    v = ch.image.get(name)
                elif ki is not None:
                    v = ch.key[ki]
                else:
                    continue
                values[j] = conv(v)
            try:
                arrays[f"_c{i}"] = pa.array(values, type=arrow_type(col.spark_type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                raise SchemaError(
                    f"column {spec.schema}.{spec.table}.{name}: value does not fit {col.spark_type}: {exc}"
                ) from None
        arrays["_op"] = pa.array([1 if ch.delete else 0 for ch in changes], type=pa.int8())
        return pa.table(arrays)

    def prunes_by_key_range(self, size: int | None) -> bool:
        """Whether a MERGE into a table of `size` bytes (None: unknown) gets the key-range
        conjuncts (module doc): yes unless it is known to be under `key_range_min_bytes`."""
        if not self.key_range_pruning:
            return False
        return self.key_range_min_bytes <= 0 or size is None or size >= self.key_range_min_bytes

    def conf_for(self, size: int | None, source_rows: int) -> dict[str, str]:
        """The session confs of one MERGE into a table of `size` bytes (None: unknown) with
        `source_rows` changes: `merge_conf`, plus `small_merge_conf` when both are small."""
        small = (size is not None and size < SMALL_MERGE_MAX_TABLE_BYTES
                 and source_rows <= SMALL_MERGE_MAX_SOURCE_ROWS)
        return {**self.merge_conf, **self.small_merge_conf} if small else dict(self.merge_conf)

    def merge_sql(self, path: str, spec: TableSpec, view: str, key_range: str = "", *, source_ref: str = "") -> str:
        """The MERGE from temp view `view` (or from `source_ref`, an already quoted reference)."""
        idx = {c.name: i for i, c in enumerate(spec.columns)}
        on = " AND ".join(f"t.{quote_ident(k)} = s.`_c{idx[k]}`" for k in spec.key)
        if key_range:
            on += " AND " + key_range
        sets = ", ".join(f"t.{quote_ident(c.name)} = s.`_c{i}`" for i, c in enumerate(spec.columns))
        cols, vals = _insert_lists(spec)
        return (
            f"MERGE INTO {delta_ref(path)} AS t USING {source_ref or quote_ident(view)} AS s ON {on} "
            "WHEN MATCHED AND s.`_op` = 1 THEN DELETE "
            f"WHEN MATCHED AND s.`_op` = 0 THEN UPDATE SET {sets} "
            f"WHEN NOT MATCHED AND s.`_op` = 0 THEN INSERT ({cols}) VALUES ({vals})"
        )

    def insert_sql(self, path: str, spec: TableSpec, view: str, *, source_ref: str = "") -> str:
        """The MERGE's insert clause alone, for a table with no row to match (`empty_version`)."""
        cols, vals = _insert_lists(spec)
        return (f"INSERT INTO {delta_ref(path)} ({cols}) SELECT {vals} FROM {source_ref or quote_ident(view)} AS s "
                "WHERE s.`_op` = 0")

    def empty_version(self, path: str) -> int | None:
        """The version of a fresh snapshot of the table when its checksum says it has no data
        files, else None (files, or no checksum to tell without rebuilding the table state)."""
        snap = self.snapshot(path)
        checksum = snap.checksumOpt()
        if checksum.isDefined() and int(checksum.get().numFiles()) == 0:
            return int(snap.version())
        return None

    def applied_ts(self, path: str, uid: str) -> int:
        """The upstream commit ts the table already holds (-1: none): remembered from this run's
        writes, else read back once from the table's newest commits (module doc)."""
        key = (path, uid)
        ts = self._applied.get(key)
        if ts is None:
            ts = self.last_applied_ts(path, fileio_for(path).read)
            self._applied.setdefault(key, ts)
        return ts

    def holds_nothing(self, path: str, uid: str) -> None:
        """The table was just created at version 0 by this run (its log holds only the CREATE):
        it holds no step yet, so its first write need not list and read its log to find out."""
        if (path, uid) not in self._applied:
            self._applied[(path, uid)] = -1
            self.pin_read(path, 0)

    def _skip(self, path: str, uid: str, version: int) -> bool:
        return version <= self.applied_ts(path, uid)

    def _done(self, path: str, uid: str, version: int) -> None:
        key = (path, uid)
        self._applied[key] = max(version, self._applied.get(key, -1))

    def merge(
        self, path: str, uid: str, spec: TableSpec, changes: Sequence[Change], version: int,
        metadata: dict[str, Any],
    ) -> MergeResult:
        """One idempotent write of `changes` (already collapsed: one change per key) that brings
        the table to upstream commit ts `version`: an append when they are all fresh inserts,
        else a MERGE."""
        self._check_key(spec)
        deletes = sum(1 for c in changes if c.delete)
        if self._skip(path, uid, version):
            return self._skipped(path, len(changes), deletes)
        appending = self.append_fresh and all_fresh(changes)
        if appending and all(c.delete for c in changes):  # every key inserted and deleted again
            self._done(path, uid, version)
            return MergeResult(len(changes), 0, deletes, self.cached_version(path), False, kind="none")

        def write(as_merge: bool) -> MergeResult:
            if appending and not as_merge:
                fresh = self.source_table(spec, [c for c in changes if not c.delete])
                return dataclasses.replace(self._append_view(path, spec, fresh, version, metadata),
                                           rows=len(changes), deletes=deletes)
            source = self.source_table(spec, changes)
            view = f"replicator_src_{uuid.uuid4().hex[:12]}"
            one_file(self.spark.createDataFrame(source), source.num_rows).createOrReplaceTempView(view)
            try:
                return self._merge_view(path, spec, quote_ident(view), len(changes), deletes,
                                        lambda: key_range_predicate(spec, source), version, metadata)
            finally:
                self.spark.catalog.dropTempView(view)

        res = self._raced(path, uid, version, write, lambda: self._skipped(path, len(changes), deletes))
        self._done(path, uid, version)
        return res

    def _skipped(self, path: str, rows: int, deletes: int) -> MergeResult:
        return MergeResult(rows, rows - deletes, deletes, self.cached_version(path), True, kind="none")

    def _raced(self, path: str, uid: str, version: int, write: Callable[[bool], MergeResult],
               skipped: Callable[[], MergeResult]) -> MergeResult:
        """`write(as_merge)`, re-planned when another writer took its commit version first or
        committed since the plan's version was read (the s3a commit store's `CommitRacedException`
        and its pin, runtime/commitfence.py; nothing of ours committed). This run's lease is
        checked first: a holder that lost it stops here. Then the table's applied ts is read
        back again: at or past `version`, the other commit already holds these changes (a stale
        holder's write of the same step): skipped. Moved but short of it (a stale holder's
        earlier step), the write goes again as a MERGE, which re-applying cannot double; unmoved
        (a user's OPTIMIZE), it goes again as planned."""
        as_merge, attempt = False, 0
        while True:
            before = self.applied_ts(path, uid)
            try:
                with self.pinned(path):  # the commit lands on the version `before` was read at, or races
                    return write(as_merge)
            except Exception as exc:
                if not is_commit_raced(exc) or attempt >= self.max_retries:
                    raise
                raced = exc
            attempt += 1
            self.fence()
            self._applied.pop((path, uid), None)
            now = self.applied_ts(path, uid)
            if version <= now:
                log.warning("%s: another writer committed this step's changes first (applied ts %d); skipped",
                            path, now)
                return skipped()
            as_merge = as_merge or now != before
            self.conflict_backoff(attempt, f"write to {path}", raced)

    def _append_view(self, path: str, spec: TableSpec, source: pa.Table, version: int,
                     metadata: dict[str, Any]) -> MergeResult:
        """Append the upserts of `source` (fresh inserts, no deletes) with one INSERT."""
        view = f"replicator_src_{uuid.uuid4().hex[:12]}"
        one_file(self.spark.createDataFrame(source), source.num_rows).createOrReplaceTempView(view)
        try:
            return self._append_ref(path, spec, quote_ident(view), source.num_rows, version, metadata)
        finally:
            self.spark.catalog.dropTempView(view)

    def _append_ref(self, path: str, spec: TableSpec, source_ref: str, rows: int, version: int,
                    metadata: dict[str, Any]) -> MergeResult:
        with self._writing(path, spec), self.committing(json.dumps(metadata, sort_keys=True)):
            self.sql_retrying(self.insert_sql(path, spec, "", source_ref=source_ref), f"append to {path}", "append",
                              raced=False)
        return MergeResult(rows, rows, 0, self.cached_version(path), False, rows, kind="append")

    def merge_frame(self, path: str, uid: str, spec: TableSpec, frame: DataFrame, version: int,
                    metadata: dict[str, Any], *, trust_inserts: bool | None = False,
                    summary: ChangeSummary | None = None) -> MergeResult:
        """One idempotent write from a distributed source of the positional shape (`_c<i>`, `_op`,
        and optionally `_fresh` and `_pre`; one change per key), as `--reader spark` builds it on
        the executors. The source is persisted for the write's scans and counted first (one job,
        `frame_summary`) unless its `summary` is known; an empty source commits nothing. Its inserts
        count as inserts when `trust_inserts` or when one of its changes was an update with a
        pre-image (the result's `pre_images`); never when `trust_inserts` is None. It may belong to
        another session (the reader's): it is reached through a global temp view."""
        from pyspark import StorageLevel

        self._check_key(spec)
        if self._skip(path, uid, version):
            return MergeResult(0, 0, 0, self.cached_version(path), True, kind="none")
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            stats = summary or frame_summary(frame, spec)
            n, d, pre = stats.rows, stats.deletes, stats.pre_images
            if not n:
                return MergeResult(0, 0, 0, self.cached_version(path), True, kind="none")
            fresh = self.append_fresh and trust_inserts is not None and stats.fresh and (trust_inserts or pre)
            if fresh and n == d:  # every key inserted and deleted again: nothing to write
                self._done(path, uid, version)
                return MergeResult(n, 0, d, self.cached_version(path), False, kind="none", pre_images=pre)
            view = f"replicator_src_{uuid.uuid4().hex[:12]}"
            one_file(frame, n).createOrReplaceGlobalTempView(view)
            ref = f"global_temp.{quote_ident(view)}"

            def write(as_merge: bool) -> MergeResult:
                if fresh and not as_merge:
                    return dataclasses.replace(self._append_ref(path, spec, ref, n - d, version, metadata),
                                               rows=n, deletes=d)
                return self._merge_view(path, spec, ref, n, d, lambda: key_range_from(spec, stats.bounds.__getitem__),
                                        version, metadata)

            try:
                res = self._raced(path, uid, version, write, lambda: self._skipped(path, n, d))
            finally:
                frame.sparkSession.catalog.dropGlobalTempView(view)
            self._done(path, uid, version)
            return dataclasses.replace(res, pre_images=pre)
        finally:
            frame.unpersist()

    def _check_key(self, spec: TableSpec) -> None:
        if not spec.key:
            raise SchemaError(f"table {spec.schema}.{spec.table} has no merge key (no primary/handle key)")
        missing = [k for k in spec.key if spec.column(k) is None]
        if missing:
            raise SchemaError(f"table {spec.schema}.{spec.table}: key column(s) {missing} are not in the table")

    def _merge_view(self, path: str, spec: TableSpec, source_ref: str, rows: int, deletes: int,
                    key_range_of: Callable[[], str], version: int, metadata: dict[str, Any]) -> MergeResult:
        """The MERGE (or insert into an empty table) of a registered source of `rows` changes."""
        size = self.cached_size_bytes(path)
        # A table without data files (new, or emptied) has no row to match: the MERGE would insert
        # the upserts and nothing else, so a plain insert does the same with one job instead of
        # five (module doc). Checked on a fresh snapshot; the first window of every new table.
        empty_at = self.empty_version(path) if size == 0 and deletes < rows and self.insert_into_empty else None
        key_range = key_range_of() if empty_at is None and self.prunes_by_key_range(size) else ""
        with self._writing(path, spec), \
                self.committing(json.dumps(metadata, sort_keys=True), self.conf_for(size, rows)):
            if empty_at is None:
                out = self.sql_retrying(self.merge_sql(path, spec, "", key_range, source_ref=source_ref),
                                        f"MERGE into {path}", "merge", raced=False)
                done = _merge_metrics(out[0]) if out else (0, 0, 0)
                kind = "merge"
            else:
                self.sql_retrying(self.insert_sql(path, spec, "", source_ref=source_ref), f"insert into {path}",
                                  "append", raced=False)
                done, kind = (rows - deletes, 0, 0), "insert"
        return MergeResult(rows, rows - deletes, deletes, self.cached_version(path), False, *done, kind=kind)

    @contextmanager
    def _writing(self, path: str, spec: TableSpec) -> Iterator[None]:
        """A data write's failure that means a corrupt table says so (`is_missing_file`)."""
        try:
            yield
        except Exception as exc:
            if is_missing_file(exc):
                raise StateError(
                    f"Delta table {path} ({spec.schema}.{spec.table}) references files that no longer "
                    "exist; typically a VACUUM with a retention shorter than a write in flight (e.g. RETAIN "
                    "0 HOURS with the retention check off) deleted files before their commit. The table is "
                    "corrupt for every reader and writer: RESTORE it to an earlier version, or rebuild the "
                    "warehouse with `replicator replay --from-earliest`"
                ) from None
            raise
