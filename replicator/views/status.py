"""A warehouse's status (`replicator status`): read-only, without Spark, safe while a run holds it.

Everything comes from small files through the store's `FileIO` (a local directory or an object
store alike): `_replicator/state.json` (applied watermark, catalog), the step log (the last
applied step), `_replicator/lease.json` (who holds the warehouse), each table's `_delta_log`
(version and row count, `replicator.delta.rowcount`) and the dead-letter table's log and, for the
totals by reason, the `error` column of its live data files. Nothing is written and the lease is
never taken: a running follower is not disturbed (state.json and lease.json are replaced
atomically, a torn last step-log line is skipped, a Delta commit that lands while its log is
read is simply not seen yet).
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from replicator.delta.rowcount import Inexact, LogSnapshot, file_counts, log_version, read_snapshot
from replicator.delta.shardview import Shard
from replicator.events import tso_physical_ms
from replicator.storage import Location
from replicator.storage.lease import Holder
from replicator.views.listing import list_tables
from replicator.warehouse import Warehouse

log = logging.getLogger("replicator.views.status")

_REASON = re.compile(r"^([A-Za-z_][A-Za-z0-9_.]*):")


def iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="milliseconds")


def watermark_age_s(tso: int, now: float) -> float:
    """Seconds from the TSO's physical time to `now` (epoch seconds)."""
    return round(now - tso_physical_ms(tso) / 1000, 3)


def dead_letter_reason(error: str | None) -> str:
    """The reason of a dead letter: the exception name its error text starts with
    ("DecodeError: ..." -> "DecodeError"), else "other"."""
    m = _REASON.match(error or "")
    return m[1] if m else "other"


def step_outcome(record: Mapping[str, Any]) -> str:
    """A logged step's outcome: every logged step was applied; its DDLs may have been skipped."""
    ddls = record.get("ddls") or ([record["ddl"]] if record.get("ddl") else [])
    skipped = sum(1 for d in ddls if str(d.get("outcome", "")).startswith("skipped"))
    if not skipped:
        return "applied"
    return f"applied, {skipped} of {len(ddls)} DDL{'s' if len(ddls) != 1 else ''} skipped (dead-lettered)"


def last_step_json(record: Mapping[str, Any] | None, now: float) -> dict[str, Any] | None:
    """The status's `last_step` object from the step log's last record."""
    if record is None:
        return None
    when = record.get("recorded_at")
    age: float | None = None
    if isinstance(when, str):
        try:
            age = round(now - dt.datetime.fromisoformat(when).timestamp(), 3)
        except ValueError:
            age = None
    out: dict[str, Any] = {"step": record.get("step"), "time": when, "age_s": age, "outcome": step_outcome(record),
                           "kind": record.get("kind", "window"), "applied_ts": record.get("applied_ts"),
                           "tables": len(record.get("tables") or {})}
    ddls = record.get("ddls") or ([record["ddl"]] if record.get("ddl") else [])
    if ddls:
        out["ddls"] = [{"query": d.get("query"), "outcome": d.get("outcome")} for d in ddls]
    return out


def holder_json(h: Holder) -> dict[str, Any]:
    return {"host": h.host, "pid": h.pid, "since": iso(h.since), "expires_at": iso(h.expires_at)}


