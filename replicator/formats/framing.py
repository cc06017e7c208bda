"""The seed's transport frame: ``length | type tag (1 byte) | message | checksum``.

Protobuf has no way to tell message types apart in a stream, so every message of an archive
or binary log travels in a frame that carries its length, a one-byte type tag and a CRC-32.
The layout, the length encoding and the checksum choice are documented in
``schemas/FRAMING.md``; this module is the one implementation of it, shared by
``replicator.formats.archive`` and ``replicator.formats.binlog``.

Reading is streamed: frames are read one at a time from a buffered file, so a multi-GB file
never sits in memory. Errors name the file and the byte offset of the frame; a file that ends
inside a frame raises ``TruncatedFrameError`` (a writer killed mid-write) rather than the
generic ``FrameError`` (corruption).
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from replicator.errors import FrameError, TruncatedFrameError

MIN_LENGTH = 2
"""Smallest encodable message length: first bytes 0 and 1 announce a multi-byte length."""
MAX_LENGTH = (1 << 32) - 1
"""Largest accepted message length: our format allows the 2- and 4-byte forms only."""
CRC_SIZE = 4
_PREFIX_BYTES = {0: 2, 1: 4}  # first byte L -> 1 << (L + 1) little-endian length bytes follow
_CHUNK = 16 << 20  # bounded reads: a corrupt length must not make us allocate 4 GiB up front
_READ_BUFFER = 1 << 20

PathLike = str | os.PathLike[str]


def length_encode(n: int) -> bytes:
    """Encode a message length as the seed's ``length_encode`` does (canonical, shortest form).

    2..255 is a single byte; 256..65535 is ``00`` + 2 little-endian bytes; 65536..2^32-1 is
    ``01`` + 4 little-endian bytes. Raises ValueError outside 2..2^32-1.
    """
    if not MIN_LENGTH <= n <= MAX_LENGTH:
        raise ValueError(f"frame length {n} outside the encodable range {MIN_LENGTH}..{MAX_LENGTH}")
    if n < 256:
        return bytes((n,))
    if n < 65536:
        return b"\x00" + n.to_bytes(2, "little")
    return b"\x01" + n.to_bytes(4, "little")


def length_prefix_size(first_byte: int) -> int:
    """Total size of an encoded length given its first byte (1, 3 or 5)."""
    return 1 + _PREFIX_BYTES.get(first_byte, 0)


def length_decode(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode the length starting at ``buf[pos]``; return ``(length, position after it)``.

    Mirrors the seed's ``length_decode`` restricted to first bytes 0 and 1. A multi-byte form
    whose value has a shorter encoding (e.g. ``00 2A 00``, or anything below 2) is rejected:
    the encoder never writes it, so it can only come from corruption. Raises
    ``TruncatedFrameError`` if ``buf`` ends inside the length, ``FrameError`` if it is impossible.
    """
    if pos >= len(buf):
        raise TruncatedFrameError("file ends inside a frame length", offset=pos)
    first = buf[pos]
    if first >= MIN_LENGTH:
        return first, pos + 1
    count = _PREFIX_BYTES[first]
    end = pos + 1 + count
    if end > len(buf):
        raise TruncatedFrameError("file ends inside a frame length", offset=pos)
    n = int.from_bytes(buf[pos + 1 : end], "little")
    smallest = 256 if first == 0 else 65536
    if n < smallest:
        raise FrameError(
            f"impossible frame length {n} in the {count}-byte form (prefix {first:#04x}, "
            f"minimum {smallest}): corrupt length",
            offset=pos,
        )
    return n, end


