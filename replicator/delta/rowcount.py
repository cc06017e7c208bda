"""The exact row count of a Delta table from its `_delta_log`, without Spark (`replicator tables`).

Why the log: `DESCRIBE DETAIL` gives files and bytes but no rows, and a `count()` needs Spark (a
driver JVM start of many seconds for a command that otherwise reads a few small files), while every
file Delta (Spark) writes carries `numRecords` in its add action's statistics. So the count is the
snapshot's live files replayed from the log: the latest complete checkpoint's add actions, then
every later commit's adds and removes in order, summing `numRecords` minus the rows each file's
deletion vector marks deleted (its `cardinality`). That is exact and reads one checkpoint file plus
fewer commits than the checkpoint interval (10 by default).

The same replay with each add action's `size` gives the bytes of the live data files
(`live_bytes`: how big a table is for `--rewrite-limit`, replicator/delta/schemachange.py).

When the log cannot give an exact answer (a file without `numRecords` in its statistics, a v2
checkpoint with sidecar files, a gap in the commits, a log that cannot be parsed) `count_rows`
raises `Inexact` and the caller counts with Spark; a path without a log gives None.

Pure reading: no Spark import; the files are read through the store's `FileIO` (any store).
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from replicator.storage import Location, as_location

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CLASSIC_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_PART_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_V2_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$")

FileKey = tuple[str, str]
"""A live file's identity in the snapshot: its path and its deletion vector's id ('' for none)."""


class Inexact(Exception):
    """The log cannot give an exact count (the caller counts another way)."""


def _dv_id(dv: Mapping[str, Any] | None) -> str:
    if not dv:
        return ""
    offset = dv.get("offset")
    return f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}" + (f"@{offset}" if offset is not None else "")


def file_rows(add: Mapping[str, Any]) -> int:
    """Live rows of one add action: `numRecords` of its statistics minus its deletion vector's
    cardinality; Inexact when the statistics do not hold `numRecords`."""
    stats: Any = add.get("stats")
    records: Any = None
    if isinstance(stats, str) and stats:
        try:
            records = json.loads(stats).get("numRecords")
        except (ValueError, AttributeError):
            records = None
    if records is None and isinstance(add.get("stats_parsed"), Mapping):
        records = add["stats_parsed"].get("numRecords")
    if not isinstance(records, int) or isinstance(records, bool):
        raise Inexact(f"no numRecords in the statistics of {add.get('path')}")
    dv = add.get("deletionVector")
    deleted = int(dv.get("cardinality") or 0) if isinstance(dv, Mapping) else 0
    return records - deleted


def file_bytes(add: Mapping[str, Any]) -> int:
    """Bytes of one add action's data file (`size`, required by the protocol)."""
    return int(add["size"])


def apply_actions(live: dict[FileKey, int], actions: Iterable[Mapping[str, Any]],
                  measure: Callable[[Mapping[str, Any]], int] = file_rows) -> None:
    """Apply one commit's actions to the live files (key -> `measure` of the add: rows by default)."""
    adds: list[Mapping[str, Any]] = []
    for action in actions:
        if rm := action.get("remove"):
            live.pop((str(rm["path"]), _dv_id(rm.get("deletionVector"))), None)
        elif add := action.get("add"):
            adds.append(add)
    for add in adds:  # a commit's removes and adds of one file (a new deletion vector) in any order
        live[(str(add["path"]), _dv_id(add.get("deletionVector")))] = measure(add)


def _latest_checkpoint(names: Iterable[str]) -> tuple[int, list[str]]:
    """(version, file names) of the latest complete classic or multi-part checkpoint; (-1, []) when
    there is none. Inexact when a v2 checkpoint (sidecars) is newer."""
    singles: dict[int, list[str]] = {}
    parts: dict[tuple[int, int], list[str]] = {}
    v2 = -1
    for name in names:
        if m := _CLASSIC_CHECKPOINT.match(name):
            singles[int(m[1])] = [name]
        elif m := _PART_CHECKPOINT.match(name):
            parts.setdefault((int(m[1]), int(m[3])), []).append(name)
        elif m := _V2_CHECKPOINT.match(name):
            v2 = max(v2, int(m[1]))
    complete = dict(singles)
    for (version, total), files in parts.items():
        if len(set(files)) == total and version not in complete:
            complete[version] = sorted(files)
    best = max(complete, default=-1)
    if v2 > best:
        raise Inexact(f"a v2 checkpoint at version {v2}")
    return best, complete.get(best, [])


def _checkpoint_live(log_dir: Location, files: list[str],
                     measure: Callable[[Mapping[str, Any]], int] = file_rows) -> dict[FileKey, int]:
    import pyarrow.parquet as pq

    live: dict[FileKey, int] = {}
    for name in files:
        data = io.BytesIO((log_dir / name).read_bytes())
        present = set(pq.read_schema(data).names)
        table = pq.read_table(data, columns=[c for c in ("add", "sidecar") if c in present])
        if "sidecar" in table.column_names and any(table.column("sidecar").to_pylist()):
            raise Inexact("a checkpoint with sidecar files")
        if "add" not in table.column_names:
            continue
        for add in table.column("add").to_pylist():
            if add:
                live[(str(add["path"]), _dv_id(add.get("deletionVector")))] = measure(add)
    return live


class LogSnapshot:
    """A table's latest version in its log and its live files (key -> live rows)."""

    def __init__(self, version: int, live: dict[FileKey, int]) -> None:
        self.version = version
        self.live = live

    @property
    def rows(self) -> int:
        return sum(self.live.values())


