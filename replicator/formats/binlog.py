"""The seed's statement-based protobuf binary log (docs/framing.md#statement-binlog): writer, reader and printer.

Events (``schemas/binlog.proto``, package ``BinaryLog``) travel in the seed's transport frame
(``replicator.formats.framing``) with one type tag each. This is the file-format layer only: applying
the log to Delta is ``replicator`` engine business.

File naming: the log starts in the file given (default ``log.bin``, sequence 1); when it is
rotated, file number k >= 2 is ``<base>.NNNNNN`` (``log.bin.000002``, ...) in the same
directory, and the old file ends with a Chain event whose ``next`` is k. Every file starts with
a Start event. See ``schemas/FRAMING.md``.

Global Transaction ID = (server_id, trans_id), printed as ``# Global Id: (server_id,trans_id)``.
The seed's sample output shows ``(1,0)`` for events written with ``--trans 1``; we print the
trans_id actually stored, so the same commands print ``(1,1)`` here (the seed's writer evidently
did not store ``--trans``; our reading of the seed's text is that the GTID carries it).
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple, cast

from google.protobuf.message import DecodeError as ProtobufDecodeError
from google.protobuf.message import EncodeError, Message

from replicator import __version__
from replicator._proto import binlog_pb2
from replicator.errors import ConfigError, DecodeError, FrameError, TruncatedFrameError
from replicator.formats.framing import Frame, FrameReader, PathLike, encode_frame, fsync_dir, scan

START_TAG = 0x01
CHAIN_TAG = 0x02
QUERY_TAG = 0x03
COMMIT_TAG = 0x04
ROLLBACK_TAG = 0x05
TAGS: dict[int, tuple[str, type[Message]]] = {
    START_TAG: ("Start", binlog_pb2.Start),
    CHAIN_TAG: ("Chain", binlog_pb2.Chain),
    QUERY_TAG: ("Query", binlog_pb2.Query),
    COMMIT_TAG: ("Commit", binlog_pb2.Commit),
    ROLLBACK_TAG: ("Rollback", binlog_pb2.Rollback),
}
_TAG_OF: dict[type[Message], int] = {cls: tag for tag, (_, cls) in TAGS.items()}
DEFAULT_FILE = "log.bin"
DEFAULT_ROTATE_BYTES = 64 << 20
DEFAULT_SERVER_ID = 1


def _version_number(version: str) -> int:
    """MySQL-style numeric version (0.1.0 -> 100, 5.1.30 -> 50130) for Start.server_version."""
    parts = [int(p) if p.isdigit() else 0 for p in version.split(".")[:3]]
    parts += [0] * (3 - len(parts))
    return parts[0] * 10000 + parts[1] * 100 + parts[2]


SERVER_VERSION = _version_number(__version__)
SERVER_SIGNATURE = f"replicator {__version__}"
_VARIABLE_NAME = re.compile(r"^[A-Za-z0-9_.$]+$")
_SUFFIX = re.compile(r"^(.+)\.(\d{6,})$")


def binlog_file_name(base: PathLike, sequence: int) -> Path:
    """Path of file ``sequence`` of the log that starts at ``base`` (1 -> base, k -> base.00000k)."""
    if sequence < 1:
        raise ValueError(f"binlog sequence {sequence} must be >= 1")
    base = Path(base)
    return base if sequence == 1 else base.with_name(f"{base.name}.{sequence:06d}")


def split_binlog_name(path: PathLike) -> tuple[Path, int]:
    """Inverse of ``binlog_file_name``: ``log.bin.000003`` -> (``log.bin``, 3), ``log.bin`` -> (…, 1)."""
    path = Path(path)
    m = _SUFFIX.match(path.name)
    if m and int(m.group(2)) >= 2:
        return path.with_name(m.group(1)), int(m.group(2))
    return path, 1


def _existing_sequences(base: Path) -> list[int]:
    seqs = [1] if base.is_file() else []
    if base.parent.is_dir():
        for entry in base.parent.iterdir():
            m = _SUFFIX.match(entry.name)
            if m and m.group(1) == base.name and int(m.group(2)) >= 2 and entry.is_file():
                seqs.append(int(m.group(2)))
    return sorted(seqs)


class BinlogWriter:
    """Append framed events to a binary log, the way the seed's ``binlog_writer`` does.

    Opening finds the log's active file (highest sequence), verifies it (a truncated tail
    raises ``TruncatedFrameError`` unless ``repair`` cuts it off) and writes a Start event if
    the file is new. Every event is flushed to the OS; Commit, Rollback, rotation and close are
    fsynced, so a transaction is durable once its Commit call returns. One writer at a time.

    Rotation happens before an event that would go into a file at or over ``rotate_bytes``:
    the next file is created with its Start first, then the Chain is appended to the old file.
    A crash in between leaves the old file without its Chain; the next writer adds it.
    """

    def __init__(
        self,
        path: PathLike = DEFAULT_FILE,
        *,
        server_id: int = DEFAULT_SERVER_ID,
        rotate_bytes: int = DEFAULT_ROTATE_BYTES,
        server_version: int = SERVER_VERSION,
        server_signature: str = SERVER_SIGNATURE,
        repair: bool = False,
    ) -> None:
        if rotate_bytes <= 0:
            raise ValueError(f"rotate_bytes must be positive, got {rotate_bytes}")
        self.base, _ = split_binlog_name(path)
        self.server_id = server_id
        self.rotate_bytes = rotate_bytes
        self.server_version = server_version
        self.server_signature = server_signature
        seqs = _existing_sequences(self.base)
        self.sequence = seqs[-1] if seqs else 1
        self._file: BinaryIO | None = None
        self._size = 0
        self._open_active(repair)

    @property
    def path(self) -> Path:
        """The file currently appended to."""
        return binlog_file_name(self.base, self.sequence)

    def _open_active(self, repair: bool) -> None:
        path = self.path
        result = scan(path) if path.exists() else None
        if result is not None and result.truncated is not None:
            if not repair:
                err = result.truncated
                err.what += "; open the writer with repair=True to cut the partial frame off"
                err.args = (str(err),)
                raise err
            os.truncate(path, result.good_end)
        if result is None or result.first is None:  # new, empty, or nothing complete in it
            self._file, self._size = self._create(path)
            frames = 1
        else:
            if result.first.tag != START_TAG:
                raise FrameError(
                    f"binary log file does not start with a Start event (type tag {result.first.tag:#04x})",
                    offset=0,
                    where=str(path),
                )
            assert result.last is not None
            if result.last.tag == CHAIN_TAG:  # rotated already: continue in the file it names
                chain = _parse(binlog_pb2.Chain, result.last, str(path))
                self.sequence = chain.next
                nxt = self.path
                if nxt.exists() and nxt.stat().st_size > 0:
                    raise FrameError(
                        f"{path.name} chains to {nxt.name}, which exists but is not the newest file",
                        offset=result.last.offset,
                        where=str(path),
                    )
                self._file, self._size = self._create(nxt)
                return
            self._file = open(path, "ab")  # noqa: SIM115 - lives as long as the writer
            self._size = result.good_end
            frames = result.frames
        if self.sequence > 1 and frames == 1:
            self._ensure_chained(self.sequence - 1, repair)

    def _ensure_chained(self, prev_seq: int, repair: bool) -> None:
        """Finish a rotation interrupted between creating this file and chaining the previous one."""
        prev = binlog_file_name(self.base, prev_seq)
        if not prev.exists():
            return
        result = scan(prev)
        if result.truncated is not None:
            if not repair:
                raise result.truncated
            os.truncate(prev, result.good_end)
        if result.last is None or result.last.tag == CHAIN_TAG:
            return
        with open(prev, "ab") as f:
            f.write(self._frame(binlog_pb2.Chain(header=self._header(0), next=self.sequence)))
            f.flush()
            os.fsync(f.fileno())

    def _header(self, trans_id: int, server_id: int | None = None) -> binlog_pb2.Header:
        return binlog_pb2.Header(
            timestamp=time.time_ns(),
            server_id=self.server_id if server_id is None else server_id,
            trans_id=trans_id,
        )

    @staticmethod
    def _frame(msg: Message) -> bytes:
        try:
            payload = msg.SerializeToString()
        except EncodeError as e:  # a required field left unset: a bug in this module
            raise ValueError(f"cannot serialize {msg.DESCRIPTOR.name}: {e}") from e
        return encode_frame(_TAG_OF[type(msg)], payload)

    def _create(self, path: Path) -> tuple[BinaryIO, int]:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "wb")  # noqa: SIM115 - lives as long as the writer (an empty file is replaced)
        start = binlog_pb2.Start(
            header=self._header(0),
            server_version=self.server_version,
            server_signature=self.server_signature,
        )
        frame = self._frame(start)
        f.write(frame)
        f.flush()
        os.fsync(f.fileno())
        fsync_dir(path.parent)
        return f, len(frame)

    def _rotate(self) -> None:
        old = self._file
        assert old is not None
        old_seq = self.sequence
        self.sequence = old_seq + 1
        nxt = self.path
        if nxt.exists() and nxt.stat().st_size > 0:
            raise FrameError(
                f"cannot rotate: {nxt.name} already exists", offset=self._size, where=str(self.path)
            )
        new, new_size = self._create(nxt)
        old.write(self._frame(binlog_pb2.Chain(header=self._header(0), next=self.sequence)))
        old.flush()
        os.fsync(old.fileno())
        old.close()
        self._file, self._size = new, new_size

    def _write(self, msg: Message, *, sync: bool) -> tuple[Path, int]:
        if self._file is None:
            raise ValueError("binlog writer is closed")
        frame = self._frame(msg)
        if self._size >= self.rotate_bytes:
            self._rotate()
        assert self._file is not None
        at = self._size
        self._file.write(frame)
        self._file.flush()
        if sync:
            os.fsync(self._file.fileno())
        self._size += len(frame)
        return self.path, at

    def write_query(
        self,
        trans_id: int,
        query: str,
        variables: Mapping[str, str] | None = None,
        *,
        server_id: int | None = None,
        session_id: int = 0,
    ) -> tuple[Path, int]:
        """Append a Query event; variables are stored sorted by name. Returns (file, offset)."""
        if not query.strip():
            raise ValueError("empty query")
        for name in variables or {}:
            if not _VARIABLE_NAME.match(name):
                raise ValueError(f"invalid variable name {name!r} (letters, digits, _ . $)")
        msg = binlog_pb2.Query(
            header=self._header(trans_id, server_id),
            variable=[
                binlog_pb2.Query.Variable(name=k, value=v) for k, v in sorted((variables or {}).items())
            ],
            session_id=session_id,
            query=query,
        )
        return self._write(msg, sync=False)

    def write_commit(self, trans_id: int, *, server_id: int | None = None) -> tuple[Path, int]:
        """Append a Commit event (fsynced: the transaction is durable when this returns)."""
        return self._write(binlog_pb2.Commit(header=self._header(trans_id, server_id)), sync=True)

    def write_rollback(self, trans_id: int, *, server_id: int | None = None) -> tuple[Path, int]:
        """Append a Rollback event (fsynced)."""
        return self._write(binlog_pb2.Rollback(header=self._header(trans_id, server_id)), sync=True)

    def close(self) -> None:
        """Flush, fsync and close; no Chain is written (the log continues here next time)."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def __enter__(self) -> BinlogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BinlogEvent(NamedTuple):
    """One event read back, with its position (file, byte offset of its frame)."""

    offset: int
    type: str
    message: Any  # binlog_pb2.Start | Chain | Query | Commit | Rollback
    file: str

    @property
    def gtid(self) -> tuple[int, int]:
        """Global Transaction ID (server_id, trans_id)."""
        h = self.message.header
        return (h.server_id, h.trans_id)

    def position(self) -> str:
        """Human position for error messages."""
        return f"binlog {self.file} byte {self.offset}"