def encode_frame(tag: int, payload: bytes) -> bytes:
    """Frame one serialized message: length, type tag, message, CRC-32 (IEEE, little-endian).

    The CRC covers the type tag and the message, so a flipped tag is detected as well.
    Raises ValueError for a tag outside 1..255 (0 is reserved: zero-filled regions must never
    look like a frame) or a message shorter than 2 bytes, which the seed's length encoding
    cannot express; every message we define is at least 2 bytes long when written by our writers.
    """
    if not 1 <= tag <= 255:
        raise ValueError(f"type tag {tag} outside 1..255")
    if len(payload) < MIN_LENGTH:
        raise ValueError(
            f"message of {len(payload)} byte(s) cannot be framed: the length encoding starts at "
            f"{MIN_LENGTH} (did the writer leave every field at its default?)"
        )
    body = bytes((tag,)) + payload
    return length_encode(len(payload)) + body + zlib.crc32(body).to_bytes(CRC_SIZE, "little")


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame as read from a file; ``offset`` is the byte offset of its first length byte."""

    offset: int
    tag: int
    payload: bytes
    size: int
    """Total bytes on disk: length prefix + tag + message + CRC."""
    crc_ok: bool = True

    @property
    def end(self) -> int:
        """Byte offset just past this frame, where the next one starts."""
        return self.offset + self.size


class FrameReader:
    """Iterate over the frames of a file (path), an open binary file, or an in-memory bytes.

    With ``check_crc`` (the default) a bad CRC raises ``FrameError``; without it the frame is
    yielded with ``crc_ok=False`` so ``inspect`` can show it and carry on (the length is still
    usable to find the next frame). Structural errors (impossible length, truncation) always
    raise since nothing after them can be located. ``start_offset`` resumes at a frame boundary.
    """

    def __init__(
        self,
        source: PathLike | BinaryIO | bytes | bytearray,
        *,
        name: str | None = None,
        check_crc: bool = True,
        start_offset: int = 0,
    ) -> None:
        self._source = source
        self._check_crc = check_crc
        self._start = start_offset
        if name is not None:
            self.name = name
        elif isinstance(source, (bytes, bytearray)):
            self.name = "<bytes>"
        elif isinstance(source, (str, os.PathLike)):
            self.name = os.fspath(source)
        else:
            self.name = str(getattr(source, "name", "<stream>"))

    def __iter__(self) -> Iterator[Frame]:
        source = self._source
        if isinstance(source, (bytes, bytearray)):
            stream = io.BytesIO(source)
            stream.seek(self._start)
            yield from self._frames(stream, self._start)
        elif isinstance(source, (str, os.PathLike)):
            with open(source, "rb", buffering=_READ_BUFFER) as f:
                f.seek(self._start)
                yield from self._frames(f, self._start)
        else:
            if self._start:
                source.seek(self._start)
                base = self._start
            else:
                try:
                    base = source.tell()
                except (OSError, io.UnsupportedOperation):
                    base = 0
            yield from self._frames(source, base)

    def _truncated(self, what: str, offset: int) -> TruncatedFrameError:
        return TruncatedFrameError(f"{what} (writer killed mid-write?)", offset=offset, where=self.name)

    def _frames(self, f: BinaryIO, offset: int) -> Iterator[Frame]:
        while True:
            first = f.read(1)
            if not first:
                return
            extra = _PREFIX_BYTES.get(first[0], 0)
            prefix = first + _read_exact(f, extra) if extra else first
            if len(prefix) < 1 + extra:
                raise self._truncated(
                    f"file ends inside the length of a frame ({len(prefix)} of {1 + extra} bytes)", offset
                )
            try:
                length, _ = length_decode(prefix)
            except FrameError as e:
                raise FrameError(e.what, offset=offset, where=self.name) from None
            want = 1 + length + CRC_SIZE
            block = _read_exact(f, want)
            if len(block) < want:
                raise self._truncated(
                    f"file ends inside a frame: {len(block)} of {want} bytes after the "
                    f"{len(prefix)}-byte length {length}",
                    offset,
                )
            body = memoryview(block)[: 1 + length]
            stored = int.from_bytes(block[1 + length :], "little")
            computed = zlib.crc32(body)
            crc_ok = stored == computed
            if not crc_ok and self._check_crc:
                raise FrameError(
                    f"bad CRC in frame with type tag {block[0]:#04x} and length {length}: "
                    f"stored {stored:#010x}, computed {computed:#010x}",
                    offset=offset,
                    where=self.name,
                )
            size = len(prefix) + want
            yield Frame(offset=offset, tag=block[0], payload=block[1 : 1 + length], size=size, crc_ok=crc_ok)
            offset += size


def _read_exact(f: BinaryIO, n: int) -> bytes:
    """Read up to ``n`` bytes, stopping short only at end of file; chunked so that a corrupt
    length near 4 GiB at the end of a small file costs at most one chunk of memory."""
    if n <= _CHUNK:
        data = f.read(n)
        if len(data) == n or not data:
            return data
        parts = [data]
        got = len(data)
    else:
        parts = []
        got = 0
    while got < n:
        chunk = f.read(min(_CHUNK, n - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


@dataclass(frozen=True, slots=True)
class ScanResult:
    """What a writer needs to know before appending to (or after) an existing file."""

    good_end: int
    """Byte offset just past the last complete frame (0 for an empty file)."""
    frames: int
    first: Frame | None
    last: Frame | None
    truncated: TruncatedFrameError | None
    """Set when the file ends inside a frame; bytes from ``good_end`` on are a partial frame."""


def scan(path: PathLike) -> ScanResult:
    """Walk all frames of ``path`` (CRC-checked) and report where the complete ones end.

    A truncated tail is returned, not raised, so writers can decide to refuse or repair;
    any other corruption raises ``FrameError``.
    """
    count = 0
    first: Frame | None = None
    last: Frame | None = None
    try:
        for frame in FrameReader(path):
            if first is None:
                first = frame
            last = frame
            count += 1
    except TruncatedFrameError as e:
        return ScanResult(last.end if last else 0, count, first, last, e)
    return ScanResult(last.end if last else 0, count, first, last, None)


def fsync_dir(path: PathLike) -> None:
    """Make a file creation durable: fsync the directory holding the new entry."""
    fd = os.open(os.fspath(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