def lease_view(holder: Holder | None, now: float) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(live holder, last holder): a holder whose lease is released, expired, or whose process is
    provably gone (same machine) holds nothing; it is then the last holder, with how it ended."""
    if holder is None:
        return None, None
    if holder.released:
        ended = "released"
    elif now > holder.expires_at:
        ended = "expired"
    elif holder.dead_here():
        ended = "process gone"
    else:
        return holder_json(holder), None
    return None, {**holder_json(holder), "ended": ended}


@dataclass
class TableStatus:
    schema: str
    table: str
    path: str
    source: str
    delta_version: int | None
    rows: int | None
    applied_ts: int | None
    # live data files and the small ones among them (under half compaction's default target), from
    # the log; shown on a terminal only: `--json` and the tab-separated form keep their shape
    files: int | None = None
    small_files: int | None = None
    compacted_at: float | None = None  # last compaction and VACUUM (ListedTable's): a terminal's too
    vacuumed_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"schema": self.schema, "table": self.table, "path": self.path, "delta_version": self.delta_version,
                "rows": self.rows, "applied_ts": self.applied_ts, "source": self.source}


@dataclass
class Status:
    warehouse: str
    applied_watermark: int | None
    applied_watermark_age_s: float | None
    last_step: dict[str, Any] | None
    holder: dict[str, Any] | None
    last_holder: dict[str, Any] | None
    dead_letters: dict[str, Any]
    tables: list[TableStatus] = field(default_factory=list)
    storage_sink: dict[str, Any] | None = None  # a storage-sink source: its checkpoint-ts now and the lag
    shards: list[dict[str, Any]] | None = None  # a sharded warehouse's: each shard's own (`shard_json`)

    def __post_init__(self) -> None:
        if self.storage_sink is not None and self.applied_watermark and self.storage_sink["checkpoint_ts"]:
            cp, wm = self.storage_sink["checkpoint_ts"], self.applied_watermark
            self.storage_sink["lag_s"] = max(0.0, (tso_physical_ms(cp) - tso_physical_ms(wm)) / 1000)

    def to_json(self) -> dict[str, Any]:
        wm = self.applied_watermark
        return {
            "warehouse": self.warehouse,
            "applied_watermark": wm,
            "applied_watermark_time": iso(tso_physical_ms(wm) / 1000) if wm else None,
            "applied_watermark_age_s": self.applied_watermark_age_s,
            "last_step": self.last_step,
            "holder": self.holder,
            "last_holder": self.last_holder,
            "dead_letters": self.dead_letters,
            "tables": [t.to_json() for t in self.tables],
        } | ({"storage_sink": self.storage_sink} if self.storage_sink is not None else {}) \
          | ({"shards": self.shards} if self.shards is not None else {})


def _snapshot(path: str) -> tuple[int | None, LogSnapshot | None]:
    """(version, snapshot or None when the log cannot give exact rows). A log replay that meets
    a concurrent log clean-up is tried once more."""
    for attempt in range(2):
        try:
            snap = read_snapshot(path)
            return (None, None) if snap is None else (snap.version, snap)
        except Inexact as exc:
            if attempt:
                log.info("no exact row count for %s from its log: %s", path, exc)
    return log_version(path), None


def _error_column(location: Location) -> list[str | None]:
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(location.read_bytes()), columns=["error"])
    return [None if v is None else str(v) for v in table.column("error").to_pylist()]


def dead_letter_counts(wh: Warehouse, *, by_reason_files: int = 200) -> dict[str, Any]:
    """{"total": n, "by_reason": {reason: n}} of the dead-letter table. `by_reason` reads the
    `error` column of its live files (it is None when that is not cheap or not exact: more than
    `by_reason_files` files, deletion vectors, paths outside the table); `total` is None only when
    the log cannot give an exact count."""
    path = wh.dead_letters_path
    _version, snap = _snapshot(path.path)
    if snap is None:
        if (path / "_delta_log").exists() and log_version(path.path) is not None:
            return {"total": None, "by_reason": None}
        return {"total": 0, "by_reason": {}}
    out: dict[str, Any] = {"total": snap.rows, "by_reason": None}
    keys = list(snap.live)
    if len(keys) > by_reason_files or any(dv for _, dv in keys):
        return out
    reasons: dict[str, int] = {}
    try:
        for rel, _dv in keys:
            name = unquote(rel)
            if "://" in name or name.startswith("/"):
                return out
            for error in _error_column(path / name):
                reason = dead_letter_reason(error)
                reasons[reason] = reasons.get(reason, 0) + 1
    except (OSError, ValueError, KeyError) as exc:  # a file vacuumed while read, an unexpected schema
        log.info("dead letters by reason unavailable: %s", exc)
        return out
    if sum(reasons.values()) != snap.rows:
        return out
    out["by_reason"] = dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


def warehouse_status(root: str, *, now: float | None = None) -> Status:
    """The status of the warehouse at `root`; ConfigError when it is no warehouse."""
    root, listed = list_tables(root)  # ConfigError for a directory that is no warehouse
    wh = Warehouse(root)
    now = time.time() if now is None else now
    tables: list[TableStatus] = []
    for t in listed:
        version, snap = _snapshot(t.path)
        tables.append(TableStatus(t.schema, t.table, t.path, t.source, version,
                                  snap.rows if snap is not None else None, t.applied_ts, *file_counts(t.path),
                                  compacted_at=t.compacted_at, vacuumed_at=t.vacuumed_at))
    if not wh.state_path.exists() and wh.recorded_shards() is not None:
        return sharded_status(wh, tables, now)
    state = wh.load_state() if wh.state_path.exists() else None
    last = wh.steps.last() if state is not None else None
    lease = wh.io.read(wh.lease_path.path)
    holder, last_holder = lease_view(Holder.from_json(lease) if lease is not None else None, now)
    watermark = state.applied_ts if state is not None else None
    return Status(
        warehouse=root,
        applied_watermark=watermark,
        applied_watermark_age_s=watermark_age_s(watermark, now) if watermark else None,
        last_step=last_step_json(last, now),
        holder=holder,
        last_holder=last_holder,
        dead_letters=dead_letter_counts(wh),
        tables=tables,
        storage_sink=storage_sink_view(state.source) if state is not None and state.source else None,
    )


def shard_json(shard: Shard, now: float) -> dict[str, Any]:
    """One shard of a sharded warehouse's status: its watermark and lag, last step, lease holder,
    dead letters and number of live tables."""
    wh, wm = shard.warehouse, shard.applied_ts or None
    lease = wh.io.read(wh.lease_path.path)
    holder, last_holder = lease_view(Holder.from_json(lease) if lease is not None else None, now)
    return {"shard": shard.label, "applied_watermark": wm,
            "applied_watermark_time": iso(tso_physical_ms(wm) / 1000) if wm else None,
            "applied_watermark_age_s": watermark_age_s(wm, now) if wm else None,
            "last_step": last_step_json(wh.steps.last() if shard.state.steps else None, now),
            "holder": holder, "last_holder": last_holder, "dead_letters": dead_letter_counts(wh),
            "tables": len(shard.state.live_tables())}


def sharded_status(wh: Warehouse, tables: list[TableStatus], now: float) -> Status:
    """A sharded warehouse's status: the consistent view's watermark (the smallest shard's), the
    latest step of any shard, the dead letters of all, every table, and `shards`, each shard's own.
    The warehouse has no one holder: each shard's is in `shards`."""
    from replicator.delta.shardview import ShardedView

    view = ShardedView.read(wh)
    assert view is not None
    shards = [shard_json(s, now) for s in view.shards]
    watermark = view.applied_ts or None
    steps = [s["last_step"] for s in shards if s["last_step"] is not None]
    dead = [s["dead_letters"] for s in shards]
    total = None if any(d["total"] is None for d in dead) else sum(d["total"] for d in dead)
    by_reason: dict[str, int] | None = {}
    for d in dead:
        if d["by_reason"] is None or by_reason is None:
            by_reason = None
            continue
        for reason, n in d["by_reason"].items():
            by_reason[reason] = by_reason.get(reason, 0) + n
    if by_reason is not None:
        by_reason = dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0])))
    sources = {s.state.source for s in view.shards if s.state.source}
    return Status(
        warehouse=wh.root,
        applied_watermark=watermark,
        applied_watermark_age_s=watermark_age_s(watermark, now) if watermark else None,
        last_step=max(steps, key=lambda st: str(st.get("time") or "")) if steps else None,
        holder=None,
        last_holder=None,
        dead_letters={"total": total, "by_reason": by_reason},
        tables=tables,
        storage_sink=storage_sink_view(sources.pop()) if len(sources) == 1 else None,
        shards=shards,
    )


def storage_sink_view(source: str) -> dict[str, Any] | None:
    """For a warehouse replicating TiCDC's storage sink (`storage:<url>`): the sink's `metadata`
    checkpoint-ts as it is now (null when it cannot be read); the lag is added by `Status`."""
    from replicator.codec.storage_sink.layout import METADATA, SOURCE_PREFIX, parse_metadata

    if not source.startswith(SOURCE_PREFIX):
        return None
    from replicator.errors import ReplicatorError
    from replicator.storage.stores import fileio_for

    url = source[len(SOURCE_PREFIX):]
    view: dict[str, Any] = {"url": url, "checkpoint_ts": None, "checkpoint_time": None, "lag_s": None}
    try:
        io = fileio_for(url)
        data = io.read(io.join(url, METADATA))
        if data is not None:
            cp = parse_metadata(data, io.join(url, METADATA))
            view.update(checkpoint_ts=cp, checkpoint_time=iso(tso_physical_ms(cp) / 1000))
    except (ReplicatorError, OSError) as exc:
        log.warning("cannot read the storage sink's checkpoint at %s: %s", url, exc)
    return view