def _parse(msg_type: type[Message], frame: Frame, where: str) -> Any:
    msg = msg_type()
    try:
        msg.ParseFromString(frame.payload)
        # the upb runtime parses a proto2 message with required fields absent; the seed's
        # contract is that they are there, so check explicitly
        missing = [] if msg.IsInitialized() else list(cast(Any, msg).FindInitializationErrors())
    except ProtobufDecodeError as e:
        missing = [str(e)]
    if missing:
        raise FrameError(
            f"undecodable {msg_type.DESCRIPTOR.name} event (missing or bad: {', '.join(missing)})",
            offset=frame.offset,
            where=where,
        )
    return msg


def read_binlog(paths: PathLike | Iterable[PathLike] = (DEFAULT_FILE,)) -> Iterator[BinlogEvent]:
    """Yield every event (Start and Chain included) of the given files, following Chain events.

    A file ending in Chain(next=k) continues in file k of the same log (``binlog_file_name``),
    an error if it is missing. Each file must start with Start; nothing may follow a Chain.
    Events before a corrupt frame are yielded, then ``FrameError`` names file and offset.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    queue = deque(Path(p) for p in paths)
    visited: set[Path] = set()
    while queue:
        path = queue.popleft()
        if not path.exists():
            raise DecodeError("binary log file not found", where=str(path))
        real = path.resolve()
        if real in visited:
            continue
        visited.add(real)
        chain: BinlogEvent | None = None
        where = str(path)
        for frame in FrameReader(path):
            if chain is not None:
                raise FrameError("event after the Chain event", offset=frame.offset, where=where)
            if frame.tag not in TAGS:
                hint = " (a capture archive? use `replicator archive inspect`)" if frame.tag >= 0x11 else ""
                raise FrameError(
                    f"unknown binary log event type tag {frame.tag:#04x}{hint}",
                    offset=frame.offset,
                    where=where,
                )
            name, msg_type = TAGS[frame.tag]
            if (frame.offset == 0) != (frame.tag == START_TAG):
                what = (
                    "file does not start with a Start event" if frame.offset == 0 else "Start event mid-file"
                )
                raise FrameError(f"{what} (found {name})", offset=frame.offset, where=where)
            event = BinlogEvent(frame.offset, name, _parse(msg_type, frame, where), where)
            if frame.tag == CHAIN_TAG:
                chain = event
            yield event
        if chain is None:
            if path.stat().st_size == 0:
                raise TruncatedFrameError(
                    "empty binary log file: no Start event (writer killed after creating it?)",
                    offset=0,
                    where=where,
                )
            continue
        base, _ = split_binlog_name(path)
        nxt = binlog_file_name(base, chain.message.next)
        if queue and queue[0].resolve() == nxt.resolve():
            continue
        if nxt.resolve() in visited:
            raise DecodeError(
                f"Chain names {nxt.name}, which was already read", offset=chain.offset, where=where
            )
        if not nxt.exists():
            raise DecodeError(f"Chain names {nxt.name}, which is missing", offset=chain.offset, where=where)
        queue.appendleft(nxt)


def _quote(value: str) -> str:
    """MySQL string literal, one line: the printed log can be fed back to a MySQL client."""
    escaped = (
        value.replace("\\", "\\\\")
        .replace("'", "\\'")
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\0", "\\0")
        .replace("\x1a", "\\Z")
    )
    return f"'{escaped}'"


def format_event(msg: Message) -> str:
    """An event in the seed's ``binlog_reader`` shape (no trailing newline).

    Query prints its variables (sorted by name) as ``set @name = '...'`` and the statement;
    Commit and Rollback print ``COMMIT`` / ``ROLLBACK``; Start and Chain print a comment.
    """
    if not isinstance(
        msg, (binlog_pb2.Query, binlog_pb2.Commit, binlog_pb2.Rollback, binlog_pb2.Start, binlog_pb2.Chain)
    ):
        raise TypeError(f"not a binary log event: {type(msg).__name__}")
    header = msg.header
    lines = [
        f"# Global Id: ({header.server_id},{header.trans_id})",
        f"# Timestamp: {header.timestamp}",
    ]
    if isinstance(msg, binlog_pb2.Query):
        lines += [f"set @{v.name} = {_quote(v.value)}" for v in sorted(msg.variable, key=lambda v: v.name)]
        lines.append(msg.query)
    elif isinstance(msg, binlog_pb2.Commit):
        lines.append("COMMIT")
    elif isinstance(msg, binlog_pb2.Rollback):
        lines.append("ROLLBACK")
    elif isinstance(msg, binlog_pb2.Start):
        signature = _quote(msg.server_signature)
        lines.append(f"# Start: server_version {msg.server_version}, server_signature {signature}")
    else:
        lines.append(f"# Chain: continues in file sequence {msg.next}")
    return "\n".join(lines)


# --- plain entry points for the CLI (`replicator binlog write|read`) -----------------------


def parse_set(assignments: Iterable[str]) -> dict[str, str]:
    """``--set name=value`` flags to a dict; ConfigError on a malformed one or a duplicate."""
    out: dict[str, str] = {}
    for a in assignments:
        name, sep, value = a.partition("=")
        if not sep or not _VARIABLE_NAME.match(name):
            raise ConfigError(f"--set expects name=value with a name of letters, digits, _ . $: got {a!r}")
        if name in out:
            raise ConfigError(f"--set {name} given twice")
        out[name] = value
    return out
