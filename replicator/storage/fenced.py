"""A lease holder's own files (state.json, step-log segments) written so that a stale holder
cannot overwrite them: each write is conditional on the entity tag this holder last wrote or read
(`If-Match`; `If-None-Match: *` for a file it has not seen), checked by the store itself.

A refused write (412) means someone wrote the file since. The holder reads what is there now and
compares fencing tokens, not clocks: every file a holder writes carries the epoch of its lease
(storage/lease.py; a JSON object's `epoch`, or the highest `epoch` of a JSON-lines file's
records). Written by an older epoch, it was a stale holder's late PUT: this holder's write goes
over it, conditional on the tag it just read (If-Match), so nothing newer can be replaced by it.
Written by the same or a newer epoch, a later holder has the warehouse: it stops without writing
more (LeaseLostError, exit 3). The file holding exactly the bytes being written is this very
write, landed by an attempt the client gave up on and retried: done. A stale holder's
write after this holder's is refused by the store: its tag is outdated.
"""

from __future__ import annotations

import json
import logging
import uuid

from replicator.errors import ConfigError, LeaseLostError
from replicator.storage.fileio import FileIO
from replicator.storage.lease import Lease
from replicator.storage.options import CONDITIONAL_ENV, storage_options

log = logging.getLogger("replicator")


def file_epoch(data: bytes) -> int:
    """The epoch a replicator file was written under: a JSON object's `epoch`, or the highest of a
    JSON-lines file's records' (0 when none says: a file of a release without epochs)."""
    try:
        whole = json.loads(data)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        return int(whole.get("epoch", 0) or 0)
    best = 0
    for line in data.splitlines():
        try:
            rec = json.loads(line) if line.strip() else None
        except ValueError:
            continue  # a torn last line
        if isinstance(rec, dict):
            best = max(best, int(rec.get("epoch", 0) or 0))
    return best


class FencedWriter:
    """Conditional writes of one lease holder (see module doc)."""

    def __init__(self, io: FileIO, lease: Lease) -> None:
        self.io = io
        self.lease = lease
        self._etags: dict[str, str | None] = {}
        self.refusals = 0  # writes the store refused (each followed by a look at the lease)

    def seen(self, path: str, etag: str | None) -> None:
        """This holder read `path` at `etag` (None: absent): its next write is conditional on it."""
        self._etags[path] = etag

    def knows(self, path: str) -> bool:
        return path in self._etags

    def write(self, path: str, data: bytes) -> None:
        """Replace `path` with `data` if nobody but this holder wrote it since it last saw it."""
        self.lease.check()
        if path not in self._etags:
            current = self.io.read_versioned(path)
            self._etags[path] = current.etag if current is not None else None
        for _ in range(3):
            etag = self._etags[path]
            new = self.io.create(path, data) if etag is None else self.io.replace(path, data, etag)
            if new is not None:
                self._etags[path] = new
                return
            self.refusals += 1
            current = self.io.read_versioned(path)
            if current is not None and current.data == data:
                # This very write landed (a timed-out attempt the client retried, which the store
                # then refused): byte for byte ours, epoch and all. Nothing to write over.
                self._etags[path] = current.etag
                return
            theirs = file_epoch(current.data) if current is not None else 0
            if current is not None and theirs >= self.lease.epoch:
                raise LeaseLostError(
                    f"this run no longer holds {self.lease.what}: {path} was written under lease epoch {theirs}, "
                    f"this run's is {self.lease.epoch}; it stops without writing more (the run that holds it "
                    "now continues; nothing is lost)")
            log.warning("%s was written by a replicator run of an older lease epoch (%d < %d); writing over it",
                        path, theirs, self.lease.epoch, extra={"lease": "stale write overwritten"})
            self._etags[path] = current.etag if current is not None else None
        raise LeaseLostError(f"{path} keeps changing under this run although it holds {self.lease.what}; "
                             "it stops without writing more")


# Per probed directory: why its store cannot fence a stale writer, or None when it can.
_honoured: dict[str, str | None] = {}


def _probe(io: FileIO, probe: str) -> str | None:
    """What the store got wrong of the conditional PUTs the lease and the progress rely on, or None."""
    first = io.create(probe, b"1")
    if first is None:
        return "a PUT with If-None-Match: * of a new scratch object was refused"
    if io.create(probe, b"2") is not None:
        return "a second PUT with If-None-Match: * succeeded"
    second = io.replace(probe, b"3", first)
    if second is None:
        return "a PUT with If-Match: <the current ETag> was refused"
    if second == first:
        return "an overwrite with other bytes kept the same ETag"
    if io.replace(probe, b"4", first) is not None:
        return "a PUT with If-Match: <an outdated ETag> succeeded"
    return None


def conditional_write_failure(io: FileIO, directory: str) -> str | None:
    """Why the store would let a stale writer overwrite the lease or the progress (None: it would
    not): it must refuse a second create-if-absent (`If-None-Match: *`) and a replace conditioned
    on an outdated ETag (`If-Match`). Probed once per process and directory with a scratch object,
    removed again."""
    if directory not in _honoured:
        probe = io.join(directory, f".conditional-write-probe-{uuid.uuid4().hex[:12]}")
        try:
            _honoured[directory] = _probe(io, probe)
        finally:
            io.remove(probe)
    return _honoured[directory]


def honours_conditional_writes(io: FileIO, directory: str) -> bool:
    """Whether the store honours `If-None-Match: *` and `If-Match` (see conditional_write_failure)."""
    return conditional_write_failure(io, directory) is None


def require_conditional_writes(io: FileIO, directory: str) -> None:
    """Refuse a store that ignores conditional PUTs, unless the user said one writer is ensured."""
    if not storage_options().conditional_writes:
        return
    failure = conditional_write_failure(io, directory)
    if failure is not None:
        raise ConfigError(
            f"{io.describe()} ignores conditional writes ({failure}): a stale replicator run could overwrite "
            "Delta commits and progress there; use a store that honours them (S3, S3Proxy 4 or later, most "
            "S3-compatible stores), or, if one writer per warehouse is ensured otherwise, pass "
            f"--s3-conditional-writes false ({CONDITIONAL_ENV}=false)")
