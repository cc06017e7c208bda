"""The step log: one JSON record per applied step, appended, read back deduplicated by step number
(a step re-applied after a crash logs again; the last record of a step wins).

Where the store appends in place (a local directory) it is one file, `windows.jsonl`, as it always
was. An object store cannot append, and rewriting one growing object every step would cost more
with every step, so there the log is a directory of segments, `windows/<first step>.jsonl`, each
of at most SEGMENT_RECORDS records: a step rewrites only the last segment (one PUT, atomic), and
the writer keeps that segment in memory (it holds the warehouse's lease: nobody else writes it).

Bounded (`roll`): records older than a retention are folded into one `rollup` record that keeps
what the views need from them (each table's last Delta version, the last applied watermark, how
many steps were folded), so a follower's log holds a retention's worth of steps, not all of them.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from replicator.storage.fenced import FencedWriter
from replicator.storage.fileio import FileIO

SEGMENT_RECORDS = 256
ROLLUP = "rollup"  # the kind of the record that stands for the steps folded by `roll`


def recorded_at(record: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(record["recorded_at"])


def _after_rollup(records: Sequence[dict[str, Any]]) -> int:
    """The index of the last rollup record (0 when there is none)."""
    return max((i for i, r in enumerate(records) if r.get("kind") == ROLLUP), default=0)


def _new_steps(records: Sequence[dict[str, Any]]) -> int:
    """How many of `records` (in step order) no rollup among them stands for yet."""
    return sum(1 for r in records[_after_rollup(records):] if r.get("kind") != ROLLUP)


def fold(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One rollup record for `records` (in step order, an earlier rollup possibly first): the
    last one's step, watermark and time, each table's last version, and the first change's ts."""
    records = records[_after_rollup(records):]  # an earlier rollup stands for what precedes it
    last = records[-1]
    tables: dict[str, dict[str, int]] = {}
    for r in records:
        for uid, t in (r.get("tables") or {}).items():
            if "version" in t:
                tables[uid] = {"version": int(t["version"])}
    first = records[0]
    rolled = sum(int(r.get("rolled_steps", 1)) for r in records)
    out: dict[str, Any] = {"step": last["step"], "kind": ROLLUP, "hi": last["hi"], "tables": tables,
                           "recorded_at": last["recorded_at"], "rolled_steps": rolled,
                           "first_step": int(first.get("first_step", first["step"]))}
    if "applied_ts" in last:
        out["applied_ts"] = last["applied_ts"]
    if "lo" in first:
        out["lo"] = first["lo"]
    return out


