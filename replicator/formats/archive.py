"""Framed capture archives of Kafka records (docs/framing.md#capture-archives): writer and reader.

Kafka keeps data for days; an archive keeps it as long as the files live, so a run can be
replayed, shipped as a reproducible case or made without any broker. The file format is the
seed's binary-log frame (``replicator.formats.framing``) applied to Kafka records: an ``ArchiveStart``
frame, one ``Record`` frame per Kafka record and, in a rotated file, a final ``ArchiveChain``
frame naming the next file's sequence number. See ``schemas/FRAMING.md``.

Files are named ``archive-NNNNNN.rcf`` (NNNNNN = sequence number, 6 digits or more) inside one
directory, or one key prefix of an object store (``s3a://bucket/prefix``): the readers take URLs
too, each object read whole through the store's `FileIO` (an archive file is at most about
``rotate_bytes``); the writer here writes local files only (objects: ``archive_store.py``).
The frame-by-frame inspector of these files is ``inspect.py``. This module only knows files and frames:
no Kafka or Spark import.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, overload

from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import Message

from replicator import __version__
from replicator._proto import archive_pb2
from replicator.errors import DecodeError, FrameError, TruncatedFrameError
from replicator.formats.framing import Frame, FrameReader, PathLike, encode_frame, fsync_dir, scan
from replicator.storage import Location, fileio_for, is_url

ARCHIVE_START_TAG = 0x11
ARCHIVE_CHAIN_TAG = 0x12
RECORD_TAG = 0x13
TAGS: dict[int, tuple[str, type[Message]]] = {
    ARCHIVE_START_TAG: ("ArchiveStart", archive_pb2.ArchiveStart),
    ARCHIVE_CHAIN_TAG: ("ArchiveChain", archive_pb2.ArchiveChain),
    RECORD_TAG: ("Record", archive_pb2.Record),
}
FORMAT_VERSION = 1
PROTOCOLS = ("open", "craft", "canal-json", "simple")
DEFAULT_ROTATE_BYTES = 256 << 20
FILE_PREFIX = "archive-"
FILE_SUFFIX = ".rcf"
_NAME_RE = re.compile(r"^archive-(\d{6,})\.rcf$")
_INT32_MAX = (1 << 31) - 1
_INT64_MAX = (1 << 63) - 1
_UINT32_MAX = (1 << 32) - 1

ArchiveFile = Path | Location
"""An archive file: a local path, or an object in a store (read whole through its `FileIO`)."""


def archive_file_name(sequence: int) -> str:
    """File name of the archive file with this sequence number (``archive-000001.rcf``)."""
    if not 1 <= sequence <= _UINT32_MAX:
        raise ValueError(f"archive sequence {sequence} outside 1..{_UINT32_MAX}")
    return f"{FILE_PREFIX}{sequence:06d}{FILE_SUFFIX}"


def archive_sequence(path: PathLike) -> int | None:
    """Sequence number encoded in an archive file name, None if the name is not one."""
    m = _NAME_RE.match(Path(path).name)
    return int(m.group(1)) if m else None


@overload
def list_archive_files(directory: Location) -> list[Location]: ...


@overload
def list_archive_files(directory: Path) -> list[Path]: ...


@overload
def list_archive_files(directory: PathLike) -> list[Path] | list[Location]: ...


def list_archive_files(directory: PathLike) -> list[Path] | list[Location]:
    """The archive files of a directory, or of an object-store prefix (a URL or a `Location`:
    the objects directly below it), in sequence order (other files are ignored)."""
    if isinstance(directory, Location) or is_url(directory):
        where = archive_location(directory)
        objects = sorted((seq, name) for name in where.io.children(where.path)
                         if (seq := archive_sequence(name)) is not None)
        return [where / name for _, name in objects]
    found: list[tuple[int, Path]] = []
    for entry in Path(directory).iterdir():
        seq = archive_sequence(entry)
        if seq is not None and entry.is_file():
            found.append((seq, entry))
    return [p for _, p in sorted(found)]


def archive_location(url: PathLike) -> Location:
    """An object-store URL (or a `Location`) as a `Location` in its store, without a trailing slash."""
    if isinstance(url, Location):
        return url
    text = os.fspath(url).rstrip("/")
    return Location(fileio_for(text), text)


def archive_path(path: PathLike) -> ArchiveFile:
    """A path as the readers take it: a `Location` for a URL, else a local `Path`."""
    if isinstance(path, Location) or is_url(path):
        return archive_location(path)
    return Path(path)


def frame_reader(path: ArchiveFile | PathLike, *, check_crc: bool = True) -> FrameReader:
    """The frames of one archive file: streamed from a local file, or from an object read whole
    (errors name the URL)."""
    if isinstance(path, Location) or is_url(path):
        where = archive_location(path)
        data = where.io.read(where.path)
        if data is None:
            raise DecodeError("archive file not found", where=where.path)
        return FrameReader(data, name=where.path, check_crc=check_crc)
    return FrameReader(path, check_crc=check_crc)


@dataclass(frozen=True, slots=True)
class ArchivedRecord:
    """A Kafka record read back from an archive, with where it was read so errors can name it."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    protocol: str
    file: str
    frame_offset: int

    def position(self) -> str:
        """Human position for error messages (``DecodeError.at``)."""
        return (
            f"topic {self.topic} partition {self.partition} offset {self.offset} "
            f"(archive {self.file} byte {self.frame_offset})"
        )


