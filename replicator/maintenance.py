"""`replicator maintain`: compact a warehouse's small files (Delta OPTIMIZE) and remove the files
no version within the retention needs (Delta VACUUM), each table under its shard's writer lease.

What it does per table, in this order:

1. **Plan, without Spark**: the live data files and their sizes come from the table's `_delta_log`
   (`replicator.delta.rowcount`, as `replicator tables` reads it). A file under half the target size
   (`--target-file-size`, default 128 MiB) is *small*; a table with at least `--min-small-files`
   (default 8) of them is compacted. Eight because each small file costs a full read about 7 ms
   (16 appends read 1.6x slower than one file, 8 appends 1.2x), while compacting at 8 keeps a
   follower's compaction under a tenth of its time (docs/benchmarks.md).
2. **Compact**: `OPTIMIZE delta.`path`` with `optimize.minFileSize` at the small-file limit and
   `optimize.maxFileSize` at the target, so Delta bin-packs exactly the files counted above. It is
   one Delta commit whose added and removed files are `dataChange=false`: change-data-feed and
   streaming readers see nothing, the table's rows are the same before and after, and a process
   killed in the middle leaves either no commit (the files it wrote are unreferenced, removed by a
   later VACUUM) or the whole commit; nothing is lost either way.
3. **Vacuum**: `VACUUM delta.`path` RETAIN n HOURS` (default 168 = 7 days). Delta deletes the
   files no version newer than the retention references, and every file under the table that the
   log does not track and that is older than the retention. `_change_data/` files are never part
   of a snapshot, so VACUUM treats them as untracked: it deletes them once they are older than the
   retention. The retention is therefore also how far back the change data feed stays readable
   (and time travel: a version older than it may miss files). A retention below a table's
   `delta.deletedFileRetentionDuration` (Delta's default 7 days) is refused unless the caller asks
   for it explicitly (`allow_short_retention`), the same check Delta makes.

`dry_run` plans and asks Delta what VACUUM would delete (`VACUUM ... DRY RUN`), takes no lease
and changes nothing. Otherwise every statement runs on the replicator's own session (`get_spark`:
on s3a:// the conditional commit store) with the lease of the shard the table belongs to held and
the JVM's commit fence armed (`commitfence.arm`), exactly as `replicator run` holds it: a follower
on the same tables is refused (or waited for) and never races the rewrite. When each table was
compacted and vacuumed goes into the shard's state.json, as a follower records its own.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from replicator.delta.rowcount import DEFAULT_TARGET_FILE_BYTES as DEFAULT_TARGET_FILE_BYTES
from replicator.delta.rowcount import Inexact, LogSnapshot, file_bytes, read_snapshot
from replicator.errors import ConfigError
from replicator.filters import TableFilter
from replicator.mysql.tokens import quote_ident
from replicator.shards import ShardSpec
from replicator.storage import as_location, is_url
from replicator.views.listing import ListedTable, list_tables
from replicator.warehouse.store import STATE_FORMAT, State, Warehouse, read_state_file

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.delta.session import DeltaSession

log = logging.getLogger("replicator")

DEFAULT_MIN_SMALL_FILES = 8
DEFAULT_RETENTION_HOURS = 168.0
RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"
DELTA_DEFAULT_RETENTION_HOURS = 168.0
OPTIMIZE_MIN_CONF = "spark.databricks.delta.optimize.minFileSize"
OPTIMIZE_MAX_CONF = "spark.databricks.delta.optimize.maxFileSize"
RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
OVERRIDE_FLAG = "--allow-short-retention"
MAINTAIN_METADATA = '{"replicator": {"kind": "maintain"}}'
"""The userMetadata of maintenance commits (never a data commit: `last_applied_ts` reads past it)."""


@dataclass(frozen=True)
class MaintainOptions:
    retention_hours: float = DEFAULT_RETENTION_HOURS
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    min_small_files: int = DEFAULT_MIN_SMALL_FILES
    allow_short_retention: bool = False
    dry_run: bool = False
    table_filter: TableFilter = field(default_factory=TableFilter)
    wait: bool = False
    lease_seconds: float | None = None

    @property
    def small_file_bytes(self) -> int:
        """A file under this is small: half the target ("well under" it)."""
        return max(1, self.target_file_bytes // 2)


@dataclass
class TableReport:
    """One table: what it held, what compaction did (or would do), what VACUUM removed (or would)."""

    schema: str
    table: str
    path: str
    shard: str | None
    files: int
    bytes: int
    small_files: int
    small_bytes: int
    compact: bool
    files_after: int  # dry run: the estimate (small bytes packed into target-size files); else the log's
    retention_floor_hours: float
    vacuum_files: int = 0
    vacuum_bytes: int = 0
    vacuum_change_data_files: int = 0
    seconds: float = 0.0
    spark_jobs: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": self.schema, "table": self.table, "path": self.path, "files": self.files, "bytes": self.bytes,
            "small_files": self.small_files, "small_bytes": self.small_bytes, "compact": self.compact,
            "files_after": self.files_after, "retention_floor_hours": self.retention_floor_hours,
            "vacuum_files": self.vacuum_files, "vacuum_bytes": self.vacuum_bytes,
            "vacuum_change_data_files": self.vacuum_change_data_files, "seconds": round(self.seconds, 3),
            "spark_jobs": dict(self.spark_jobs)}
        if self.shard is not None:
            out["shard"] = self.shard
        return out


@dataclass
class MaintainReport:
    warehouse: str
    options: MaintainOptions
    tables: list[TableReport] = field(default_factory=list)
    seconds: float = 0.0
    steps_rolled: int = 0  # step-log records older than the retention folded (storage/steplog.py)

    def to_json(self) -> dict[str, Any]:
        o = self.options
        return {"warehouse": self.warehouse, "dry_run": o.dry_run, "retention_hours": o.retention_hours,
                "target_file_size": o.target_file_bytes, "min_small_files": o.min_small_files,
                "tables": [t.to_json() for t in self.tables],
                "compacted_tables": sum(t.compact for t in self.tables),
                "vacuum_files": sum(t.vacuum_files for t in self.tables),
                "vacuum_bytes": sum(t.vacuum_bytes for t in self.tables), "steps_rolled": self.steps_rolled,
                "seconds": round(self.seconds, 3)}


_INTERVAL_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(week|day|hour|minute|min|second|sec)s?\b")
_HOURS = {"week": 168.0, "day": 24.0, "hour": 1.0, "minute": 1 / 60, "min": 1 / 60, "second": 1 / 3600,
          "sec": 1 / 3600}


def interval_hours(text: str | None) -> float:
    """A Delta interval property (`interval 7 days`, `168 hours`, `interval 1 week 2 days`) in
    hours; absent: Delta's default (7 days); ConfigError when it cannot be read."""
    if text is None or not text.strip():
        return DELTA_DEFAULT_RETENTION_HOURS
    body = text.strip().lower().removeprefix("interval").strip()
    parts = _INTERVAL_PART.findall(body)
    if not parts or _INTERVAL_PART.sub("", body).strip():
        raise ConfigError(f"cannot read the table property {RETENTION_PROPERTY} = {text!r}")
    return sum(float(n) * _HOURS[unit] for n, unit in parts)


