"""The warehouse: Delta tables plus the replicator's own durable state, in a local directory or
under an object-store URL (`s3a://bucket/prefix`), the same layout either way.

Layout:
    <warehouse>/tables/<schema>/<table>-<uid>/   one Delta table per upstream table (path kept on rename)
    <warehouse>/_replicator/state.json            progress: applied watermark, per-partition restart
                                                  cursors, DDL ledger, table catalog (atomic replace)
    <warehouse>/_replicator/windows.jsonl         one line per applied step (table Delta versions);
    <warehouse>/_replicator/windows/<step>.jsonl  on an object store, in segments (storage/steplog.py)
    <warehouse>/_replicator/dead_letters/         Delta table of undecodable / refused messages
    <warehouse>/_replicator/lease.json            the writer lease: who runs, since when, until when
    <warehouse>/_replicator/binlog.json           a statement binlog's progress (`run --binlog`)
    <warehouse>/_replicator/shards.json           a sharded warehouse's layout (`--shard I/N`): {"shards": N}
    <warehouse>/_replicator/spill/<run>/          rows a full buffer moved to disk until applied (sources/spill.py)
    <warehouse>/_replicator/shards/<I>-of-<N>/    shard I's own state.json, windows.jsonl, dead_letters/
                                                  and lease.json (the tables stay under tables/)

Progress is committed after every step, after that step's Delta commits: a crash in between is
repaired by re-applying the step, which is idempotent: each data commit records in its userMetadata
the upstream commit ts it brings its table to, and a write at or below a table's recorded ts is
skipped (`delta/writer.py`; Delta's txnAppId/txnVersion are not used there); DDL by the ledger +
check-before-alter. See docs/exactly-once.md.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    SkipValidation,
    model_serializer,
    model_validator,
)

from replicator.errors import ConfigError, LeaseLostError, StateError
from replicator.progress import Progress
from replicator.runtime import jars
from replicator.shards import ShardSpec
from replicator.storage import Location, fileio_for, normalise_root
from replicator.storage.fenced import FencedWriter, require_conditional_writes
from replicator.storage.fileio import S3_SCHEMES, scheme_of
from replicator.storage.lease import DEFAULT_LEASE_SECONDS, Lease
from replicator.storage.steplog import StepLog
from replicator.tables import TableSpec

STATE_FORMAT = 1
# Steps older than this are folded into one record (`roll_step_log`): the default vacuum retention,
# beyond which a snapshot at an old watermark may miss its files anyway.
STEP_LOG_RETENTION = dt.timedelta(days=7)
_Model = TypeVar("_Model", bound=BaseModel)


def read_state_file(where: Location, model: type[_Model], fmt: int, data: bytes | None = None) -> _Model | None:
    """A JSON state file of the warehouse (state.json, binlog.json) validated, or None when it is
    absent: one reader, so each refuses an unreadable file or another format in the same words.
    `data`: its bytes, already read."""
    if data is None:
        data = where.io.read(where.path)
    if data is None:
        return None
    try:
        state = model.model_validate_json(data)
    except ValueError as exc:
        raise StateError(f"{where} is unreadable: {exc}") from None
    found = getattr(state, "format", None)
    if found != fmt:
        raise StateError(f"{where} has format {found}; this replicator reads {fmt}")
    return state


class PartitionState(BaseModel):
    offset: int
    watermark: int


class TableEntry(BaseModel):
    """A replicated table. `uid` is stable across renames; `path` never moves."""

    model_config = ConfigDict(populate_by_name=True)

    uid: str
    schema_name: str = Field(alias="schema")
    table: str
    path: str
    spec: dict[str, Any]
    status: Literal["live", "dropped"] = "live"
    created_ts: int = 0
    dropped_ts: int | None = None
    # Reader requirements a DDL changed (a metadata-only schema change enabled a reader feature):
    # table, feature, why, readers after, ddl, commit_ts (replicator/delta/schemachange.py).
    reader_changes: list[dict[str, Any]] = Field(default_factory=list)

    @model_serializer(mode="wrap")
    def _without_empty_reader_changes(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """state.json keeps its shape for tables without reader changes (most)."""
        out: dict[str, Any] = handler(self)
        if not out.get("reader_changes"):
            out.pop("reader_changes", None)
        return out

    @property
    def table_spec(self) -> TableSpec:
        return TableSpec.from_json(self.spec)

    @property
    def key(self) -> list[str]:
        return list(self.spec["key"])


class _ProgressWire(BaseModel):
    """Type check of the progress fields as state.json has them (flat, next to the catalog).
    ``partitions``: the one topic's cursors of a state written before several topics were
    followed; read as the cursors of the state's ``source`` topic."""

    applied_ts: int = 0
    positions: dict[str, dict[str, PartitionState]] = Field(default_factory=dict)
    partitions: dict[str, PartitionState] = Field(default_factory=dict)
    quiet_topics: dict[str, int] = Field(default_factory=dict)
    ended_versions: dict[str, int] = Field(default_factory=dict)
    ddl_ledger: list[tuple[int, str]] = Field(default_factory=list)