def last_checkpoint_version(log_dir: Location) -> int | None:
    """The version `_last_checkpoint` names (Delta's hint, written after its checkpoint); None when
    it is absent or unreadable (the log is then listed whole)."""
    data = log_dir.io.read((log_dir / "_last_checkpoint").path)
    if not data:
        return None
    try:
        version = json.loads(data.decode("utf-8"))["version"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    return version if isinstance(version, int) and not isinstance(version, bool) and version >= 0 else None


def log_names(log_dir: Location) -> list[str]:
    """The log's names from its latest checkpoint on (`_last_checkpoint`; all of them when it names
    none or its checkpoint is not there): a log keeps `delta.logRetentionDuration` of commits (30
    days, a commit every few seconds), and a store lists 1,000 names a request."""
    hint = last_checkpoint_version(log_dir)
    if hint is not None:
        names = log_dir.io.children_from(log_dir.path, f"{hint:020d}")
        try:
            there = _latest_checkpoint(names)[0] >= hint
        except Inexact:  # a v2 checkpoint from the hint on: the log's latest names (a replay says Inexact)
            there = True
        if there:
            return names
    return log_dir.io.children(log_dir.path)


def log_version(table_path: str | os.PathLike[str]) -> int | None:
    """The table's latest version from its `_delta_log` listing alone (the newest commit or
    checkpoint); None when the path holds no Delta table."""
    log_dir = as_location(table_path) / "_delta_log"
    versions = [int(m[1]) for n in log_names(log_dir)
                if (m := _COMMIT.match(n) or _CLASSIC_CHECKPOINT.match(n) or _PART_CHECKPOINT.match(n)
                    or _V2_CHECKPOINT.match(n))]
    return max(versions, default=None)


def _commits(names: Iterable[str]) -> list[int]:
    return sorted(int(m[1]) for n in names if (m := _COMMIT.match(n)))


def _replay(log_dir: Location, live: dict[FileKey, int], versions: list[int],
            measure: Callable[[Mapping[str, Any]], int]) -> None:
    for version in versions:
        # "\n" only: Delta writes U+2028 and the like raw inside strings (stats of text columns)
        lines = (log_dir / f"{version:020d}.json").read_text().split("\n")
        apply_actions(live, (json.loads(line) for line in lines if line.strip()), measure)


def read_snapshot(table_path: str | os.PathLike[str],
                  measure: Callable[[Mapping[str, Any]], int] = file_rows,
                  since: LogSnapshot | None = None) -> LogSnapshot | None:
    """The table's latest version and live files (key -> `measure` of its add action: live rows by
    default), from the log; None when the path holds no Delta table; Inexact when the log cannot
    say exactly (see the module doc). `since`: an earlier answer of this call with the same
    `measure`, brought up to date by the commits after it alone (it is not changed)."""
    log_dir = as_location(table_path) / "_delta_log"
    if since is not None:
        later = _commits(log_dir.io.children_from(log_dir.path, f"{since.version + 1:020d}"))
        if not later:
            return since
        if later == list(range(since.version + 1, since.version + 1 + len(later))):
            live = dict(since.live)
            try:
                _replay(log_dir, live, later, measure)
            except (ValueError, KeyError, TypeError, FileNotFoundError) as exc:
                raise Inexact(f"unreadable log {log_dir}: {exc}") from None
            return LogSnapshot(later[-1], live)
        # the commits after it are gone (the log's retention): read from the latest checkpoint
    names = log_names(log_dir)
    commits = _commits(names)
    start, checkpoint_files = _latest_checkpoint(names)
    if not commits and not checkpoint_files:
        return None
    try:
        after = [v for v in commits if v > start]
        if after != list(range(start + 1, start + 1 + len(after))):
            raise Inexact(f"a gap in the commits of {log_dir} after version {start}")
        live = _checkpoint_live(log_dir, checkpoint_files, measure) if checkpoint_files else {}
        _replay(log_dir, live, after, measure)
    except (ValueError, KeyError, TypeError, FileNotFoundError) as exc:
        raise Inexact(f"unreadable log {log_dir}: {exc}") from None
    return LogSnapshot(after[-1] if after else start, live)


def count_rows(table_path: str | os.PathLike[str]) -> int | None:
    """The table's exact row count at its latest version, from the log; None when the path holds
    no Delta table; Inexact when the log cannot say exactly (see the module doc)."""
    snapshot = read_snapshot(table_path)
    return None if snapshot is None else snapshot.rows


# Compaction's default target size (`replicator maintain`, a follower's compaction); a data file
# under half of it is small: what `replicator tables` and `status` count per table.
DEFAULT_TARGET_FILE_BYTES = 128 * 2**20


def file_counts(table_path: str | os.PathLike[str],
                small_bytes: int = DEFAULT_TARGET_FILE_BYTES // 2) -> tuple[int | None, int | None]:
    """(live data files, small ones among them) of the table's latest snapshot, from the log;
    (None, None) when the path holds no Delta table or its log cannot say exactly."""
    try:
        snapshot = read_snapshot(table_path, file_bytes)
    except Inexact:
        return None, None
    if snapshot is None:
        return None, None
    return len(snapshot.live), sum(1 for size in snapshot.live.values() if size < small_bytes)


def live_bytes(table_path: str | os.PathLike[str]) -> int | None:
    """Bytes of the data files of the table's latest snapshot (its live data; not the change-data
    files, the log or files only older versions use), from the log; None when the path holds no
    Delta table; Inexact when the log cannot say exactly (see the module doc)."""
    snapshot = read_snapshot(table_path, file_bytes)
    return None if snapshot is None else sum(snapshot.live.values())