def check_retention(retention_hours: float, floor_hours: float, name: str, allow_short: bool) -> None:
    """Refuse (ConfigError, exit 2) a retention below the table's own, as Delta does, unless asked."""
    if retention_hours < 0 or math.isnan(retention_hours):
        raise ConfigError(f"--retention-hours must be 0 or more, not {retention_hours}")
    if retention_hours < floor_hours and not allow_short:
        raise ConfigError(
            f"--retention-hours {retention_hours:g} is below the {floor_hours:g} hours table {name} keeps removed "
            f"files for ({RETENTION_PROPERTY}): a reader of an older version, a change-data-feed reader behind "
            f"by more than {retention_hours:g} hours or a writer still writing its files could fail; give at least "
            f"{floor_hours:g}, or pass {OVERRIDE_FLAG} if no such reader or writer exists")


def live_file_sizes(delta: DeltaSession, path: str, known: dict[str, LogSnapshot] | None = None) -> list[int]:
    """The sizes of the table's live data files: from its log (no Spark), else from Delta's snapshot
    (a log this reader cannot replay exactly: a v2 checkpoint, a gap). `known`: the snapshots read
    before, by path, read on from there (a follower looks at a table every few commits) and kept."""
    try:
        snapshot = read_snapshot(path, file_bytes, since=known.get(path) if known is not None else None)
        if snapshot is not None:
            if known is not None:
                known[path] = snapshot
            return list(snapshot.live.values())
    except Inexact as exc:
        log.info("reading the files of %s with Spark: %s", path, exc)
    from pyspark.sql import DataFrame

    files = DataFrame(delta.snapshot(path).allFiles().toDF(), delta.spark)
    return [int(r[0]) for r in files.select("size").collect()]


