"""Capture archives as an engine source: the same windowing, exactly-once and dead-letter
behaviour as Kafka, because the engine cannot tell the difference ("one engine, a second source").

An archive is read twice. A first pass at construction checks every frame (CRC, lengths, chain)
and learns the topic, the protocol and each partition's offsets: the engine needs the complete
partition set before it reads anything (the global watermark is a minimum over partitions), and a
corrupt archive is refused before anything is applied, naming the file and byte offset. The
second pass streams records to the engine from the positions it asks for. The source's ``name``
is the archived topic, so a warehouse built from the topic can continue from an archive of it
(and the reverse) while a different topic is refused by the warehouse.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from replicator.errors import ConfigError, DecodeError, FrameError, KafkaSourceError, TruncatedFrameError
from replicator.events import TP, Record
from replicator.formats.archive import ArchivedRecord, ArchiveFile, archive_path, read_archive

log = logging.getLogger(__name__)

PathLike = str | os.PathLike[str]


@dataclass
class PartitionSpan:
    records: int = 0
    first: int = -1
    last: int = -1


@dataclass
class ArchiveScan:
    """What the first pass learned: topic, protocol, per-partition offsets, files."""

    topic: str = ""
    protocol: str = ""
    records: int = 0
    partitions: dict[int, PartitionSpan] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


def _corrupt(exc: DecodeError) -> DecodeError:
    """The reader's error with what it means for the run (same type, file and byte offset kept)."""
    if isinstance(exc, TruncatedFrameError):
        what = (f"{exc.what}: the archive ends in a partial frame (its capture was killed mid-write); "
                "nothing was applied - cut the partial frame off by resuming the capture into the same directory, "
                "or replicate the complete files only")
        return TruncatedFrameError(what, offset=exc.byte_offset, where=exc.where)
    what = f"corrupt archive: {exc.what}; nothing at or after this frame is applied"
    cls = FrameError if isinstance(exc, FrameError) else DecodeError
    return cls(what, offset=exc.byte_offset, where=exc.where)


def scan_archive(paths: PathLike | Iterable[PathLike]) -> ArchiveScan:
    """Validate every frame of the archive and summarise it; raises on corruption or mixed topics."""
    scan = ArchiveScan()
    try:
        for rec in read_archive(paths):
            if not scan.records:
                scan.topic, scan.protocol = rec.topic, rec.protocol
            elif rec.topic != scan.topic:
                raise ConfigError(
                    f"archive mixes topics {scan.topic!r} and {rec.topic!r} ({rec.file} byte {rec.frame_offset}); "
                    "replicate one topic per warehouse"
                )
            elif rec.protocol != scan.protocol:
                raise ConfigError(
                    f"archive mixes protocols {scan.protocol!r} and {rec.protocol!r} ({rec.file} byte "
                    f"{rec.frame_offset})"
                )
            scan.records += 1
            span = scan.partitions.get(rec.partition)
            if span is None:
                span = scan.partitions[rec.partition] = PartitionSpan(first=rec.offset)
            span.records += 1
            span.first = min(span.first, rec.offset)
            span.last = max(span.last, rec.offset)
            if not scan.files or scan.files[-1] != rec.file:
                scan.files.append(rec.file)
    except DecodeError as exc:
        raise _corrupt(exc) from None
    if not scan.records:
        raise ConfigError(f"archive {', '.join(map(str, _as_list(paths)))} holds no records")
    return scan


def _as_list(paths: PathLike | Iterable[PathLike]) -> list[PathLike]:
    return [paths] if isinstance(paths, str | os.PathLike) else list(paths)


class ArchiveSource:
    """``Source`` over archive files and/or directories (read in sequence order, following Chains),
    local or in an object store (URLs: each object is read whole, once per pass).

    Records before a partition's start position are skipped, and so is any record whose offset
    is not above the last one delivered for its partition: overlapping captures (a capture
    resumed from committed offsets re-reads a few records) are harmless.
    """

    def __init__(self, paths: PathLike | Iterable[PathLike], *, poll_max_records: int = 5000) -> None:
        self.paths: list[ArchiveFile] = [archive_path(p) for p in _as_list(paths)]  # URLs: objects in a store
        self.poll_max_records = poll_max_records
        self.scan = scan_archive(self.paths)
        self.name = self.scan.topic
        self.protocol = self.scan.protocol
        self._next: dict[int, int] = {}
        self._iter: Iterator[ArchivedRecord] | None = None
        self._done = False
        self._consumed = 0
        self.skipped = 0

    def partitions(self) -> list[TP]:
        return [TP(self.name, p) for p in sorted(self.scan.partitions)]

    def start(self, positions: Mapping[TP, int | None]) -> None:
        """Positions of other topics than the archived one are ignored (none can be read here)."""
        for tp, pos in positions.items():
            p = tp.partition
            if tp.topic != self.name:
                continue
            span = self.scan.partitions.get(p)
            if pos is not None and span is not None and pos < span.first:
                raise KafkaSourceError(
                    f"topic {self.name!r} partition {p}: the warehouse needs offset {pos} but the archive starts at "
                    f"offset {span.first}; records {pos}..{span.first - 1} are not in it (use an archive captured "
                    "earlier, or rebuild into a new warehouse)"
                )
            self._next[p] = -1 if pos is None else pos
        self._iter = read_archive(self.paths)
        self._done = False

    def poll(self) -> list[Record]:
        if self._iter is None:
            raise RuntimeError("ArchiveSource.poll() before start()")
        if self._done:
            time.sleep(0.2)  # a follower polling a finished archive must not spin
            return []
        out: list[Record] = []
        nxt = self._next
        try:
            while len(out) < self.poll_max_records:
                rec = next(self._iter, None)
                if rec is None:
                    self._done = True
                    break
                self._consumed += 1
                p = rec.partition
                expected = nxt.get(p)
                if expected is None or rec.offset < expected:
                    self.skipped += 1
                    continue
                nxt[p] = rec.offset + 1
                out.append(Record(rec.topic, p, rec.offset, rec.timestamp_ms, rec.key, rec.value))
        except DecodeError as exc:  # the archive changed since the first pass
            raise _corrupt(exc) from None
        return out

    def caught_up(self) -> bool:
        return self._done

    def commit(self, offsets: Mapping[TP, int]) -> None:
        """Nothing to publish: an archive has no consumer group (the warehouse state is the progress)."""

    def lag(self) -> int | None:
        return max(0, self.scan.records - self._consumed)

    def partition_lags(self, read_to: Mapping[TP, int] | None = None) -> dict[TP, int] | None:
        """An archive is read in its own order, not per partition: no per-partition lag."""
        return None

    def close(self) -> None:
        if self._iter is not None:
            close = getattr(self._iter, "close", None)
            if close is not None:
                close()
            self._iter = None
