"""`replicator capture`: archive a topic's records into rotating framed files.

Why: Kafka keeps data for days; an archive keeps it as long as its files live, so a warehouse can
be rebuilt or replayed past retention, and a reproducible case can be shipped as files.

Every partition is assigned (no group rebalancing). Where to start, per partition: explicit
``--from-offsets``, else ``--from-earliest``, else the archive directory's own resume point (the
offset after the last archived record), else the consumer group's committed offset, else the
earliest retained offset. Records are written as they arrive and the archive is flushed (fsync)
before consumer-group offsets are committed, so a committed offset never covers a record that is
not durably archived. ``--until-caught-up`` stops at the end offsets seen at start; otherwise the
capture follows the topic until SIGINT/SIGTERM, then flushes, commits and prints its summary.
A capture killed mid-write leaves a partial final frame: the next capture into the same
directory cuts it off (it was never acknowledged) and re-captures that record.

``--out`` may be an object-store URL (``s3a://bucket/prefix``): files are staged locally and each is
put in the store as one object once complete (at rotation and at the end of the session;
``formats/archive_store.py``), and only records in the store are acknowledged: the group's offsets
and the resume points both come from what the store holds, so a capture killed before an upload
loses nothing (those records are captured again).
"""

from __future__ import annotations

import logging
import posixpath
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from replicator import __version__
from replicator._proto import archive_pb2
from replicator.errors import ConfigError, DecodeError
from replicator.events import TP
from replicator.formats.archive import (
    DEFAULT_ROTATE_BYTES,
    RECORD_TAG,
    ArchiveFile,
    ArchiveWriter,
    archive_file_name,
    frame_reader,
    list_archive_files,
)
from replicator.formats.archive_store import StagedArchiveWriter
from replicator.formats.framing import FrameReader, fsync_dir, scan
from replicator.sources.kafka import CAPTURE_HINTS, KafkaSettings, KafkaSource
from replicator.storage import is_url

log = logging.getLogger("replicator.sources.capture")

OPEN_KEY_PREFIX = b"\x00" * 7 + b"\x01"  # Open Protocol keys start with the 8-byte batch version 1


@dataclass
class CaptureOptions:
    bootstrap_servers: str
    topic: str
    out: Path | str  # a directory, or an object-store URL (s3a://bucket/prefix)
    protocol: str | None = None  # None: detected from the first record
    start: Literal["resume", "earliest"] | Mapping[int, int] = "resume"
    until_caught_up: bool = False
    rotate_bytes: int = DEFAULT_ROTATE_BYTES
    group_id: str | None = None
    security: Mapping[str, Any] | None = None
    flush_interval_s: float = 2.0
    flush_records: int = 50_000
    retry_budget_s: float = 120.0


@dataclass
class PartitionCapture:
    start: int
    records: int = 0
    first: int = -1
    last: int = -1
    origin: str = ""  # where the start offset came from


@dataclass
class CaptureSummary:
    topic: str
    out: Path | str
    protocol: str | None
    partitions: dict[int, PartitionCapture] = field(default_factory=dict)
    files: list[Path] | list[str] = field(default_factory=list)  # local files, or the objects put (URLs)
    file_sizes: dict[str, int] = field(default_factory=dict)  # of the objects put
    elapsed_s: float = 0.0
    stopped: str = "caught up"
    repaired: str | None = None

    @property
    def records(self) -> int:
        return sum(p.records for p in self.partitions.values())

    def render(self) -> str:
        lines = [f"captured {self.records} records of topic {self.topic!r} ({self.protocol or 'no records'}) into "
                 f"{self.out} in {self.elapsed_s:.1f}s ({self.stopped})"]
        if self.repaired:
            lines.append(f"  repaired: {self.repaired}")
        for p, pc in sorted(self.partitions.items()):
            if pc.records:
                lines.append(f"  partition {p}: {pc.records} records, offsets {pc.first}..{pc.last} "
                             f"(started at {pc.start}: {pc.origin})")
            else:
                lines.append(f"  partition {p}: no new records (at offset {pc.start}: {pc.origin})")
        lines.append(f"  files ({len(self.files)}):")
        for f in self.files:
            if isinstance(f, Path):
                name, size = f.name, f.stat().st_size if f.exists() else 0
            else:
                name, size = posixpath.basename(f), self.file_sizes.get(f, 0)
            lines.append(f"    {name}  {size / 1e6:.2f} MB")
        return "\n".join(lines)


def detect_protocol(key: bytes | None) -> str:
    """Open Protocol keys carry the batch version; Craft keys are empty."""
    return "open" if key is not None and key[:8] == OPEN_KEY_PREFIX else "craft"


