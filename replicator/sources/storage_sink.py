"""TiCDC's storage sink (CSV or canal-json files in a directory or an object store) as an engine
source: the same windows, DDL handling, exactly-once progress and dead letters as Kafka.

How the files map onto the engine (docs/storage-sink.md):

* Every data-file stream (schema, table, table version, partition, writer uuid) is one engine
  partition (its "topic" is `StreamKey.topic`, partition 0). Its offsets fold (date directory,
  file number, line) into one integer in reading order (`layout.fold_offset`), so the restart
  cursors in `state.json` name a file and a line.
* Every table's (and database's) schema files are one more partition, offset = table version:
  a version whose schema file records a DDL gives that DDL at the version's ts; a table's first
  version without one (a table older than the changefeed) gives its CREATE TABLE from the
  recorded columns, so its types are exact before its first row; a later version without a DDL
  (a rescheduled table, a resumed changefeed) gives nothing.
* A pass reads `metadata` (checkpoint-ts) first; when it moved, it lists what is new and, per
  stream, the data files up to the one its index file names (never past it). Every row at or
  below the checkpoint was written before the checkpoint was, so it is in a file listed after
  it was read. The files are then read lazily, a poll's worth at a time, always the next file of
  the stream read least far in commit ts, each followed by a resolved event on its stream at the
  highest ts below every row still unread there (a stream's files are in commit-ts order), and
  the stream's last one by `Resolved(checkpoint)`. The window thus moves on while a backlog is
  read and the engine applies and lets go of its rows in bounded steps. A schema file is handed
  out once every stream was read up to its version (a DROP TABLE then never finds rows of its
  table unread); the loop's check of quiet topics (`read_to_end`) reads what it waits for first.
  The windower's rules (docs/windows.md) hold as for Kafka.

Store calls: see `storage_listing` (a pass whose checkpoint did not move lists nothing).
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from replicator.codec import codec_for
from replicator.codec.csv.common import CsvConfig, split_records
from replicator.codec.csv.decoder import MISSING_COMMIT_TS, MissingCommitTs, decode_record, is_header
from replicator.codec.storage_sink.layout import (
    EXTENSIONS,
    META_DIR,
    SOURCE_PREFIX,
    DataFile,
    DateSeparator,
    after_file,
    fold_offset,
    index_name,
    parse_index,
    unfold_offset,
)
from replicator.codec.storage_sink.schema import SchemaFile
from replicator.codec.values import DecodeOptions
from replicator.errors import ConfigError, DecodeError, StorageError
from replicator.events import TP, DdlCode, DdlEvent, Event, Position, Record, Resolved, RowChange
from replicator.mysql.classify import classify_ddl
from replicator.sources.storage_listing import DataStream, MetaStream, SinkListing
from replicator.storage.fileio import FileIO, normalise_root
from replicator.storage.stores import fileio_for

log = logging.getLogger(__name__)

StorageProtocol = Literal["csv", "canal-json"]
_ROW: Final = b"row"
_SCHEMA: Final = b"schema"
_RESOLVED: Final = b"resolved"
_BROKEN: Final = b"broken"  # the rest of a data file that cannot be split into records


@dataclass(frozen=True)
class StorageSinkSettings:
    """Where the changefeed writes and how (the sink URI's and `[sink]` settings that shape files)."""

    url: str
    protocol: StorageProtocol = "csv"
    csv: CsvConfig = field(default_factory=CsvConfig)
    date_separator: DateSeparator = "day"
    partition_separator: bool = False
    poll_interval_s: float = 2.0  # a follower re-reads `metadata` this often
    poll_max_records: int = 5000
    from_ts: int = 0  # replay: rows below this commit ts are left out (every DDL is kept: exact schemas)


class StorageSinkSource:
    """`Source` over a storage-sink changefeed (a directory or an `s3a://` prefix)."""

    def __init__(self, settings: StorageSinkSettings, io: FileIO | None = None, *,
                 decode_options: DecodeOptions | None = None) -> None:
        if settings.protocol not in EXTENSIONS:
            raise ConfigError(f"--protocol for --storage-sink must be csv or canal-json, not {settings.protocol!r}")
        self.settings = settings
        self.root = normalise_root(settings.url)
        self.io = io or fileio_for(self.root)
        self.name = f"{SOURCE_PREFIX}{self.root}"
        self.protocol = settings.protocol
        self.decode_options = decode_options or DecodeOptions()
        self._ext = EXTENSIONS[settings.protocol]
        self._codec = codec_for("canal-json") if settings.protocol == "canal-json" else None
        self.listing = SinkListing(self.io, self.root, ext=self._ext, csv=settings.protocol == "csv",
                                   date_separator=settings.date_separator,
                                   partition_separator=settings.partition_separator)
        self._data = self.listing.data
        self._meta = self.listing.meta
        self._done = self.listing.done
        self._queue: deque[Record] = deque()
        self._queued_to: dict[str, int] = {}  # topic -> offset of the last record queued
        self._urgent: set[str] = set()  # quiet topics the loop waits for: read before the others
        self._streams: list[tuple[int, int, str]] = []  # heap of (lo, turn, topic): streams with files left
        self._ddls: list[tuple[int, str]] = []  # heap of (version, topic): each table's next schema file
        self._positions: dict[TP, int | None] = {}
        self._passes = 0
        self._last_pass = 0.0
        self._discovered_cp: int | None = None  # the checkpoint of the last listing of the streams
        self._planned_cp: int | None = None  # the checkpoint of the last pass (its files are read by `_fill`)
        self._cp = 0  # the checkpoint the current pass reads up to
        self.checkpoint_ts = 0  # the `metadata` checkpoint-ts of the last pass
        self.checkpoint_read_at = 0.0  # wall-clock time it was read (status, lag)
        self.files_read = 0
        # Wired by the engine (engine/pipeline.py) to its applied watermark and its progress's
        # `ended_versions`: streams read and applied to their end are forgotten (`_forget`).
        # Left as they are (nothing applied), nothing is forgotten.
        self.applied_ts: Callable[[], int] = lambda: -1
        self.ended_versions: dict[str, int] = {}
        self.ended: list[TP] = []  # streams forgotten that the engine has not retired from its window yet

    @property
    def lists(self) -> int:
        """Directory listings made (the listing cost)."""
        return self.listing.lists

    # -- Source ---------------------------------------------------------------------------------
    def partitions(self) -> list[TP]:
        """The streams present now (listed, not read); more are found as they appear."""
        cp = self.listing.read_checkpoint() or 0
        self.listing.discover(cp, self.ended_versions)
        self._discovered_cp = cp
        return self.fresh_partitions()

    def start(self, positions: Mapping[TP, int | None]) -> None:
        self._positions = dict(positions)
        for meta in self._meta.values():
            meta.next_version = self._positions.get(meta.tp) or 0
        for data in self._data.values():
            data.next = unfold_offset(self._positions.get(data.tp) or 0)
        self._check_commit_ts()

    def poll(self) -> list[Record]:
        if not self._queue and not self._unread():
            wait = self.settings.poll_interval_s - (time.monotonic() - self._last_pass)
            if self._passes and wait > 0:
                time.sleep(min(wait, 0.2))  # a follower polling an idle changefeed must not spin
                return []
            self._pass()
        self._fill()
        out: list[Record] = []
        while self._queue and len(out) < self.settings.poll_max_records:
            out.append(self._queue.popleft())
        return out

    def caught_up(self) -> bool:
        """True once a pass has run since start and everything it found was handed out."""
        return self._passes > 0 and not self._queue and not self._unread()

    def backlogged(self) -> bool:
        """Files of the current pass are still unread (a follower reads on before its interval step)."""
        return bool(self._queue) or self._unread()

    def commit(self, offsets: Mapping[TP, int]) -> None:
        """Nothing to publish: the warehouse state is the progress."""

    def lag(self) -> int | None:
        return len(self._queue) + sum(len(d.pending) for d in self._data.values())

    def partition_lags(self, read_to: Mapping[TP, int] | None = None) -> dict[TP, int] | None:
        return None

    def close(self) -> None:
        self._queue.clear()

    # -- PartitionDiscovery: the loop checks these before it applies a step ----------------------
    def fresh_partitions(self) -> list[TP]:
        """Every stream found so far. Each pass lists the streams right after reading `metadata`,
        before any of its records is handed out: a stream found later holds only rows above the
        checkpoint the window may have reached."""
        return [m.tp for m in self._meta.values()] + [d.tp for d in self._data.values()]

    def add_partitions(self, new: Sequence[TP]) -> bool:
        return True  # already read from their first file (they have no cursor)

    def read_to_end(self, topics: Sequence[str], read_to: Mapping[TP, int]) -> bool | None:
        """Whether the quiet topics (their tables dropped or renamed away: the window does not wait
        for them) have nothing left in this pass; those that have are read first from now on."""
        behind = {t for t in topics if self._topic_unread(t) or read_to.get(TP(t, 0), 0) <= self._queued_to.get(t, -1)}
        self._urgent |= behind
        return not behind

    def _topic_unread(self, topic: str) -> bool:
        stream = self._data.get(topic) or self._meta.get(topic)
        return stream is not None and bool(stream.pending)

    def _unread(self) -> bool:
        """Files or schema files of the current pass not handed out yet."""
        if self._low() is not None:
            return True
        heap = self._ddls
        while heap:
            version, topic = heap[0]
            meta = self._meta[topic]
            if meta.pending and meta.pending[0] == version:
                return True
            heapq.heappop(heap)
        return False

    # -- decoding (the engine calls this instead of a Kafka codec) -------------------------------
    def decode(self, rec: Record) -> list[Event]:
        """The events of one record this source handed out."""
        pos = Position(rec.topic, rec.partition, rec.offset)
        value = rec.value or b""
        if rec.key == _RESOLVED:
            return [Resolved(int(value), position=pos)]
        if rec.key == _SCHEMA:
            return self._schema_events(rec.topic, rec.offset, pos)
        data = self._data[rec.topic]
        where = self.file_line(data, rec.offset)
        if rec.key == _BROKEN:
            raise DecodeError(value.decode("utf-8", "replace"), where=f"{where} (the rest of the file is skipped)")
        try:
            events = self._row_events(data, value, pos, self.decode_options)
        except MissingCommitTs:
            raise
        except DecodeError as exc:
            raise DecodeError(exc.what, where=f"{where}{' ' + exc.where if exc.where else ''}") from None
        return [e for e in events if not isinstance(e, RowChange) or e.commit_ts >= self.settings.from_ts]

    def file_line(self, data: DataStream, offset: int) -> str:
        """A record's place in the words of the files: `<path of its data file> line <n>`."""
        dkey, num, line = unfold_offset(offset)
        directory, width = data.dates.get(dkey, (data.directory, 20))
        return f"{self.io.join(directory, DataFile(num, data.key.uuid, self._ext, width).name())} line {line}"

    def _row_events(self, data: DataStream, value: bytes, pos: Position | None,
                    options: DecodeOptions) -> list[Event]:
        if self._codec is not None:
            return self._codec.decode(None, value, options=options, position=pos)
        if data.shape is None:
            raise DecodeError(f"no schema file for table version {data.key.directory}")
        text = value.decode("utf-8", "surrogateescape")
        return [decode_record(text, data.shape, self.settings.csv, options=options, position=pos)]

    def _schema_events(self, topic: str, version: int, pos: Position) -> list[Event]:
        meta = self._meta[topic]
        sf = meta.versions[version]
        if sf.has_ddl:
            code = sf.ddl_type or classify_ddl(sf.query)
            return [DdlEvent(version, sf.schema, sf.table, code, sf.query, position=pos)]
        if sf.table and version == meta.first_version:
            # a table older than the changefeed: created from its recorded columns
            return [DdlEvent(version, sf.schema, sf.table, DdlCode.CREATE_TABLE, create_table_sql(sf), position=pos)]
        return []

    # -- passes ---------------------------------------------------------------------------------
    def _pass(self) -> None:
        """Read `metadata`; when the checkpoint moved, list what is new and plan every stream's
        files up to its index (read later, in commit-ts order across streams, by `_fill`)."""
        self._last_pass = time.monotonic()
        cp = self.listing.read_checkpoint()  # first: every row at or below it is in a file listed after this
        self._passes += 1
        if cp is None or cp == self._planned_cp:
            return  # nothing moved: rows above the checkpoint wait for it, nothing is listed
        if cp > self.checkpoint_ts:
            self.checkpoint_ts, self.checkpoint_read_at = cp, time.time()
        if cp != self._discovered_cp:
            self.listing.discover(cp, self.ended_versions)
        self._discovered_cp = self._planned_cp = self._cp = cp
        self._streams, self._ddls = [], []
        self._urgent.clear()  # the loop asks again for what it still waits for
        for meta in self._meta.values():
            meta.pending.extend(sorted(v for v in meta.versions if v >= meta.next_version))
            self._mark_meta(meta)
        applied, forgotten = self.applied_ts(), set()
        for data in list(self._data.values()):
            if not data.retired:
                data.pending.extend(self.listing.plan(data))
                data.retired = data.final
            if not data.pending:
                if data.retired and data.top <= applied:
                    forgotten.add(self._forget(data))
                    continue
                self._mark(data, cp)
                continue
            if data.marked < 0 and data.lo == 0:
                self._peek(data)
            self._push(data)
        self._note_ended(forgotten)

    def _forget(self, data: DataStream) -> tuple[str, str]:
        """Drop a stream read to its end and applied: retired (a newer table version exists, the
        checkpoint passed it and the stream was planned once more after that), nothing left to
        read, every row read at or below the applied watermark. Decided in a pass before its
        resolved event is queued (nothing of it is queued or planned then): it is neither listed,
        read nor marked again; the engine retires it from its window (`ended`), so its cursor
        leaves state.json; and per table the version up to which no stream is left goes to
        `ended_versions` (`_note_ended`), so a restart does not list them either. What a follower
        keeps then grows with the versions still alive, not with the changefeed's history (each
        DDL, rescheduled table or resumed changefeed starts a version). Its (schema, table)."""
        del self._data[data.tp.topic]
        self._queued_to.pop(data.tp.topic, None)
        self._positions.pop(data.tp, None)
        self.ended.append(data.tp)
        return data.key.schema, data.key.table

    def _note_ended(self, tables: set[tuple[str, str]]) -> None:
        for schema, table in tables:
            alive = [d.key.version for d in self._data.values() if (d.key.schema, d.key.table) == (schema, table)]
            done = [k.version for k in self._done if (k.schema, k.table) == (schema, table)
                    and (not alive or k.version < min(alive))]
            if done:
                key = f"{schema}/{table}"
                self.ended_versions[key] = max(self.ended_versions.get(key, -1), *done)

    def _fill(self) -> None:
        """Queue records until a poll's worth is queued or the pass is all read: always the file
        of the stream read least far (in commit ts), each followed by its stream's resolved event
        at the highest ts below every row still unread there, so the window moves on and the
        engine applies and lets go of rows in bounded steps (never the whole backlog at once).
        A schema file is handed out once every stream was read to its version, or at once when
        the loop waits for its topic. Heaps keep it O(log streams) a file."""
        while len(self._queue) < self.settings.poll_max_records:
            low = self._low()
            self._hand_out_ddls(low)
            if low is None:
                return
            urgent = [self._data[t] for t in sorted(self._urgent) if t in self._data and self._data[t].pending]
            data = urgent[0] if urgent else self._data[heapq.heappop(self._streams)[2]]
            self._read_file(data)
            self._mark(data, self._cp if not data.pending else min(self._cp, data.lo))
            if data.pending:
                self._push(data)

    def _push(self, data: DataStream) -> None:
        data.turn += 1  # an older entry of the stream in the heap is stale
        heapq.heappush(self._streams, (data.lo, data.turn, data.tp.topic))

    def _low(self) -> int | None:
        """The least `lo` of the streams with files left (None: none has)."""
        heap = self._streams
        while heap:
            lo, turn, topic = heap[0]
            data = self._data[topic]
            if data.turn == turn and data.pending:
                return lo
            heapq.heappop(heap)
        return None

    def _hand_out_ddls(self, low: int | None) -> None:
        """The schema files at versions up to `low + 1` (all, with `low` None), and those of the
        topics the loop waits for."""
        for topic in [t for t in self._urgent if t in self._meta]:
            meta = self._meta[topic]
            while meta.pending:
                self._schema_record(meta)
            self._urgent.discard(topic)
            self._mark_meta(meta)
        heap = self._ddls
        while heap and (low is None or heap[0][0] <= low + 1):
            version, topic = heapq.heappop(heap)
            meta = self._meta[topic]
            if meta.pending and meta.pending[0] == version:
                self._schema_record(meta)
                self._mark_meta(meta)

    def _schema_record(self, meta: MetaStream) -> None:
        version = meta.pending.popleft()
        self._put(Record(meta.tp.topic, 0, version, -1, _SCHEMA, b""))
        meta.next_version = version + 1

    def _mark_meta(self, meta: MetaStream) -> None:
        """The schema files' resolved event below the next one left (at the checkpoint: none left)."""
        if meta.pending:
            heapq.heappush(self._ddls, (meta.pending[0], meta.tp.topic))
            self._mark(meta, min(self._cp, meta.pending[0] - 1))
        else:
            self._mark(meta, self._cp)

    def _peek(self, data: DataStream) -> None:
        """A stream not read yet in this run (new, or resumed): the commit ts of its first unread
        record, read and let go, bounds what it holds, so the window need not wait for the
        stream's turn (nor the stream be read ahead of its turn) to move past what precedes it."""
        f = data.pending[0]
        content = self.io.read(self.listing.file_path(data, f))
        if content is None:
            return
        first_line = data.next[2] if (f.dkey, f.num) == data.next[:2] else 0
        options = dataclasses.replace(self.decode_options, invalid_text=None, state=None)
        for line, value in self._records(content):
            if line < first_line or value is None:
                continue
            ts = self._commit_ts(data, value, options)
            if ts is not None:
                data.lo = ts - 1
                self._mark(data, min(self._cp, data.lo))
            return

    def _records(self, content: bytes) -> Iterator[tuple[int, bytes | None]]:
        """(line, record) of a data file; a header record is None; stops where it cannot be split."""
        text = content.decode("utf-8", "surrogateescape")
        if self.settings.protocol == "csv":
            records = split_records(text, self.settings.csv)
        else:
            records = iter([(i + 1, line.rstrip("\r")) for i, line in enumerate(text.split("\n")) if line.strip()])
        with contextlib.suppress(DecodeError):
            for line, record in records:
                header = self.settings.protocol == "csv" and is_header(record, self.settings.csv)
                yield line, None if header else record.encode("utf-8", "surrogateescape")

    def _commit_ts(self, data: DataStream, value: bytes, options: DecodeOptions) -> int | None:
        try:
            events = self._row_events(data, value, None, options)
        except DecodeError:
            return None
        return max((e.commit_ts for e in events if isinstance(e, RowChange)), default=None)

    def _put(self, rec: Record) -> None:
        self._queue.append(rec)
        self._queued_to[rec.topic] = rec.offset

    def _mark(self, stream: DataStream | MetaStream, ts: int) -> None:
        """A resolved event at `ts` on the stream: every record at or below it was queued before it."""
        if ts <= stream.marked:
            return
        stream.marked = ts
        if isinstance(stream, MetaStream):
            offset = max(stream.next_version - 1, 0)
        else:
            stream.lo = max(stream.lo, ts)  # every row at or below it was read
            date, num, _ = stream.next
            offset = after_file(date, max(num - 1, 0))
        self._put(Record(stream.tp.topic, stream.tp.partition, offset, -1, _RESOLVED, str(ts).encode()))

    def _read_file(self, data: DataStream) -> None:
        """Queue the records of the stream's next planned file (from `data.next`)."""
        f = data.pending.popleft()
        path = self.listing.file_path(data, f)
        content = self.io.read(path)
        if not content:
            if f.last:
                # named by the index before it is written (or still empty: TiCDC's next writer of the
                # directory writes that number again): the next pass reads it
                data.pending.clear()
            return  # else a number a restarted writer skipped
        self.files_read += 1
        data.dates[f.dkey] = (f.directory, f.width)
        first_line = data.next[2] if (f.dkey, f.num) == data.next[:2] else 0
        last_ts = self._queue_file(data, f.dkey, f.num, path, content, first_line)
        data.next = (f.dkey, f.num + 1, 0)
        if last_ts is not None:
            # A stream's files are in commit-ts order: what is still unread there comes after it.
            data.lo = max(data.lo, last_ts - 1)
            data.top = max(data.top, last_ts)
        if not data.pending:
            self._urgent.discard(data.tp.topic)

    def _queue_file(self, data: DataStream, dkey: int, num: int, path: str, content: bytes,
                    first_line: int) -> int | None:
        """Queue a file's records from `first_line`; the commit ts of its last one (None: none decodes)."""
        topic = data.tp.topic
        text = content.decode("utf-8", "surrogateescape")
        if self.settings.protocol == "csv":
            records = split_records(text, self.settings.csv)
        else:
            records = iter([(i + 1, line.rstrip("\r")) for i, line in enumerate(text.split("\n")) if line.strip()])
        values: list[bytes] = []
        try:
            for line, record in records:
                if line < first_line:
                    continue
                if self.settings.protocol == "csv" and is_header(record, self.settings.csv):
                    continue
                value = record.encode("utf-8", "surrogateescape")
                values.append(value)
                self._put(Record(topic, 0, self._offset(path, dkey, num, line), -1, _ROW, value))
        except DecodeError as exc:  # dead-lettered (or stopping the run) like an undecodable record
            line = int((exc.where or "line 1").rsplit(" ", 1)[-1])
            if line >= first_line:
                self._put(Record(topic, 0, self._offset(path, dkey, num, line), -1, _BROKEN, exc.what.encode()))
        return self._last_ts(data, values)

    def _last_ts(self, data: DataStream, values: list[bytes]) -> int | None:
        """The commit ts of the last record that decodes (its own options: nothing is counted)."""
        options = dataclasses.replace(self.decode_options, invalid_text=None, state=None)
        for value in reversed(values):
            ts = self._commit_ts(data, value, options)
            if ts is not None:
                return ts
        return None

    @staticmethod
    def _offset(path: str, dkey: int, num: int, line: int) -> int:
        try:
            return fold_offset(dkey, num, line)
        except ValueError as exc:
            raise StorageError(f"{path} line {line}: cannot be given a position: {exc}; nothing past it is "
                               "applied (report this layout)") from None

    def _check_commit_ts(self) -> None:
        """A CSV changefeed without commit ts cannot be windowed: refuse it before anything applies
        (the first record of the newest file of the first stream that has one tells)."""
        if self.settings.protocol != "csv":
            return
        for data in self._data.values():
            if data.shape is None:
                continue
            for _, ddir in reversed(self.listing.date_dirs(data.directory, 0)):
                index = self.io.join(ddir, META_DIR, index_name(data.key.uuid))
                raw = self.io.read(index)
                content = self.io.read(self.io.join(ddir, parse_index(raw, index).name())) if raw else None
                if not content:
                    continue
                for _, record in split_records(content.decode("utf-8", "surrogateescape"), self.settings.csv):
                    if is_header(record, self.settings.csv):
                        if "ticdc-meta$commit-ts" not in record:
                            raise MissingCommitTs(MISSING_COMMIT_TS)
                        continue
                    with contextlib.suppress(DecodeError):  # a bad record is dead-lettered when it is read
                        decode_record(record, data.shape, self.settings.csv, options=self.decode_options)
                    return


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def create_table_sql(sf: SchemaFile) -> str:
    """CREATE TABLE for a table version's recorded columns (every identifier quoted)."""
    cols = [f"{_quote(c.name)} {c.sql_type()}{'' if c.nullable or c.is_pk else ' NOT NULL'}" for c in sf.columns]
    keys = [_quote(c.name) for c in sf.columns if c.is_pk]
    if keys:
        cols.append(f"PRIMARY KEY ({', '.join(keys)})")
    return f"CREATE TABLE {_quote(sf.schema)}.{_quote(sf.table)} ({', '.join(cols)})"
