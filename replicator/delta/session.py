"""One Spark session's statements against Delta: the replicator's one way into its transactions.

Every Delta write of the replicator (the engine's MERGE and DDL, the binlog applier, dead letters)
runs through `DeltaSession`:

* `committing()` sets the commit's `userMetadata` (the step and the upstream commit ts it brings
  the table to) and a statement's own confs, and always restores them; `last_applied_ts()` reads
  that ts back from the table's newest commits, which is how a run settles a step a crashed run
  left in doubt (docs/exactly-once.md). `idempotent()` adds Delta's own idempotent-write confs
  (`txnAppId`, `txnVersion`) for writers that keep them (the binlog applier).
* Every write statement is counted by kind (append, MERGE, DDL) with its Spark jobs, read from
  Spark's status tracker by a job group of its own, and its seconds (`CommitCounts`).
* `sql_retrying()` re-runs a statement that Delta rejected because a concurrent writer (a user's
  OPTIMIZE / VACUUM / ALTER) committed first: nothing of the rejected statement committed, so
  re-running it is safe. Jittered exponential backoff, about a minute in all.
* `snapshot()` / `table_version()` read the Delta log through py4j (DeltaLog has
  no public Python API).

The replicator's own state files go through the warehouse's store (`replicator.storage`).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from replicator.changes import ChangeSummary
from replicator.errors import LeaseLostError, StorageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from replicator.tables import TableSpec

log = logging.getLogger("replicator")

T = TypeVar("T")

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"

COMMIT_KINDS = ("append", "merge", "ddl")
_DDL_WORDS = frozenset({"ALTER", "CREATE", "DROP", "TRUNCATE", "DELETE", "UPDATE", "RESTORE", "REPLACE", "REORG",
                        "OPTIMIZE", "VACUUM"})


# A source of at most ONE_FILE_MAX_ROWS changes is written from one partition. An append (or a
# MERGE's insert-only path) writes a file per partition of its source, and an Arrow table becomes
# `spark.default.parallelism` partitions: every small step left two tiny files in every table it
# touched (docs/delta.md, "Files per step"). Coalescing needs no shuffle and no Spark job; above
# the bound the partitions write in parallel and no file is small.
ONE_FILE_MAX_ROWS = 100_000


def one_file(frame: DataFrame, rows: int) -> DataFrame:
    """`frame` (a write's source of `rows` changes) as one partition when it is small."""
    return frame.coalesce(1) if rows <= ONE_FILE_MAX_ROWS else frame


def frame_summary(frame: DataFrame, spec: TableSpec) -> ChangeSummary:
    """A write's source of net changes (`_c<i>`, `_op`, optionally `_fresh` and `_pre`) counted by
    one Spark job: changes, deletes, whether all are fresh inserts, each key column's range."""
    from pyspark.sql import functions as F

    from replicator.runtime.spark import executor_errors

    keys = [i for i, c in enumerate(spec.columns) if c.name in spec.key]
    aggs = [F.count(F.lit(1)).alias("n"), F.coalesce(F.sum("_op"), F.lit(0)).alias("d")]
    has_fresh = "_fresh" in frame.columns and "_pre" in frame.columns
    if has_fresh:
        aggs += [F.coalesce(F.min("_fresh"), F.lit(1)).alias("f"), F.coalesce(F.max("_pre"), F.lit(0)).alias("p")]
    for i in keys:
        aggs += [F.min(f"_c{i}").alias(f"lo{i}"), F.max(f"_c{i}").alias(f"hi{i}")]
    started = time.monotonic()
    with executor_errors(f"the changes of {spec.schema}.{spec.table}"):
        stats = frame.agg(*aggs).collect()[0]
    log.debug("changes of %s.%s: %d in %.2f s", spec.schema, spec.table, stats["n"], time.monotonic() - started)
    return ChangeSummary(int(stats["n"]), int(stats["d"]), has_fresh and int(stats["f"]) == 1,
                         has_fresh and int(stats["p"]) == 1, {i: (stats[f"lo{i}"], stats[f"hi{i}"]) for i in keys})


def statement_kind(statement: str) -> str | None:
    """What a statement writes, by its first word: "merge", "append" (INSERT), "ddl"; None for a
    read (SELECT, DESCRIBE, SHOW), which is not counted."""
    word = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
    if word == "MERGE":
        return "merge"
    if word == "INSERT":
        return "append"
    return "ddl" if word in _DDL_WORDS else None


@dataclass
class KindCounts:
    count: int = 0
    jobs: int = 0
    seconds: float = 0.0


@dataclass
class CommitCounts:
    """Write statements run, by kind, with the Spark jobs they ran (in the statement's own thread)
    and their seconds: what a step pays Delta, shown by the run summary and `make bench`."""

    kinds: dict[str, KindCounts] = field(default_factory=lambda: {k: KindCounts() for k in COMMIT_KINDS})
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, kind: str, jobs: int, seconds: float) -> None:
        with self.lock:
            c = self.kinds.setdefault(kind, KindCounts())
            c.count += 1
            c.jobs += jobs
            c.seconds += seconds

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {k: {"count": c.count, "jobs": c.jobs, "seconds": round(c.seconds, 3)} for k, c in self.kinds.items()}