def archive_resume_points(directory: Path | str, topic: str, partitions: set[int], *,
                          files: Sequence[ArchiveFile] | None = None,
                          read: Mapping[ArchiveFile, bytes] | None = None) -> tuple[dict[int, int], str | None]:
    """Offset after the last archived record per partition (newest files first, stopping once every
    partition is found), and the archived protocol. Refuses a directory archiving another topic.
    `files`: the directory's archive files when already listed; `read`: files already read whole."""
    found: dict[int, int] = {}
    protocol: str | None = None
    known = read or {}
    for path in reversed(files if files is not None else list_archive_files(directory)):
        try:
            frames = FrameReader(known[path], name=str(path)) if path in known else frame_reader(path)
            for frame in frames:
                if frame.tag != RECORD_TAG:
                    continue
                rec = archive_pb2.Record()
                rec.ParseFromString(frame.payload)
                if rec.topic != topic:
                    raise ConfigError(f"{directory} archives topic {rec.topic!r}, not {topic!r}: capture into "
                                      "another directory")
                protocol = protocol or rec.protocol
                if rec.offset + 1 > found.get(rec.partition, -1):
                    found[rec.partition] = rec.offset + 1
        except DecodeError as exc:
            raise DecodeError(f"cannot resume: {exc.what}", offset=exc.byte_offset, where=exc.where) from None
        if partitions <= set(found):
            break
    return found, protocol


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        log.info("received %s: finishing the current batch", signal.Signals(signum).name)
        stop.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class Capture:
    """One capture session of one topic into one archive directory.

    Kafka is read through `KafkaSource`, as `run` reads it: the same outage probing, bounded
    broker calls and retry budget (`CaptureOptions.retry_budget_s`), and a lost offset stops the
    capture instead of leaving a silent gap in the archive.
    """

    # Larger fetches than the engine's: capture has no watermark to keep partitions level.
    MAX_PARTITION_FETCH_BYTES = 16 * 1024 * 1024

    def __init__(self, options: CaptureOptions) -> None:
        self.options = options
        self.stop = threading.Event()

    def _source(self) -> KafkaSource:
        o = self.options
        return KafkaSource(KafkaSettings(
            bootstrap_servers=o.bootstrap_servers, topic=o.topic, group_id=o.group_id, security=o.security,
            retry_budget_s=o.retry_budget_s, max_partition_fetch_bytes=self.MAX_PARTITION_FETCH_BYTES,
        ), hints=CAPTURE_HINTS)

    def run(self) -> CaptureSummary:
        o = self.options
        started = time.monotonic()
        summary = CaptureSummary(o.topic, o.out, o.protocol)
        source = self._source()
        try:
            topic = o.topic
            parts = [tp.partition for tp in source.partitions()]  # one topic: capture keys by partition
            if isinstance(o.start, Mapping) and set(o.start) - set(parts):
                raise ConfigError(f"--from-offsets names partitions {sorted(set(o.start) - set(parts))} that topic "
                                  f"{o.topic!r} does not have")
            writer: ArchiveWriter | StagedArchiveWriter
            if isinstance(o.out, str) and is_url(o.out):
                writer = StagedArchiveWriter(o.out, rotate_bytes=o.rotate_bytes,
                                             creator=f"replicator {__version__} capture")
                existing = bool(writer.existing)
                if writer.reused:
                    summary.repaired = (f"{writer.reused} held no records (a capture stopped before completing it); "
                                        "this session writes it")
            else:
                out = Path(o.out)
                existing = out.exists() and bool(list_archive_files(out))
                writer = self._local_writer(out, summary, existing)
            first_seq = writer.sequence
            try:
                resume, archived_protocol = self._resume_points(writer, set(parts)) if existing else ({}, None)
                if summary.protocol is None:
                    summary.protocol = archived_protocol
                elif archived_protocol is not None and archived_protocol != summary.protocol:
                    raise ConfigError(f"{o.out} archives {archived_protocol} records, not {summary.protocol}")
                tps = [TP(topic, p) for p in parts]
                begin = {tp.partition: off for tp, off in source.earliest_offsets(tps).items()}
                committed = ({tp.partition: off for tp, off in source.committed_offsets(tps).items()}
                             if o.group_id else {})
                for p in parts:
                    pos, origin = self._start_for(p, resume, committed, begin[p])
                    if pos < begin[p]:
                        log.warning("partition %d: offsets %d..%d are gone (retention); starting at %d",
                                    p, pos, begin[p] - 1, begin[p])
                        pos, origin = begin[p], origin + ", moved to the earliest retained offset"
                    summary.partitions[p] = PartitionCapture(start=pos, origin=origin)
                source.start({TP(topic, p): pc.start for p, pc in summary.partitions.items()})
                with _stop_on_signals(self.stop):
                    self._loop(source, writer, summary)
            finally:
                writer.close()
                if isinstance(writer, StagedArchiveWriter):
                    summary.files, summary.file_sizes = list(writer.files), dict(writer.sizes)
                else:
                    local = [writer.directory / archive_file_name(s) for s in range(first_seq, writer.sequence + 1)]
                    summary.files = local
                    if not summary.records and writer.sequence == first_seq:
                        # Nothing new (e.g. a scheduled capture): leave no empty file; the next session
                        # takes this sequence number again.
                        local[0].unlink(missing_ok=True)
                        fsync_dir(writer.directory)
                        summary.files = []
            self._commit(source, summary, writer)
        finally:
            source.close()
        summary.elapsed_s = time.monotonic() - started
        return summary

    def _local_writer(self, out: Path, summary: CaptureSummary, existing: bool) -> ArchiveWriter:
        if existing:
            last = list_archive_files(out)[-1]
            tail = scan(last).truncated
            if tail is not None:
                summary.repaired = (f"{last.name} ended in a partial frame at byte {tail.byte_offset} (a capture "
                                    "killed mid-write); cut off, its record is captured again")
                log.warning("%s", summary.repaired)
        return ArchiveWriter(out, rotate_bytes=self.options.rotate_bytes,
                             creator=f"replicator {__version__} capture", repair=True)

    def _resume_points(self, writer: ArchiveWriter | StagedArchiveWriter,
                       parts: set[int]) -> tuple[dict[int, int], str | None]:
        """Where the archive's records end, per partition, and its protocol."""
        o = self.options
        if isinstance(writer, StagedArchiveWriter):
            read: dict[ArchiveFile, bytes] = dict([writer.last_object]) if writer.last_object else {}
            return archive_resume_points(o.out, o.topic, parts, files=writer.existing, read=read)
        return archive_resume_points(writer.directory, o.topic, parts)

    def _start_for(self, p: int, resume: Mapping[int, int], committed: Mapping[int, int],
                   earliest: int) -> tuple[int, str]:
        start = self.options.start
        if isinstance(start, Mapping) and p in start:
            return start[p], "--from-offsets"
        if start == "earliest":
            return earliest, "earliest retained offset"
        if p in resume:
            return resume[p], "after the last archived record"
        if p in committed:
            return committed[p], f"committed offset of group {self.options.group_id}"
        return earliest, "earliest retained offset"

    def _loop(self, source: KafkaSource, writer: ArchiveWriter | StagedArchiveWriter,
              summary: CaptureSummary) -> None:
        o = self.options
        parts = summary.partitions
        end = {tp.partition: off for tp, off in source.end_offsets_at_start().items()}
        last_flush = time.monotonic()
        unflushed = 0

        # positions, not record counts: offsets may have gaps (transaction markers)
        if o.until_caught_up and source.caught_up():
            return
        while not self.stop.is_set():
            for r in source.poll():  # raises KafkaSourceError past the retry budget
                if o.until_caught_up and r.offset >= end[r.partition]:
                    continue  # past the end offsets seen at start
                pc = parts[r.partition]
                if summary.protocol is None:
                    summary.protocol = detect_protocol(r.key)
                    log.info("topic %s looks like %s (from the first record's key)", o.topic, summary.protocol)
                writer.write_record(topic=o.topic, partition=r.partition, offset=r.offset,
                                    timestamp_ms=r.timestamp, key=r.key, value=r.value,
                                    protocol=summary.protocol)
                if pc.first < 0:
                    pc.first = r.offset
                pc.last = r.offset
                pc.records += 1
                unflushed += 1
            now = time.monotonic()
            if unflushed and (unflushed >= o.flush_records or now - last_flush >= o.flush_interval_s):
                writer.flush()  # durable before the group offsets say so
                self._commit(source, summary, writer)
                unflushed, last_flush = 0, now
            if o.until_caught_up and source.caught_up():
                summary.stopped = "caught up"
                return
        summary.stopped = "stopped by signal"

    def _commit(self, source: KafkaSource, summary: CaptureSummary,
                writer: ArchiveWriter | StagedArchiveWriter) -> None:
        """Best effort: the group's offsets are for lag tooling and for captures into a new directory.
        Only what is durable: a local archive is flushed before; in an object store, what was put."""
        if not self.options.group_id:
            return
        if isinstance(writer, StagedArchiveWriter):
            if writer.durable:
                source.commit({TP(self.options.topic, p): off for p, off in writer.durable.items()})
        else:
            source.commit({TP(self.options.topic, p): pc.last + 1 for p, pc in summary.partitions.items()
                           if pc.records})


def capture(options: CaptureOptions) -> CaptureSummary:
    """Run one capture session (see module docstring)."""
    if options.rotate_bytes <= 0:
        raise ConfigError("--rotate-bytes must be positive")
    if options.protocol not in (None, "open", "craft", "canal-json", "simple"):
        raise ConfigError(f"--protocol must be open, craft, canal-json or simple, not {options.protocol!r}")
    return Capture(options).run()