class StepLog:
    def __init__(self, io: FileIO, meta: str) -> None:
        self.io = io
        self.file = io.join(meta, "windows.jsonl")
        self.segments = io.join(meta, "windows")
        self._segment: tuple[str, list[bytes]] | None = None  # (path, its lines): the writer's copy
        # The lease holder's conditional writes (storage/fenced.py): a stale holder's late PUT of a
        # segment cannot erase this holder's records. None outside a locked run.
        self.writer: FencedWriter | None = None

    @property
    def location(self) -> str:
        """Where the log is, for messages and docs."""
        return self.file if self.io.can_append else self.segments + "/"

    def append(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        if self.io.can_append:
            self.io.append(self.file, line)
            return
        path, lines = self._last_segment()
        if len(lines) >= SEGMENT_RECORDS:
            path, lines = self.io.join(self.segments, f"{int(record['step']):012d}.jsonl"), []
        lines.append(line)
        if self.writer is None:
            self.io.write(path, b"".join(lines))
        else:
            try:
                self.writer.write(path, b"".join(lines))
            except BaseException:
                self._segment = None  # read it back before the next write
                raise
        self._segment = (path, lines)

    def _last_segment(self) -> tuple[str, list[bytes]]:
        if self._segment is None:
            names = [n for n in self.io.children(self.segments) if n.endswith(".jsonl")]
            if names:
                path = self.io.join(self.segments, max(names))
                current = self.io.read_versioned(path)
                data = current.data if current is not None else b""
                if self.writer is not None:
                    self.writer.seen(path, current.etag if current is not None else None)
                self._segment = (path, [ln + b"\n" for ln in data.splitlines() if ln.strip()])
            else:
                self._segment = (self.io.join(self.segments, f"{0:012d}.jsonl"), [])
        return self._segment

    def records(self) -> list[dict[str, Any]]:
        """Every step's last record, in step order."""
        chunks: list[bytes] = []
        if self.io.can_append:
            chunks.append(self.io.read(self.file) or b"")
        else:
            for name in sorted(n for n in self.io.children(self.segments) if n.endswith(".jsonl")):
                chunks.append(self.io.read(self.io.join(self.segments, name)) or b"")
        by_step: dict[int, dict[str, Any]] = {}
        for chunk in chunks:
            for line in chunk.decode("utf-8").splitlines():
                if line.strip():
                    try:
                        rec = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a torn last line from a crash mid-append
                    by_step[int(rec["step"])] = rec
        return [by_step[k] for k in sorted(by_step)]

    def roll(self, before: dt.datetime) -> int:
        """Fold the records written before `before` into one rollup record, keeping the newest
        record (and, on an object store, the last segment) as they are; the number of steps
        folded. Only the lease holder calls it (a maintenance run, or the follower between steps).
        Crash-safe: the rollup is written before what it replaces is removed, and it carries the
        step number of the last record it folds, so reading both keeps one of each step."""
        if self.io.can_append:
            records = self.records()
            n = 0
            while n < len(records) - 1 and recorded_at(records[n]) < before:
                n += 1
            steps = _new_steps(records[:n])
            if steps:
                lines = [json.dumps(r, sort_keys=True) + "\n" for r in [fold(records[:n]), *records[n:]]]
                self.io.write(self.file, "".join(lines).encode())  # atomic (a rename where local)
            return steps
        names = sorted(n for n in self.io.children(self.segments) if n.endswith(".jsonl"))
        old: list[str] = []
        by_step: dict[int, dict[str, Any]] = {}  # read in name order: a rollup wins over what it folded
        for name in names[:-1]:  # the last segment is the writer's: never rolled
            recs = self._segment_records(name)
            if recs and recorded_at(recs[-1]) >= before:
                break
            old.append(name)
            by_step.update((int(r["step"]), r) for r in recs)
        folded = [by_step[k] for k in sorted(by_step)]
        steps = _new_steps(folded)
        if steps:
            rollup = fold(folded)
            path = self.io.join(self.segments, f"{int(rollup['step']):012d}.{ROLLUP}.jsonl")
            data = (json.dumps(rollup, sort_keys=True) + "\n").encode()
            if self.writer is None:
                self.io.write(path, data)
            else:
                self.writer.write(path, data)
        elif folded and folded[-1].get("kind") == ROLLUP:  # what a roll cut short left behind
            path = self.io.join(self.segments, f"{int(folded[-1]['step']):012d}.{ROLLUP}.jsonl")
        else:
            return 0
        self.io.remove_listed(self.segments, [p for p in (self.io.join(self.segments, n) for n in old) if p != path])
        return steps

    def _segment_records(self, name: str) -> list[dict[str, Any]]:
        data = self.io.read(self.io.join(self.segments, name)) or b""
        out = []
        for line in data.decode("utf-8").splitlines():
            try:
                rec = json.loads(line) if line.strip() else None
            except json.JSONDecodeError:
                continue  # a torn last line
            if isinstance(rec, dict) and "step" in rec:
                out.append(rec)
        return out

    def last(self) -> dict[str, Any] | None:
        """The last step's last record (None before the first step), reading only the log's last
        segment and parsing from its end: cheap for a reader beside a running writer."""
        if self.io.can_append:
            data = self.io.read(self.file) or b""
        else:
            names = [n for n in self.io.children(self.segments) if n.endswith(".jsonl")]
            data = (self.io.read(self.io.join(self.segments, max(names))) or b"") if names else b""
        for line in reversed(data.decode("utf-8", errors="replace").splitlines()):
            if line.strip():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line
                if isinstance(rec, dict) and "step" in rec:
                    return rec
        return None