_CONFLICT_MARKERS = ("ConcurrentAppendException", "ConcurrentDeleteReadException",
                     "ConcurrentDeleteDeleteException", "MetadataChangedException",
                     "ConcurrentTransactionException", "ProtocolChangedException", "DELTA_CONCURRENT")


_RACED_MARKER = "CommitRacedException"


def is_commit_raced(exc: BaseException) -> bool:
    """Another writer wrote the commit version this statement planned (the s3a commit store,
    runtime/java/s3commit): nothing of the statement committed. Unlike Delta's own conflicts it is
    not re-run as is by Delta: a blind append re-planned on top of a stale holder's commit of the
    same rows would apply them twice. The applier re-plans it (`TableWriter._raced`)."""
    return _RACED_MARKER in f"{type(exc).__name__}: {exc}"


def is_conflict(exc: BaseException) -> bool:
    """A Delta optimistic-concurrency conflict: the statement did not commit and may be re-run.
    py4j raises Py4JJavaError whose text names the Java class (io.delta.exceptions.Concurrent*)."""
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in _CONFLICT_MARKERS)


class DeltaSession:
    """Statement execution, idempotent-write confs, conflict retries and log lookups for one session."""

    def __init__(self, spark: SparkSession, *, max_retries: int = 10) -> None:
        self.spark = spark
        # Run before every statement: the warehouse's writer lease (`Warehouse.fence`) stops a run
        # that lost it before its next Delta commit. Shared with the sessions `for_session` derives.
        self.fence: Callable[[], None] = _no_fence
        # A user's OPTIMIZE / DELETE / ALTER committing during our statement makes Delta reject ours
        # (nothing of it committed); re-running it is safe. Jittered exponential backoff, about a
        # minute in all, so a periodic maintenance job cannot starve a run.
        self.max_retries = max_retries
        self._retries = [0]  # shared with the sessions `for_session` derives: one count per run
        # Told of every conflict retry (the run's metrics count them per table); shared likewise.
        self.on_conflict: Callable[[], None] = _no_fence
        self.commits = CommitCounts()  # shared likewise
        # The lease epoch every commit's userMetadata carries (`stamped`); shared likewise.
        self.epoch: Callable[[], int] = _no_epoch
        self._pin_class: Any = _UNKNOWN  # the JVM's commit pins (`pin_read`), looked up once

    @property
    def conflict_retries(self) -> int:
        """Statements re-run after a concurrent writer's commit (this session and those derived from it)."""
        return self._retries[0]

    def share_counts(self, other: DeltaSession) -> None:
        """Count this session's conflict retries together with `other`'s (a worker's session)."""
        self._retries = other._retries
        self.max_retries = other.max_retries
        self.fence = other.fence
        self.on_conflict = other.on_conflict
        self.commits = other.commits
        self.epoch = other.epoch

    # -- statements ------------------------------------------------------------------------------
    def sql(self, statement: str, kind: str | None = None) -> list[Any]:
        """Run one statement; a write is counted under `kind` (default: by its first word)."""
        self.fence()
        kind = kind or statement_kind(statement)
        try:
            if kind is None:
                return self.spark.sql(statement).collect()
            with self._counted(kind):
                return self.spark.sql(statement).collect()
        except Exception as exc:
            error = as_storage_error(exc)
            if error is None:
                raise
            raise error from None

    def retrying(self, run: Callable[[], T], what: str, *, raced: bool = True) -> T:
        """`run()`, re-run while a concurrent writer's commit made Delta reject it; also when
        another writer took its commit version first, unless `raced` is False (a data write: the
        applier re-plans it instead)."""
        attempt = 0
        while True:
            try:
                return run()
            except Exception as exc:
                again = is_conflict(exc) or (raced and is_commit_raced(exc))
                if not again or attempt >= self.max_retries:
                    raise
                attempt += 1
                self.conflict_backoff(attempt, what, exc)

    def sql_retrying(self, statement: str, what: str, kind: str | None = None, *, raced: bool = True) -> list[Any]:
        """Run a statement, re-running it when a concurrent writer's commit made Delta reject it
        (a concurrent OPTIMIZE / VACUUM / user write: nothing of ours committed, so it is safe)."""
        return self.retrying(lambda: self.sql(statement, kind), what, raced=raced)

    @contextmanager
    def _counted(self, kind: str) -> Iterator[None]:
        """Count the Spark jobs this thread runs inside (a job group of their own) and the time."""
        sc = getattr(self.spark, "sparkContext", None)  # None: a session stand-in (unit tests) counts no jobs
        group = f"replicator-{kind}-{uuid.uuid4().hex[:12]}"
        previous = sc.getLocalProperty("spark.jobGroup.id") if sc is not None else None
        if sc is not None:
            sc.setLocalProperty("spark.jobGroup.id", group)
        started = time.monotonic()
        try:
            yield
        finally:
            seconds = time.monotonic() - started
            jobs = 0
            if sc is not None:
                sc.setLocalProperty("spark.jobGroup.id", previous)  # None unsets it
                jobs = len(sc.statusTracker().getJobIdsForGroup(group))
            self.commits.add(kind, jobs, seconds)

    def conflict_backoff(self, attempt: int, what: str, exc: BaseException) -> None:
        """Count, log and sleep before re-running a statement a concurrent Delta commit rejected."""
        self._retries[0] += 1
        self.on_conflict()
        delay = min(0.25 * 2**attempt, 8.0) * random.uniform(0.5, 1.5)
        lines = str(exc).splitlines()
        first = next((ln for ln in lines if "Concurrent" in ln or "CONCURRENT" in ln or _RACED_MARKER in ln),
                     type(exc).__name__)
        log.warning("%s: a concurrent writer committed first (%s); retrying in %.1fs (attempt %d of %d)",
                    what, first.strip()[:200], delay, attempt, self.max_retries)
        time.sleep(delay)

    @contextmanager
    def idempotent(
        self, app_id: str, version: int, metadata: str, extra_conf: Mapping[str, str] | None = None
    ) -> Iterator[None]:
        """Delta writes inside commit with (txnAppId, txnVersion) = (`app_id`, `version`) and
        `metadata` as the commit's userMetadata; Delta skips one whose version it already committed
        for that appId. `extra_conf` (e.g. the MERGE's own settings) is set alongside. On the way
        out, whatever happens, every key gets back the session's own value (`committing`)."""
        with self.committing(metadata, {TXN_APP_ID: app_id, TXN_VERSION: str(version), **(extra_conf or {})}):
            yield

    @contextmanager
    def committing(self, metadata: str, extra_conf: Mapping[str, str] | None = None) -> Iterator[None]:
        """Writes inside commit with `metadata` as their userMetadata, under `extra_conf` (a
        statement's own settings); on the way out each key gets back the session's own value:
        unsetting it would drop a session-wide setting of the same key (e.g.
        `spark.sql.shuffle.partitions=2` would fall back to 200 for every later statement).
        No txnAppId: appending with one makes Delta rebuild the table's state (3 more Spark jobs)
        to look it up; `last_applied_ts` settles a re-run instead."""
        with self.session_confs({USER_METADATA: self.stamped(metadata), **(extra_conf or {})}):
            yield

    @contextmanager
    def session_confs(self, confs: Mapping[str, str]) -> Iterator[None]:
        """`confs` set on the session meanwhile; on the way out each key gets back the session's
        own value, or is unset when it had none."""
        conf = self.spark.conf
        previous = {k: conf.get(k, None) for k in confs}
        try:
            for k, v in confs.items():
                conf.set(k, v)
            yield
        finally:
            for k, old in previous.items():
                if old is None:
                    conf.unset(k)
                else:
                    conf.set(k, old)

    def stamped(self, metadata: str) -> str:
        """`metadata` (a commit's userMetadata) with this run's lease epoch in its `replicator`
        object: which holder made a commit is in the table's own log (storage/lease.py)."""
        epoch = self.epoch()
        if not epoch:
            return metadata
        try:
            doc = json.loads(metadata)
        except ValueError:
            return metadata
        if not isinstance(doc, dict) or not isinstance(doc.get("replicator"), dict):
            return metadata
        doc["replicator"]["epoch"] = epoch
        return json.dumps(doc, sort_keys=True)

    @contextmanager
    def user_metadata(self, metadata: str) -> Iterator[None]:
        """Commits made inside carry `metadata` as their userMetadata (a non-idempotent write that
        should still say which step made it, e.g. a table-feature upgrade)."""
        conf = self.spark.conf
        conf.set(USER_METADATA, self.stamped(metadata))
        try:
            yield
        finally:
            conf.unset(USER_METADATA)

    # -- the Delta log ---------------------------------------------------------------------------
    def _delta_log(self, path: str) -> tuple[Any, Any]:
        """(the py4j JVM view, the table's DeltaLog): DeltaLog has no public Python API."""
        jvm: Any = self.spark._jvm
        assert jvm is not None, "the SparkSession has no JVM gateway"
        return jvm, jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, path)

    def snapshot(self, path: str) -> Any:
        """Fresh DeltaLog snapshot through py4j: version, txn ids, protocol and metadata."""
        jvm, delta_log = self._delta_log(path)
        return delta_log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty())

    def table_version(self, path: str) -> int:
        return int(self.snapshot(path).version())

    # -- version-pinned data commits (s3a://, under a lease: runtime/commitfence.py) ------------------
    def _pins(self, path: str) -> Any | None:
        if not self.epoch() or not path.startswith("s3a://"):
            return None
        if self._pin_class is _UNKNOWN:
            from replicator.runtime.commitfence import pins

            self._pin_class = pins(self.spark)
        return self._pin_class

    def pin_read(self, path: str, version: int) -> None:
        """What the table holds was read at `version`: the plans of its data writes rest on it,
        so its next data commit from this JVM must be `version` + 1 (or it fails as a lost race,
        `pinned`)."""
        pins = self._pins(path)
        if pins is not None:
            pins.readAt(path, version)

    @contextmanager
    def pinned(self, path: str) -> Iterator[None]:
        """A data write of the table: its commit lands on the version its plan was read at, or
        fails as a lost race (`is_commit_raced`) when anyone else committed since."""
        pins = self._pins(path)
        if pins is None:
            yield
            return
        pins.guard(path)
        try:
            yield
        finally:
            pins.unguard(path)

    def cached_version(self, path: str) -> int:
        """The version of the session's cached snapshot of the table, without listing the log.

        Right after a write of this session it is that write's own commit (Delta installs the
        post-commit snapshot) or, for a skipped idempotent write, the snapshot it read. Saves the
        log listing and snapshot rebuild `table_version` costs after every MERGE.
        """
        _, delta_log = self._delta_log(path)
        return int(delta_log.unsafeVolatileSnapshot().version())

    def cached_size_bytes(self, path: str) -> int | None:
        """Bytes of data files in the session's cached snapshot of the table, from its checksum
        (`.crc`); None when that snapshot has none. Neither lists the log nor reconstructs the
        table state; the figure may lag a concurrent writer's commit."""
        _, delta_log = self._delta_log(path)
        checksum = delta_log.unsafeVolatileSnapshot().checksumOpt()
        return int(checksum.get().tableSizeBytes()) if checksum.isDefined() else None

    def last_applied_ts(self, path: str, read: Callable[[str], bytes | None]) -> int:
        """The upstream commit ts the table's newest replicator data commit brought it to (its
        userMetadata's `applied_ts`), or -1 when none of its retained commits is one.

        Read from the commit files themselves, newest first (`read` fetches one from the store),
        past other writers' commits (a user's OPTIMIZE) and the replicator's DDL commits; the
        version comes from Delta's own log listing, so neither costs a Spark job. A commit made
        under a later lease epoch than this run's stops it (LeaseLostError): a newer holder wrote
        the table, whatever this run's clock says (storage/lease.py)."""
        version = self.table_version(path)
        self.pin_read(path, version)
        base = path.rstrip("/") + "/_delta_log/"
        mine = self.epoch()
        for v in range(version, -1, -1):
            data = read(f"{base}{v:020d}.json")
            if data is None:  # cleaned up past the retention: older commits are gone too
                return -1
            rep = _replicator_meta(data)
            theirs = int(rep.get("epoch", 0) or 0) if rep is not None else 0
            if mine and theirs > mine:  # a later holder of the lease wrote this table: fenced
                raise LeaseLostError(
                    f"{path}: version {v} was committed under lease epoch {theirs}, this run's is {mine}: another "
                    "run holds the warehouse now; this one stops without writing more (nothing is lost)")
            ts = _applied_ts(rep)
            if ts is not None:
                return ts
        return -1