def _on_disk(path: str) -> dict[str, int]:
    """Every file under the table's directory (the log's too), by its path below it, with its size."""
    root = as_location(path)
    marker = "/" + root.name + "/"
    return {p.split(marker, 1)[-1]: size for p, size in root.io.files(root.path)
            if not p.rsplit("/", 1)[-1].startswith(".")}  # a local file system's .crc twins


def plan_table(t: ListedTable, options: MaintainOptions, floor_hours: float, sizes: list[int]) -> TableReport:
    small = [s for s in sizes if s < options.small_file_bytes]
    compact = len(small) >= options.min_small_files and len(small) > 1
    after = len(sizes) - len(small) + max(1, math.ceil(sum(small) / options.target_file_bytes)) if compact \
        else len(sizes)
    return TableReport(t.schema, t.table, t.path, t.shard, len(sizes), sum(sizes), len(small), sum(small), compact,
                       after, floor_hours)


class Maintainer:
    """Runs the statements of one table on a session of its own (its confs never reach another)."""

    def __init__(self, delta: DeltaSession, options: MaintainOptions) -> None:
        self.delta = delta
        self.options = options

    @property
    def spark(self) -> SparkSession:
        return self.delta.spark

    def floor_hours(self, path: str) -> float:
        rows = self.delta.sql(f"DESCRIBE DETAIL delta.{quote_ident(path)}")
        properties = (rows[0]["properties"] or {}) if rows else {}
        return interval_hours(properties.get(RETENTION_PROPERTY))

    def _vacuum_confs(self) -> dict[str, str]:
        return {RETENTION_CHECK_CONF: "false"} if self.options.allow_short_retention else {}

    def _jobs(self, kind: str) -> int:
        counts = self.delta.commits.kinds.get(kind)
        return counts.jobs if counts is not None else 0

    def _removed(self, report: TableReport, paths: list[str], sizes: dict[str, int]) -> None:
        files = [p for p in paths if p in sizes]  # a DRY RUN also names the directories it would delete
        report.vacuum_files = len(files)
        report.vacuum_bytes = sum(sizes.get(f, 0) for f in files)
        report.vacuum_change_data_files = sum(1 for f in files if f.startswith("_change_data/"))

    def compact(self, path: str, name: str) -> None:
        """Bin-pack the table's small files: one OPTIMIZE commit, `dataChange=false`."""
        confs = {OPTIMIZE_MIN_CONF: str(self.options.small_file_bytes),
                 OPTIMIZE_MAX_CONF: str(self.options.target_file_bytes)}
        with self.delta.session_confs(confs), self.delta.user_metadata(MAINTAIN_METADATA):
            self.delta.sql_retrying(f"OPTIMIZE delta.{quote_ident(path)}", f"OPTIMIZE of {name}", kind="optimize")

    def vacuum(self, path: str, name: str, retention_hours: float) -> tuple[list[str], dict[str, int]]:
        """VACUUM the table: the files it removed (below the table's directory) and the sizes of
        everything that was there before (listed before and after: no DRY RUN pass of its own)."""
        on_disk = _on_disk(path)
        statement = f"VACUUM delta.{quote_ident(path)} RETAIN {retention_hours:g} HOURS"
        with self.delta.session_confs(self._vacuum_confs()), self.delta.user_metadata(MAINTAIN_METADATA):
            # (Delta prints "Deleted N files ..." on the JVM's stdout: stderr, runtime/spark.py)
            self.delta.sql_retrying(statement, f"VACUUM of {name}", kind="vacuum")
        return sorted(set(on_disk) - set(_on_disk(path))), on_disk

    def run(self, t: ListedTable, report: TableReport) -> None:
        started = time.monotonic()
        path, quoted = t.path, quote_ident(t.path)
        vacuum = f"VACUUM delta.{quoted} RETAIN {self.options.retention_hours:g} HOURS"
        before = {k: self._jobs(k) for k in ("optimize", "vacuum", "vacuum_dry_run")}
        if self.options.dry_run:
            # What VACUUM would delete now, by Delta's own rules (without the files a compaction
            # would replace first: those are kept for the retention from the compaction on).
            with self.delta.session_confs(self._vacuum_confs()):
                rows = self.delta.sql(vacuum + " DRY RUN", kind="vacuum_dry_run")
            marker = "/" + as_location(path).name + "/"
            self._removed(report, [str(r[0]).split(marker, 1)[-1] for r in rows], _on_disk(path))
        else:
            if report.compact:
                self.compact(path, f"{t.schema}.{t.table}")
                report.files_after = len(live_file_sizes(self.delta, path))
            self._removed(report, *self.vacuum(path, f"{t.schema}.{t.table}", self.options.retention_hours))
        report.spark_jobs = {k: self._jobs(k) - v for k, v in before.items() if self._jobs(k) - v}
        report.seconds = time.monotonic() - started