class ArchiveWriter:
    """Append Kafka records to rotating archive files in one directory.

    A new writer never appends to an existing file: it starts at the next sequence number, so
    a capture can resume in the same directory. The last file of an earlier session is checked
    first; a truncated tail (killed mid-write) raises ``TruncatedFrameError`` unless ``repair``
    is set, which cuts the partial frame off (it was never acknowledged as written).

    Rotation happens lazily, before the first record that would go into a file already at or
    over ``rotate_bytes``: the next file is created with its ``ArchiveStart`` and made durable
    *before* the ``ArchiveChain`` is appended to the old one, so a crash in between leaves a
    readable directory (the old file simply has no Chain) instead of a Chain naming a missing file.
    """

    def __init__(
        self,
        directory: PathLike,
        *,
        rotate_bytes: int = DEFAULT_ROTATE_BYTES,
        creator: str = f"replicator {__version__}",
        repair: bool = False,
        continue_at: tuple[int, int] | None = None,
        on_rotate: Callable[[Path, Path], None] | None = None,
    ) -> None:
        """``continue_at`` = (sequence, previous): start at this sequence number, its ``ArchiveStart``
        naming ``previous``, in a directory holding no archive files (a staging directory whose
        files are kept elsewhere). ``on_rotate(completed, new)`` runs after each rotation, once the
        completed file has its Chain and the new one its ``ArchiveStart``, both durable."""
        if rotate_bytes <= 0:
            raise ValueError(f"rotate_bytes must be positive, got {rotate_bytes}")
        self.directory = Path(directory)
        self.rotate_bytes = rotate_bytes
        self.creator = creator
        self.on_rotate = on_rotate
        self.directory.mkdir(parents=True, exist_ok=True)
        if continue_at is None:
            previous = self._check_previous_session(repair)
            sequence = previous + 1
        else:
            if list_archive_files(self.directory):
                raise ValueError(f"{self.directory} already holds archive files")
            sequence, previous = continue_at
        self._file: BinaryIO | None = None
        self._records = 0
        self._size = 0
        self.sequence = sequence
        self._file, self._size = self._create(self.sequence, previous)

    def _check_previous_session(self, repair: bool) -> int:
        """Validate the last existing file and return its sequence number (0 if none)."""
        existing = list_archive_files(self.directory)
        if not existing:
            return 0
        last = existing[-1]
        seq = archive_sequence(last)
        assert seq is not None
        result = scan(last)
        if result.truncated is not None or result.frames == 0:
            if not repair:
                err = result.truncated or TruncatedFrameError(
                    "empty archive file: no ArchiveStart frame (writer killed after creating it?)",
                    offset=0,
                    where=str(last),
                )
                err.what += "; resume with repair=True to cut the partial frame off"
                err.args = (str(err),)
                raise err
            if result.frames == 0:
                last.unlink()  # nothing complete in it: reuse its sequence number
                fsync_dir(self.directory)
                return seq - 1
            os.truncate(last, result.good_end)
        return seq

    @property
    def path(self) -> Path:
        """The file currently written to."""
        return self.directory / archive_file_name(self.sequence)

    def _create(self, sequence: int, previous: int) -> tuple[BinaryIO, int]:
        path = self.directory / archive_file_name(sequence)
        f = open(path, "xb")  # noqa: SIM115 - lives as long as the writer; "x": never clobber
        start = archive_pb2.ArchiveStart(
            format_version=FORMAT_VERSION,
            creator=self.creator,
            created_at_ns=time.time_ns(),
            sequence=sequence,
            previous=previous,
        )
        frame = encode_frame(ARCHIVE_START_TAG, start.SerializeToString())
        f.write(frame)
        f.flush()
        os.fsync(f.fileno())
        fsync_dir(self.directory)
        return f, len(frame)

    def write_record(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        protocol: str,
    ) -> tuple[Path, int]:
        """Append one Kafka record; return the file and byte offset of its frame.

        The record is buffered: call ``flush`` before acknowledging it anywhere (e.g. before
        committing Kafka offsets). The non-empty topic guarantees the 2-byte minimum of a frame.
        """
        if self._file is None:
            raise ValueError("archive writer is closed")
        if not topic:
            raise ValueError("topic must be non-empty")
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
        if not 0 <= partition <= _INT32_MAX:
            raise ValueError(f"partition {partition} outside 0..{_INT32_MAX}")
        if not 0 <= offset <= _INT64_MAX:
            raise ValueError(f"offset {offset} outside 0..{_INT64_MAX}")
        record = archive_pb2.Record(
            topic=topic,
            partition=partition,
            offset=offset,
            timestamp_ms=timestamp_ms,
            protocol=protocol,
        )
        if key is not None:
            record.key = key
        if value is not None:
            record.value = value
        frame = encode_frame(RECORD_TAG, record.SerializeToString())
        if self._size >= self.rotate_bytes:
            self._rotate()
        assert self._file is not None
        at = self._size
        self._file.write(frame)
        self._size += len(frame)
        self._records += 1
        return self.path, at

    def _rotate(self) -> None:
        old, old_seq = self._file, self.sequence
        assert old is not None
        new, new_size = self._create(old_seq + 1, old_seq)
        chain = archive_pb2.ArchiveChain(
            next=old_seq + 1, sequence=old_seq, created_at_ns=time.time_ns(), records=self._records
        )
        old.write(encode_frame(ARCHIVE_CHAIN_TAG, chain.SerializeToString()))
        old.flush()
        os.fsync(old.fileno())
        old.close()
        self._file, self._size, self._records = new, new_size, 0
        self.sequence = old_seq + 1
        if self.on_rotate is not None:
            self.on_rotate(self.directory / archive_file_name(old_seq), self.path)

    @property
    def records(self) -> int:
        """Records in the file currently written to."""
        return self._records

    def flush(self) -> None:
        """Make everything written so far durable (flush + fsync)."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Flush, fsync and close. The last file gets no Chain: the archive simply ends there."""
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _parse(msg_type: type[Message], frame: Frame, where: str) -> Any:
    msg = msg_type()
    try:
        msg.ParseFromString(frame.payload)
    except ProtobufDecodeError as e:
        raise FrameError(
            f"undecodable {msg_type.DESCRIPTOR.name} message ({e})", offset=frame.offset, where=where
        ) from None
    return msg