# What Hadoop's s3a (and the AWS SDK under it) says when the store cannot be reached or refuses us.
_STORE_FAILURES = (
    ("AccessDenied", "the store refused the credentials (access denied)"),
    ("InvalidAccessKeyId", "the store refused the credentials (unknown access key)"),
    ("SignatureDoesNotMatch", "the store refused the credentials (wrong secret key)"),
    ("NoAuthWithAWSException", "no AWS credentials found (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE)"),
    ("UnknownStoreException", "the bucket does not exist"),
    ("NoSuchBucket", "the bucket does not exist"),
    ("Connection refused", "the store is unreachable (connection refused)"),
    ("Unable to execute HTTP request", "the store is unreachable"),
    ("AWSClientIOException", "the store is unreachable"),
    ("ConnectTimeoutException", "the store is unreachable (connect timeout)"),
    ("UnknownHostException", "the store's host is unknown"),
)


def storage_failure(exc: BaseException) -> str | None:
    """What went wrong with the store, when `exc` (a Spark / py4j error) is an object store's
    failure rather than Delta's or the statement's; None otherwise. Never echoes the exception's
    text (it can hold request details)."""
    text = str(exc)
    if "s3a" not in text and "amazon" not in text.lower() and "S3A" not in text:
        return None
    for marker, meaning in _STORE_FAILURES:
        if marker in text:
            return meaning
    return None


