"""The step log: one JSON record per applied step, appended, read back deduplicated by step number
(a step re-applied after a crash logs again; the last record of a step wins).

Where the store appends in place (a local directory) it is one file, `windows.jsonl`, as it always
was. An object store cannot append, and rewriting one growing object every step would cost more
with every step, so there the log is a directory of segments, `windows/<first step>.jsonl`, each
of at most SEGMENT_RECORDS records: a step rewrites only the last segment (one PUT, atomic), and
the writer keeps that segment in memory (it holds the warehouse's lease: nobody else writes it).
"""

from __future__ import annotations

import json
from typing import Any

from replicator.storage.fenced import FencedWriter
from replicator.storage.fileio import FileIO

SEGMENT_RECORDS = 256


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