def archive_files(paths: PathLike | Iterable[PathLike]) -> list[ArchiveFile]:
    """Files and directories (or object-store prefixes) to the archive files they name, in order;
    DecodeError for a path that does not exist or a directory without archive files."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out: list[ArchiveFile] = []
    for p in paths:
        if isinstance(p, Location) or is_url(p):
            out.extend(_expand_url(archive_location(p)))
            continue
        path = Path(p)
        if path.is_dir():
            files = list_archive_files(path)
            if not files:
                raise DecodeError("no archive files (archive-NNNNNN.rcf) in directory", where=str(path))
            out.extend(files)
        elif path.exists():
            out.append(path)
        else:
            raise DecodeError("archive file not found", where=str(path))
    return out


def _expand_url(where: Location) -> list[Location]:
    files = list_archive_files(where)
    if files:
        return files
    if where.io.children(where.path):
        raise DecodeError("no archive files (archive-NNNNNN.rcf) under this prefix", where=where.path)
    if where.exists():
        return [where]
    raise DecodeError("archive file not found", where=where.path)


def _key(path: ArchiveFile) -> ArchiveFile:
    """What identifies a file among those read: the resolved local path, or the URL."""
    return path.resolve() if isinstance(path, Path) else path


def _same_directory(a: ArchiveFile, b: ArchiveFile) -> bool:
    if isinstance(a, Path) and isinstance(b, Path):
        return a.parent.resolve() == b.parent.resolve()
    return isinstance(a, Location) and isinstance(b, Location) and a.parent == b.parent


@dataclass(slots=True)
class _Read:
    path: ArchiveFile
    sequence: int
    chain: archive_pb2.ArchiveChain | None
    chain_offset: int


def read_archive(paths: PathLike | Iterable[PathLike]) -> Iterator[ArchivedRecord]:
    """Yield the records of archive files, directories (all files in sequence order), or both.

    Each file must start with an ``ArchiveStart`` of a known version; a file ending in
    ``ArchiveChain`` continues in the named file of the same directory, which is read next
    (an error if it is missing). Consecutive files of a directory must not leave a gap
    (``ArchiveStart.previous``). Records before a corrupt frame are yielded, then the error
    is raised with the file name and byte offset: nothing at or after it is ever yielded.
    """
    queue: deque[ArchiveFile] = deque(archive_files(paths))
    visited: set[ArchiveFile] = set()
    before: _Read | None = None
    while queue:
        path = queue.popleft()
        real = _key(path)
        if real in visited:
            continue
        visited.add(real)
        expected_seq = before.chain.next if before is not None and before.chain is not None else None
        current = yield from _read_file(path, before, expected_seq)
        before = current
        if current.chain is not None:
            nxt = path.parent / archive_file_name(current.chain.next)
            if queue and _key(queue[0]) == _key(nxt):
                continue
            if _key(nxt) in visited:
                raise DecodeError(
                    f"archive chains to {nxt.name}, which was already read (chain loop or files "
                    "given out of order)",
                    offset=current.chain_offset,
                    where=str(path),
                )
            if not nxt.exists():
                raise DecodeError(
                    f"archive chains to {nxt.name}, which is missing",
                    offset=current.chain_offset,
                    where=str(path),
                )
            queue.appendleft(nxt)


def _read_file(
    path: ArchiveFile, before: _Read | None, expected_seq: int | None
) -> Generator[ArchivedRecord, None, _Read]:
    """Yield one file's records; return what the next file is checked against (generator return)."""
    where = str(path)
    start: archive_pb2.ArchiveStart | None = None
    chain: archive_pb2.ArchiveChain | None = None
    chain_offset = 0
    records = 0
    for frame in frame_reader(path):
        if chain is not None:
            raise FrameError("frame after the ArchiveChain frame", offset=frame.offset, where=where)
        if start is None:
            if frame.tag != ARCHIVE_START_TAG:
                hint = " (a binary log? read it with `replicator binlog read`)" if frame.tag <= 0x05 else ""
                raise FrameError(
                    f"file does not start with an ArchiveStart frame (type tag {frame.tag:#04x}){hint}",
                    offset=frame.offset,
                    where=where,
                )
            start = _parse(archive_pb2.ArchiveStart, frame, where)
            _check_start(start, path, frame.offset, before, expected_seq)
        elif frame.tag == RECORD_TAG:
            rec = _parse(archive_pb2.Record, frame, where)
            records += 1
            yield ArchivedRecord(
                topic=rec.topic,
                partition=rec.partition,
                offset=rec.offset,
                timestamp_ms=rec.timestamp_ms,
                key=rec.key if rec.HasField("key") else None,
                value=rec.value if rec.HasField("value") else None,
                protocol=rec.protocol,
                file=where,
                frame_offset=frame.offset,
            )
        elif frame.tag == ARCHIVE_CHAIN_TAG:
            chain = _parse(archive_pb2.ArchiveChain, frame, where)
            chain_offset = frame.offset
            if chain.next <= start.sequence or chain.records != records:
                raise FrameError(
                    f"inconsistent ArchiveChain: next {chain.next} after sequence {start.sequence}, "
                    f"{chain.records} records announced, {records} read",
                    offset=frame.offset,
                    where=where,
                )
        elif frame.tag == ARCHIVE_START_TAG:
            raise FrameError("second ArchiveStart frame in one file", offset=frame.offset, where=where)
        else:
            raise FrameError(
                f"unknown archive frame type tag {frame.tag:#04x}", offset=frame.offset, where=where
            )
    if start is None:
        raise TruncatedFrameError(
            "empty archive file: no ArchiveStart frame (writer killed after creating it?)",
            offset=0,
            where=where,
        )
    return _Read(path, start.sequence, chain, chain_offset)


def _check_start(
    start: archive_pb2.ArchiveStart, path: ArchiveFile, offset: int, before: _Read | None, expected_seq: int | None
) -> None:
    where = str(path)
    if start.format_version != FORMAT_VERSION:
        raise FrameError(
            f"unsupported archive format version {start.format_version} (this build reads {FORMAT_VERSION})",
            offset=offset,
            where=where,
        )
    if expected_seq is not None and start.sequence != expected_seq:
        raise DecodeError(
            f"chained file has sequence {start.sequence}, the Chain in {before.path if before else '?'} "
            f"named {expected_seq}",
            offset=offset,
            where=where,
        )
    if (
        before is not None
        and start.previous != 0
        and _same_directory(before.path, path)
        and start.previous != before.sequence
    ):
        raise DecodeError(
            f"archive gap: this file continues sequence {start.previous}, but the file read before "
            f"it is {before.path.name} (sequence {before.sequence})",
            offset=offset,
            where=where,
        )