def as_storage_error(exc: BaseException) -> StorageError | None:
    """The one-line error for a Delta write that failed on the store (`storage_failure`); None for
    any other failure."""
    failure = storage_failure(exc)
    if failure is None:
        return None
    return StorageError(f"a Delta statement failed on the warehouse's store: {failure}; nothing of it was "
                        "committed and nothing is lost: run again once the store is reachable")


def _replicator_meta(commit: bytes) -> dict[str, Any] | None:
    """The `replicator` object of a commit file's userMetadata (None: not a replicator commit)."""
    for line in commit.splitlines():
        if b'"commitInfo"' not in line:
            continue
        try:
            meta = json.loads(json.loads(line)["commitInfo"].get("userMetadata") or "null")
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        rep = meta.get("replicator") if isinstance(meta, dict) else None
        return rep if isinstance(rep, dict) else None
    return None


def _applied_ts(rep: dict[str, Any] | None) -> int | None:
    """`applied_ts` of a replicator commit when it is a data commit (kind "window"), else None."""
    if rep is not None and rep.get("kind") == "window" and type(rep.get("applied_ts")) is int:
        return int(rep["applied_ts"])
    return None


def _no_epoch() -> int:
    return 0


def _no_fence() -> None:
    return None


_UNKNOWN: Any = object()
"""Not looked up yet (`DeltaSession._pins`)."""
