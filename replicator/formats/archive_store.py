"""Capture archives in an object store (``s3a://bucket/prefix``), which cannot append.

`StagedArchiveWriter` writes each archive file in a local staging directory exactly as
`ArchiveWriter` writes a directory, and puts it in the store as one whole object once it is
complete: when it rotates, and when the writer is closed (the session's last file simply ends,
as a local one does). The object is named as the file (``<prefix>/archive-NNNNNN.rcf``), so the
store holds the same bytes a local capture would have written. What is only staged is not
durable: `durable` says, per partition, the offset after the last record that is in the store,
and that is all a capture may acknowledge (commit to its consumer group). A crash loses only
staged records, which were never acknowledged and are captured again from Kafka.

Every object in the store is a complete, readable archive file at every moment, and the files
chain as in a directory:

* a file gets an object (its ``ArchiveStart`` alone, a valid file holding no records) before its
  first record is written, so the file after it never names a `previous` missing from the store;
* at a rotation the next file's first object is put *before* the completed file with its
  ``ArchiveChain``, so a Chain never names a missing object;
* a completed file then replaces its first object (conditional on its entity tag).

New objects are created only if absent and replaced only if unchanged since this writer put
them, so a second capture writing into the same prefix is detected instead of silently
overwriting. A session resumes after the objects already there: the last one is read whole and
checked; when it holds no record (its capture died before completing it) its sequence number is
taken again.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

from replicator import __version__
from replicator._proto import archive_pb2
from replicator.errors import DecodeError, StorageError
from replicator.formats.archive import (
    ARCHIVE_CHAIN_TAG,
    ARCHIVE_START_TAG,
    DEFAULT_ROTATE_BYTES,
    RECORD_TAG,
    ArchiveWriter,
    archive_file_name,
    archive_location,
    archive_sequence,
    list_archive_files,
)
from replicator.formats.framing import FrameReader
from replicator.storage import Location

log = logging.getLogger("replicator.formats.archive_store")


class StagedArchiveWriter:
    """`ArchiveWriter`'s interface for an object-store prefix (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        rotate_bytes: int = DEFAULT_ROTATE_BYTES,
        creator: str = f"replicator {__version__}",
    ) -> None:
        self.location = archive_location(url)
        self.io = self.location.io
        self.existing: list[Location] = list_archive_files(self.location)
        self.last_object: tuple[Location, bytes] | None = None  # the store's last object, as read to resume
        self.reused: str | None = None  # the name of an object without records taken over
        self._etags: dict[int, str] = {}  # sequence -> entity tag of the object this writer put there
        sequence, previous = self._resume_point()
        self.durable: dict[int, int] = {}  # partition -> offset after its last record in the store
        self.files: list[str] = []  # objects completed in this session, in order
        self.sizes: dict[str, int] = {}
        self._pending: dict[int, int] = {}  # partition -> offset after its last record in the staged file
        self._failed = False
        self.staging = Path(tempfile.mkdtemp(prefix="replicator-capture-"))
        try:
            self._local = ArchiveWriter(self.staging, rotate_bytes=rotate_bytes, creator=creator,
                                        continue_at=(sequence, previous), on_rotate=self._rotated)
        except BaseException:
            shutil.rmtree(self.staging, ignore_errors=True)
            raise

    # -- where to continue -------------------------------------------------------------------------
    def _resume_point(self) -> tuple[int, int]:
        """(sequence, previous) of this session's first file."""
        if not self.existing:
            return 1, 0
        last = self.existing[-1]
        seq = archive_sequence(last.name)
        assert seq is not None
        got = self.io.read_versioned(last.path)
        if got is None:
            raise StorageError(f"cannot resume: {last} was listed but cannot be read (removed meanwhile?)")
        self.last_object = (last, got.data)
        start, records, chained = _check_object(got.data, last.path)
        if records or chained:
            return seq + 1, seq
        # Only its ArchiveStart: a capture stopped before completing this file, which holds nothing.
        self.reused = last.name
        self._etags[seq] = got.etag
        log.info("%s holds no records (its capture stopped before completing it): taken over", last)
        return seq, start.previous

    # -- the store ---------------------------------------------------------------------------------
    def _url(self, sequence: int) -> str:
        return (self.location / archive_file_name(sequence)).path

    def _put(self, sequence: int, data: bytes) -> None:
        """Create the file's object, or replace the one this writer put there (conditional writes)."""
        url = self._url(sequence)
        etag = self._etags.get(sequence)
        try:
            new = self.io.create(url, data) if etag is None else self.io.replace(url, data, etag)
            if new is None:
                new = self._ours(url, data)
        except BaseException:
            self._failed = True
            raise
        self._etags[sequence] = new

    def _ours(self, url: str, data: bytes) -> str:
        """A refused conditional write: fine when the object already holds these bytes (a retried
        request that had landed), otherwise another writer is at this prefix."""
        got = self.io.read_versioned(url)
        if got is not None and got.data == data:
            return got.etag
        raise StorageError(f"{url} was written by someone else while this capture was writing {self.location}: "
                           "is another capture writing into the same prefix? Nothing more is written by this one")

    def _started(self) -> None:
        """Before the first record of the session's first file: the file's first object."""
        if self._local.sequence not in self._etags:
            self._put(self._local.sequence, self._local.path.read_bytes())

    def _rotated(self, completed: Path, new: Path) -> None:
        seq = archive_sequence(completed)
        assert seq is not None
        self._put(seq + 1, new.read_bytes())  # first: the object the Chain names
        self._complete(seq, completed)

    def _complete(self, sequence: int, path: Path) -> None:
        data = path.read_bytes()
        self._put(sequence, data)
        url = self._url(sequence)
        self.files.append(url)
        self.sizes[url] = len(data)
        for p, nxt in self._pending.items():
            self.durable[p] = max(self.durable.get(p, 0), nxt)
        self._pending.clear()
        path.unlink()

    # -- ArchiveWriter's interface -----------------------------------------------------------------
    @property
    def sequence(self) -> int:
        return self._local.sequence

    def write_record(self, *, topic: str, partition: int, offset: int, timestamp_ms: int, key: bytes | None,
                     value: bytes | None, protocol: str) -> tuple[str, int]:
        """Stage one record (the file is put in the store when it is complete); return the object it
        will be in and its frame's byte offset there."""
        if self._failed:
            raise StorageError(f"an earlier write to {self.location} failed: this capture writes nothing more")
        if self._local.records == 0 and self._local.sequence not in self._etags:
            self._started()
        _, at = self._local.write_record(topic=topic, partition=partition, offset=offset, timestamp_ms=timestamp_ms,
                                         key=key, value=value, protocol=protocol)
        self._pending[partition] = offset + 1
        return self._url(self._local.sequence), at

    def flush(self) -> None:
        """Nothing: a staged file is durable only once it is complete and in the store (`durable`)."""

    def close(self) -> None:
        """Complete the last file (no Chain: the archive ends there) and put it in the store; remove
        the staging directory. A file without records is not put (nothing to keep)."""
        try:
            if self._local.records and not self._failed:
                self._local.close()
                self._complete(self._local.sequence, self._local.path)
        finally:
            self._local.close()
            shutil.rmtree(self.staging, ignore_errors=True)

    def __enter__(self) -> StagedArchiveWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_object(data: bytes, where: str) -> tuple[archive_pb2.ArchiveStart, int, bool]:
    """An object of the store read whole: its ArchiveStart, its record count and whether it is
    chained; DecodeError if it is not a complete archive file (objects are put whole, so anything
    else is damage, not a capture killed mid-write)."""
    start: archive_pb2.ArchiveStart | None = None
    records = 0
    chained = False
    try:
        for frame in FrameReader(data, name=where):
            if start is None:
                if frame.tag != ARCHIVE_START_TAG:
                    raise DecodeError("does not start with an ArchiveStart frame", offset=frame.offset, where=where)
                start = archive_pb2.ArchiveStart()
                start.ParseFromString(frame.payload)
            elif frame.tag == RECORD_TAG:
                records += 1
            elif frame.tag == ARCHIVE_CHAIN_TAG:
                chained = True
    except DecodeError as exc:
        raise DecodeError(f"cannot resume: {exc.what} (objects are put whole: this one was damaged or written by "
                          "something else)", offset=exc.byte_offset, where=exc.where) from None
    if start is None:
        raise DecodeError("cannot resume: empty object, no ArchiveStart frame", offset=0, where=where)
    return start, records, chained