def _shard_of(label: str | None) -> ShardSpec | None:
    return None if label is None else ShardSpec.parse(label)


def maintain(root: str, options: MaintainOptions, *,
             on_table: Callable[[TableReport], None] | None = None) -> MaintainReport:
    """Maintain every table of the warehouse at `root` that `options.table_filter` keeps: each
    shard's tables (one group for an unsharded warehouse) under that shard's lease, one at a time."""
    from replicator.delta.session import DeltaSession
    from replicator.runtime import commitfence
    from replicator.runtime.spark import get_spark, use_storage

    started = time.monotonic()
    if options.retention_hours < 0 or math.isnan(options.retention_hours):
        raise ConfigError(f"--retention-hours must be 0 or more, not {options.retention_hours}")
    wh_root, listed = list_tables(root)
    tables = [t for t in listed if options.table_filter.reason(t.schema, t.table) is None]
    report = MaintainReport(wh_root, options)
    groups: dict[str | None, list[ListedTable]] = {}
    for t in tables:
        groups.setdefault(t.shard, []).append(t)
    if not groups:
        report.seconds = time.monotonic() - started
        return report
    spark = get_spark()
    if is_url(wh_root):
        use_storage(spark)
    session = spark.newSession()  # the OPTIMIZE / VACUUM confs stay on this session
    delta = DeltaSession(session)
    maintainer = Maintainer(delta, options)
    # Every table's retention check first: a refused retention stops before anything changed.
    plans = []
    for t in tables:
        floor = maintainer.floor_hours(t.path)
        check_retention(options.retention_hours, floor, f"{t.schema}.{t.table}", options.allow_short_retention)
        plans.append((t, plan_table(t, options, floor, live_file_sizes(delta, t.path))))
    for label in groups:
        wh = Warehouse(wh_root, shard=_shard_of(label), **(
            {"lease_seconds": options.lease_seconds} if options.lease_seconds is not None else {}))
        group = [(t, p) for t, p in plans if t.shard == label]
        with _held(wh, options) as lease:
            if lease is not None and wh.on_object_store:
                commitfence.arm(session, lease, wh.root)
            delta.fence, delta.epoch = wh.fence, wh.epoch
            marks = _Marks(wh) if not options.dry_run else None
            try:
                for t, plan in group:
                    maintainer.run(t, plan)
                    report.tables.append(plan)
                    if marks is not None:
                        marks.maintained(t, compacted=plan.compact)
                    if on_table is not None:
                        on_table(plan)
                if not options.dry_run:  # the shard's own records are kept for the same retention
                    report.steps_rolled += wh.roll_step_log(dt.timedelta(hours=options.retention_hours))
            finally:
                delta.fence, delta.epoch = _no_fence, _no_epoch
    report.seconds = time.monotonic() - started
    return report


class _Marks:
    """When each table was last compacted and vacuumed, in its shard's state.json (`vacuumed`,
    `compacted`, as a follower keeps them), saved after each table: what `tables` and `status` show
    and what a follower's next VACUUM is timed from. Only a warehouse a Kafka run wrote has one."""

    def __init__(self, wh: Warehouse) -> None:
        self.wh = wh
        held = wh.read_own(wh.state_path)  # the holder's read (one GET): its writes are conditional on it
        self.state = read_state_file(wh.state_path, State, STATE_FORMAT, held) if held is not None else None

    def maintained(self, t: ListedTable, *, compacted: bool) -> None:
        entry = self.state.live_table(t.schema, t.table) if self.state is not None and t.source == "kafka" else None
        if self.state is None or entry is None:
            return
        now = time.time()
        self.state.vacuumed[entry.uid] = now
        if compacted:
            self.state.compacted[entry.uid] = now
        self.wh.save_state(self.state)


def _no_fence() -> None:
    return None


def _no_epoch() -> int:
    return 0


@contextmanager
def _held(wh: Warehouse, options: MaintainOptions) -> Iterator[Any]:
    """The shard's lease for the group's statements (none for a dry run: it changes nothing)."""
    if options.dry_run:
        yield None
        return
    with wh.locked(wait=options.wait):
        yield wh.lease