_PROGRESS_KEYS = ("applied_ts", "positions", "partitions", "quiet_topics", "ended_versions", "ddl_ledger")


class State(BaseModel):
    """state.json. Replication progress is one `Progress` object (shared with the windower that
    updates it); on disk its fields stay flat, between ``protocol`` and ``schemas``, as always."""

    format: int = STATE_FORMAT
    source: str | None = None
    protocol: str | None = None
    progress: SkipValidation[Progress] = Field(default_factory=Progress, exclude=True)
    schemas: list[str] = Field(default_factory=list)
    tables: dict[str, TableEntry] = Field(default_factory=dict)
    steps: int = 0
    # Upper bound of the last step with DDLs that started; above applied_ts after a crash inside
    # it, when a table's Delta schema may be ahead of this catalog (engine/pipeline.py).
    inflight_hi: int = 0
    # The stream has shown an UPDATE with its pre-image, so its Open Protocol / Craft inserts are
    # inserts (not updates without old values): fresh inserts may be appended (engine/merging.py).
    pre_images: bool = False
    # Why fresh inserts are no longer appended to this warehouse (a skipped dead letter or DDL may
    # have lost a delete: an appended key could then already be there); None: they are.
    merge_only: str | None = None
    # Simple: the table schemas (wire `tableSchema` objects) read so far, so that a restart decodes
    # rows whose BOOTSTRAP / DDL message lies before its starting offsets.
    codec_schemas: list[dict[str, Any]] = Field(default_factory=list)
    # The metastore the tables are registered in (delta/catalog.py: uri, database_prefix), so that
    # any other process finds them by name; absent when none is.
    catalog: dict[str, str] | None = None
    # A shard's state (`--shard I/N`): the RENAME TABLE(S) the stream has shown, from which every
    # shard derives the same table identities (replicator/shards.py); absent when unsharded.
    shard_renames: list[Any] = Field(default_factory=list)
    # The lease epoch of the run that wrote it (storage/fenced.py); absent outside a locked run.
    epoch: int = 0
    # When a follower or `replicator maintain` last vacuumed and compacted each live table (Unix
    # seconds, by uid: engine/compaction.py, maintenance.py); shown by `tables` and `status`.
    vacuumed: dict[str, float] = Field(default_factory=dict)
    compacted: dict[str, float] = Field(default_factory=dict)
    updated_at: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _progress_from_flat_fields(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "progress" in data:
            return data
        data = dict(data)
        wire = _ProgressWire.model_validate({k: data.pop(k) for k in _PROGRESS_KEYS if k in data})
        positions = {t: {p: c.model_dump() for p, c in parts.items()} for t, parts in wire.positions.items()}
        if wire.partitions:  # one topic's cursors, from before positions were kept per topic
            topic = data.get("source")
            if not isinstance(topic, str):
                raise ValueError("state.json has partition cursors but no source topic they belong to")
            positions.setdefault(topic, {p: c.model_dump() for p, c in wire.partitions.items()})
        data["progress"] = Progress.from_wire(wire.applied_ts, positions, wire.ddl_ledger,
                                              quiet_topics=wire.quiet_topics, ended_versions=wire.ended_versions)
        return data

    @model_serializer(mode="wrap")
    def _progress_as_flat_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = handler(self)
        if not out.get("inflight_hi"):
            out.pop("inflight_hi", None)  # written only while it matters: older states keep their shape
        for optional in ("pre_images", "merge_only"):
            if not out.get(optional):
                out.pop(optional, None)
        if not out.get("codec_schemas"):
            out.pop("codec_schemas", None)  # Simple only
        if not out.get("catalog"):
            out.pop("catalog", None)  # only with a catalog
        if not out.get("shard_renames"):
            out.pop("shard_renames", None)  # sharded warehouses only
        if not out.get("epoch"):
            out.pop("epoch", None)  # written by a lease holder only
        for maintained in ("vacuumed", "compacted"):
            if not out.get(maintained):
                out.pop(maintained, None)  # once a table was maintained only
        flat = self.progress.to_wire()
        ordered: dict[str, Any] = {}
        for k, v in out.items():
            if k == "schemas":
                ordered.update(flat)
            ordered[k] = v
        return ordered

    # Read-only views in the state file's shape, for readers of state.json (tools, tests); the
    # engine changes progress only through `progress`.
    @property
    def applied_ts(self) -> int:
        return self.progress.applied_ts

    @property
    def partitions(self) -> dict[str, PartitionState]:
        """Cursors by "<topic>:<partition>"."""
        return {str(p): PartitionState(offset=c.offset, watermark=c.watermark)
                for p, c in self.progress.cursors.items()}

    @property
    def ddl_ledger(self) -> list[tuple[int, str]]:
        return sorted(self.progress.ddl_ledger)

    def live_table(self, schema: str, table: str) -> TableEntry | None:
        for entry in self.tables.values():
            if entry.status == "live" and entry.schema_name == schema and entry.table == table:
                return entry
        return None

    def live_tables(self) -> list[TableEntry]:
        return sorted(
            (e for e in self.tables.values() if e.status == "live"), key=lambda e: (e.schema_name, e.table)
        )


_SAFE = re.compile(r"[^A-Za-z0-9_]+")


def safe_segment(name: str) -> str:
    """A filesystem-safe, readable path segment for an untrusted upstream name."""
    cleaned = _SAFE.sub("_", name).strip("_")[:48]
    return cleaned or "_"


def table_uid(schema: str, table: str, created_ts: int) -> str:
    """Deterministic id: re-applying the same CREATE after a crash lands on the same path."""
    h = hashlib.sha256(f"{schema}\x00{table}\x00{created_ts}".encode()).hexdigest()
    return h[:12]


class Warehouse:
    """A warehouse at a local path or an object-store URL (`s3a://bucket/prefix`); its state goes
    through the store's `FileIO`, so nothing here depends on which kind it is."""

    def __init__(self, root: str | os.PathLike[str], *, lease_seconds: float = DEFAULT_LEASE_SECONDS,
                 shard: ShardSpec | None = None) -> None:
        self.root = normalise_root(root)
        if jars.needs_s3(self.root):  # the session this process starts must carry S3A
            jars.require("s3")
        self.io = fileio_for(self.root)
        self.base = Location(self.io, self.root)
        self.shard = shard
        self.layout_path = self.base / "_replicator" / "shards.json"
        # A shard's own progress, step log, dead letters and lease; unsharded: _replicator/ itself.
        self.meta = self.base / "_replicator" if shard is None else self.base / "_replicator" / "shards" / shard.label
        self.state_path = self.meta / "state.json"
        self.dead_letters_path = self.meta / "dead_letters"
        self.lease_path = self.meta / "lease.json"
        self.steps = StepLog(self.io, self.meta.path)
        self.lease_seconds = lease_seconds
        self.lease: Lease | None = None
        self.writer: FencedWriter | None = None  # the holder's conditional writes (storage/fenced.py)
        self.state_write_s = 0.0  # time spent writing state.json and the step log (the run's summary)

    # -- sharded or not ------------------------------------------------------------------------------
    def recorded_shards(self) -> int | None:
        """N of a sharded warehouse (`_replicator/shards.json`), None for an unsharded one."""
        data = self.io.read(self.layout_path.path)
        if data is None:
            return None
        try:
            count = json.loads(data)["shards"]
        except (ValueError, KeyError, TypeError):
            raise StateError(f"{self.layout_path} is unreadable: expected {{\"shards\": N}}") from None
        if not isinstance(count, int) or count < 1:
            raise StateError(f"{self.layout_path} is unreadable: shards must be a positive integer, not {count!r}")
        return count

    def shard_warehouses(self) -> list[Warehouse]:
        """A sharded warehouse's shards, each with its own state, step log, dead letters and lease
        (for readers: status, tables, snapshots across shards); empty when unsharded."""
        count = self.recorded_shards()
        if count is None:
            return []
        return [Warehouse(self.root, lease_seconds=self.lease_seconds, shard=ShardSpec(i, count)) for i in range(count)]

    def check_layout(self) -> None:
        """Before a run takes its lease: refuse (ConfigError, exit 2) a run whose layout is not the
        warehouse's; a first sharded run records N (create-if-absent, so two first runs agree).
        Unsharded: one small read per run, nothing written."""
        recorded = self.recorded_shards()
        shard = self.shard
        if shard is None:
            if recorded is not None:
                raise ConfigError(f"warehouse {self.root} is sharded {recorded} ways ({self.layout_path.name}): "
                                  f"run each shard with --shard I/{recorded} (0 <= I < {recorded})")
            return
        if recorded is None:
            if (self.base / "_replicator" / "state.json").exists():
                raise ConfigError(f"warehouse {self.root} is unsharded (its progress is _replicator/state.json): "
                                  "run it without --shard, or shard a new warehouse")
            layout = json.dumps({"shards": shard.count}).encode()
            if self.io.create(self.layout_path.path, layout) is not None:
                return
            recorded = self.recorded_shards()  # another shard's first run recorded it first
        if recorded != shard.count:
            raise ConfigError(f"warehouse {self.root} is sharded {recorded} ways ({self.layout_path.name}), not "
                              f"{shard.count}: run each shard with --shard I/{recorded} (0 <= I < {recorded})")

    # -- one writer at a time ---------------------------------------------------------------------
    @contextmanager
    def locked(self, wait: bool = False, timeout: float | None = None) -> Iterator[None]:
        """Exclusive use of the warehouse for one run, across machines (the writer lease,
        storage/lease.py); a second run fails fast naming the holder (or waits)."""
        if self.on_object_store:
            require_conditional_writes(self.io, self.meta.path)
        what = f"warehouse {self.root}" if self.shard is None else f"shard {self.shard} of warehouse {self.root}"
        lease = Lease(self.io, self.lease_path.path, seconds=self.lease_seconds, what=what)
        lease.acquire(wait=wait, timeout=timeout)
        self.lease = lease
        self.writer = self.steps.writer = FencedWriter(self.io, lease)
        try:
            yield
        except Exception as exc:
            # Whatever failed once the lease was gone (a Spark job cancelled when it was lost, a
            # commit the JVM's fence refused) failed because of it: say so, exit 3.
            if not isinstance(exc, LeaseLostError) and lease.is_lost():
                try:
                    lease.check()
                except LeaseLostError as lost:
                    raise lost from exc
            raise
        finally:
            self.lease = None
            self.writer = self.steps.writer = None
            lease.release()

    @property
    def on_object_store(self) -> bool:
        """On S3 (s3a://, s3://): Delta commits go through the replicator's commit store there."""
        return scheme_of(self.root) in S3_SCHEMES

    def epoch(self) -> int:
        """The lease epoch this run writes under (storage/lease.py); 0 outside `locked()`."""
        return self.lease.epoch if self.lease is not None else 0

    def fence(self) -> None:
        """Before a commit: stop (LeaseLostError) unless this run still holds the lease. A no-op
        outside `locked()` (readers, tools)."""
        if self.lease is not None:
            self.lease.check()

    # -- state ---------------------------------------------------------------------------------
    def read_own(self, where: Location) -> bytes | None:
        """One of the run's own files (state.json, binlog.json) as it is now, None when absent;
        inside `locked()` the holder's read: its next write of the file is conditional on what it
        read (storage/fenced.py)."""
        if self.writer is None:
            return where.io.read(where.path)
        current = self.io.read_versioned(where.path)
        self.writer.seen(where.path, current.etag if current is not None else None)
        return current.data if current is not None else None

    def write_own(self, where: Location, data: bytes) -> None:
        """Atomic, durable replace of one of the run's own files (a crash leaves the old or the new
        one); fenced by the lease, and by the store itself: a stale holder's late write cannot land
        over this one's, and this one goes over a stale holder's only (storage/fenced.py)."""
        self.fence()
        if self.writer is None:
            self.io.write(where.path, data)
        else:
            self.writer.write(where.path, data)

    def load_state(self) -> State:
        data = self.read_own(self.state_path)
        return (read_state_file(self.state_path, State, STATE_FORMAT, data) if data is not None else None) or State()

    def save_state(self, state: State) -> None:
        """Replace state.json (`write_own`), stamped with this run's lease epoch."""
        self.fence()
        started = time.monotonic()
        state.updated_at = dt.datetime.now(dt.UTC).isoformat()
        state.epoch = self.epoch()
        self.write_own(self.state_path, state.model_dump_json(by_alias=True, indent=1).encode())
        self.state_write_s += time.monotonic() - started

    def log_step(self, record: dict[str, Any]) -> None:
        """Log an applied step (read back deduplicated by step number: a re-applied step wins)."""
        self.fence()
        started = time.monotonic()
        if self.lease is not None:
            record = {**record, "epoch": self.lease.epoch}
        self.steps.append(record)
        self.state_write_s += time.monotonic() - started

    def windows(self) -> list[dict[str, Any]]:
        return self.steps.records()

    def roll_step_log(self, keep: dt.timedelta | None = None, now: dt.datetime | None = None) -> int:
        """Fold the steps logged more than `keep` (default STEP_LOG_RETENTION) ago into one rollup
        record (storage/steplog.py); the number folded. The lease holder's job: a run every
        ROLL_EVERY_STEPS steps (engine/applier.py), `replicator maintain`."""
        self.fence()
        return self.steps.roll((now or dt.datetime.now(dt.UTC)) - (STEP_LOG_RETENTION if keep is None else keep))

    def new_table_path(self, schema: str, table: str, uid: str) -> str:
        return (self.base / "tables" / safe_segment(schema) / f"{safe_segment(table)}-{uid}").path

    def tables_bytes(self, enough: int) -> int:
        """Bytes of the files under the tables (superseded ones too), counted up to `enough`."""
        total = 0
        for _path, size in self.io.files((self.base / "tables").path):
            total += size
            if total >= enough:
                break
        return total
