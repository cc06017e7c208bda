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
* A pass reads `metadata` (checkpoint-ts) first, then the schema files and, per stream, the data
  files up to the one its index file names (never past it), then puts a `Resolved(checkpoint)`
  on every partition after the last file read. Every row at or below the checkpoint was written
  before the checkpoint was, so it is in a file listed after it was read: the windower's rules
  (docs/windows.md) hold as for Kafka.

Listing cost per pass: the changefeed's databases and tables, each table's schema files, and
per live table version its date directories and index files; a table version older than the
table's newest one is read once more after the checkpoint passes that newer version, then no more.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from replicator.codec import codec_for
from replicator.codec.csv.common import CsvConfig, split_records
from replicator.codec.csv.decoder import MISSING_COMMIT_TS, MissingCommitTs, TableShape, decode_record, is_header
from replicator.codec.storage_sink.layout import (
    EXTENSIONS,
    META_DIR,
    METADATA,
    SOURCE_PREFIX,
    DataFile,
    DateSeparator,
    StreamKey,
    after_file,
    date_key,
    fold_offset,
    index_name,
    index_writer,
    meta_topic,
    parse_index,
    parse_metadata,
    unfold_offset,
)
from replicator.codec.storage_sink.schema import SchemaFile, parse_schema_file, parse_schema_name
from replicator.codec.values import DecodeOptions
from replicator.ddl_classify import classify_ddl
from replicator.errors import ConfigError, DecodeError, StorageError
from replicator.events import TP, DdlCode, DdlEvent, Event, Position, Record, Resolved, RowChange
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


@dataclass
class _Data:
    key: StreamKey
    tp: TP
    directory: str
    next: tuple[int, int, int] = (0, 0, 0)  # (date key, file number, line) of the next record to read
    shape: TableShape | None = None
    dates: dict[int, tuple[str, int]] = field(default_factory=dict)  # date key -> (directory, name width)
    final: bool = False  # a newer version exists and the checkpoint passed it: read once more
    retired: bool = False  # read after it was final: nothing more can come


@dataclass
class _Meta:
    schema: str
    table: str
    tp: TP
    directory: str
    next_version: int = 0
    first_version: int | None = None
    versions: dict[int, SchemaFile] = field(default_factory=dict)


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
        self._data: dict[str, _Data] = {}
        self._meta: dict[str, _Meta] = {}
        self._done: set[StreamKey] = set()  # table versions whose streams are all final
        self._queue: deque[Record] = deque()
        self._positions: dict[TP, int | None] = {}
        self._passes = 0
        self._last_pass = 0.0
        self.checkpoint_ts = 0  # the `metadata` checkpoint-ts of the last pass
        self.checkpoint_read_at = 0.0  # wall-clock time it was read (status, lag)
        self.files_read = 0
        self.lists = 0  # directory listings made (the listing cost)

    # -- Source ---------------------------------------------------------------------------------
    def partitions(self) -> list[TP]:
        """The streams present now (listed, not read); more are found as they appear."""
        self._discover(self._read_checkpoint() or 0)
        return [m.tp for m in self._meta.values()] + [d.tp for d in self._data.values()]

    def start(self, positions: Mapping[TP, int | None]) -> None:
        self._positions = dict(positions)
        for meta in self._meta.values():
            meta.next_version = self._positions.get(meta.tp) or 0
        for data in self._data.values():
            data.next = unfold_offset(self._positions.get(data.tp) or 0)
        self._check_commit_ts()

    def poll(self) -> list[Record]:
        if not self._queue:
            wait = self.settings.poll_interval_s - (time.monotonic() - self._last_pass)
            if self._passes and wait > 0:
                time.sleep(min(wait, 0.2))  # a follower polling an idle changefeed must not spin
                return []
            self._pass()
        out: list[Record] = []
        while self._queue and len(out) < self.settings.poll_max_records:
            out.append(self._queue.popleft())
        return out

    def caught_up(self) -> bool:
        """True once a pass has run since start and everything it found was handed out."""
        return self._passes > 0 and not self._queue

    def commit(self, offsets: Mapping[TP, int]) -> None:
        """Nothing to publish: the warehouse state is the progress."""

    def lag(self) -> int | None:
        return len(self._queue)

    def partition_lags(self, read_to: Mapping[TP, int] | None = None) -> dict[TP, int] | None:
        return None

    def close(self) -> None:
        self._queue.clear()

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
            events = self._row_events(data, value, pos)
        except MissingCommitTs:
            raise
        except DecodeError as exc:
            raise DecodeError(exc.what, where=f"{where}{' ' + exc.where if exc.where else ''}") from None
        return [e for e in events if not isinstance(e, RowChange) or e.commit_ts >= self.settings.from_ts]

    def file_line(self, data: _Data, offset: int) -> str:
        """A record's place in the words of the files: `<path of its data file> line <n>`."""
        dkey, num, line = unfold_offset(offset)
        directory, width = data.dates.get(dkey, (data.directory, 20))
        return f"{self.io.join(directory, DataFile(num, data.key.uuid, self._ext, width).name())} line {line}"

    def _row_events(self, data: _Data, value: bytes, pos: Position) -> list[Event]:
        if self._codec is not None:
            return self._codec.decode(None, value, options=self.decode_options, position=pos)
        if data.shape is None:
            raise DecodeError(f"no schema file for table version {data.key.directory}")
        text = value.decode("utf-8", "surrogateescape")
        return [decode_record(text, data.shape, self.settings.csv, options=self.decode_options, position=pos)]

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
    def _path(self, *parts: str) -> str:
        return self.io.join(self.root, *parts)

    def _read_checkpoint(self) -> int | None:
        data = self.io.read(self._path(METADATA))
        if data is None:
            return None
        return parse_metadata(data, self._path(METADATA))

    def _children(self, path: str) -> list[str]:
        self.lists += 1
        return self.io.children(path)

    def _pass(self) -> None:
        self._last_pass = time.monotonic()
        cp = self._read_checkpoint()  # first: every row at or below it is in a file listed after this
        self._passes += 1
        if cp is None:
            return
        if cp > self.checkpoint_ts:
            self.checkpoint_ts, self.checkpoint_read_at = cp, time.time()
        self._discover(cp)
        for meta in self._meta.values():
            for version in sorted(v for v in meta.versions if v >= meta.next_version):
                self._queue.append(Record(meta.tp.topic, 0, version, -1, _SCHEMA, b""))
                meta.next_version = version + 1
            self._marker(meta.tp, max(meta.next_version - 1, 0), cp)
        for data in self._data.values():
            if not data.retired:
                self._read_stream(data)
                data.retired = data.final
            date, num, _ = data.next
            self._marker(data.tp, after_file(date, max(num - 1, 0)), cp)

    def _marker(self, tp: TP, offset: int, cp: int) -> None:
        self._queue.append(Record(tp.topic, tp.partition, offset, -1, _RESOLVED, str(cp).encode()))

    def _discover(self, cp: int) -> None:
        """Find new schema files (table versions) and data streams."""
        for schema in self._children(self.root):
            if schema == METADATA:
                continue
            for table in self._children(self._path(schema)):
                if table == META_DIR:
                    self._schema_files(schema, "")
                else:
                    self._schema_files(schema, table)
        newest: dict[tuple[str, str], int] = {}
        for meta in self._meta.values():
            if meta.table and meta.versions:
                newest[(meta.schema, meta.table)] = max(meta.versions)
        for meta in self._meta.values():
            if not meta.table:
                continue
            for version, sf in meta.versions.items():
                self._streams_of(sf, version, cp, newest[(meta.schema, meta.table)])

    def _schema_files(self, schema: str, table: str) -> None:
        topic = meta_topic(schema, table)
        meta = self._meta.get(topic)
        directory = self._path(schema, table, META_DIR) if table else self._path(schema, META_DIR)
        if meta is None:
            meta = _Meta(schema, table, TP(topic, 0), directory)
        for name in self._children(directory):
            parsed = parse_schema_name(name)
            if parsed is None or parsed[0] in meta.versions:
                continue
            path = self.io.join(directory, name)
            data = self.io.read(path)
            if data is None:
                continue
            meta.versions[parsed[0]] = parse_schema_file(data, path)
        if meta.versions:
            meta.first_version = min(meta.versions)
            self._meta.setdefault(topic, meta)

    def _streams_of(self, sf: SchemaFile, version: int, cp: int, newest: int) -> None:
        """The data streams of one table version (partition directories, writers)."""
        base = StreamKey(sf.schema, sf.table, version)
        if base in self._done:
            return
        vdir = self._path(sf.schema, sf.table, str(version))
        dirs: list[tuple[int | None, str]] = [(None, vdir)]
        if self.settings.partition_separator:
            for name in self._children(vdir):
                if name.isdigit() and date_key(name, self.settings.date_separator) is None:
                    dirs.append((int(name), self.io.join(vdir, name)))
        shape = TableShape.of(sf.schema, sf.table, sf.columns) if self.settings.protocol == "csv" else None
        for partition, directory in dirs:
            for writer in self._writers(directory):
                key = StreamKey(base.schema, base.table, version, partition, writer)
                if key.topic not in self._data:
                    self._data[key.topic] = _Data(key, TP(key.topic, 0), directory, shape=shape)
        # A version older than the table's newest is finished once the checkpoint passed the newer
        # one: its streams are read once more (this pass), then never listed again.
        if version < newest and cp >= newest:
            self._done.add(base)
            for d in self._data.values():
                if (d.key.schema, d.key.table, d.key.version) == (base.schema, base.table, version):
                    d.final = True

    def _date_dirs(self, directory: str, since: int) -> list[tuple[int, str]]:
        """(date key, directory) of the stream's date directories at or after `since`, in order."""
        sep = self.settings.date_separator
        if sep == "none":
            return [(0, directory)]
        found = []
        for name in self._children(directory):
            key = date_key(name, sep)
            if key is not None and key >= since:
                found.append((key, self.io.join(directory, name)))
        return sorted(found)

    def _writers(self, directory: str) -> set[str]:
        writers: set[str] = set()
        for _, ddir in self._date_dirs(directory, 0):
            for name in self._children(self.io.join(ddir, META_DIR)):
                writer = index_writer(name)
                if writer is not None:
                    writers.add(writer)
        return writers

    def _read_stream(self, data: _Data) -> None:
        """Queue the records of every data file up to what the index files name, from `data.next`."""
        key = data.key
        for dkey, ddir in self._date_dirs(data.directory, data.next[0]):
            index = self.io.join(ddir, META_DIR, index_name(key.uuid))
            raw = self.io.read(index)
            if raw is None:
                continue
            last = parse_index(raw, index)
            start = data.next[1] if dkey == data.next[0] else 1
            for num in range(max(start, 1), last.num + 1):
                name = DataFile(num, key.uuid, self._ext, last.width).name()
                path = self.io.join(ddir, name)
                content = self.io.read(path)
                if content is None:
                    if num == last.num:
                        return  # named by the index before it is written: the next pass reads it
                    continue  # a number a restarted writer skipped
                self.files_read += 1
                data.dates[dkey] = (ddir, last.width)
                first_line = data.next[2] if (dkey, num) == data.next[:2] else 0
                self._queue_file(data, dkey, num, path, content, first_line)
                data.next = (dkey, num + 1, 0)

    def _queue_file(self, data: _Data, dkey: int, num: int, path: str, content: bytes, first_line: int) -> None:
        topic = data.tp.topic
        text = content.decode("utf-8", "surrogateescape")
        if self.settings.protocol == "csv":
            records = split_records(text, self.settings.csv)
        else:
            records = iter([(i + 1, line.rstrip("\r")) for i, line in enumerate(text.split("\n")) if line.strip()])
        try:
            for line, record in records:
                if line < first_line:
                    continue
                if self.settings.protocol == "csv" and is_header(record, self.settings.csv):
                    continue
                value = record.encode("utf-8", "surrogateescape")
                self._queue.append(Record(topic, 0, self._offset(path, dkey, num, line), -1, _ROW, value))
        except DecodeError as exc:  # dead-lettered (or stopping the run) like an undecodable record
            line = int((exc.where or "line 1").rsplit(" ", 1)[-1])
            if line >= first_line:
                self._queue.append(Record(topic, 0, self._offset(path, dkey, num, line), -1, _BROKEN,
                                          exc.what.encode()))

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
            for _, ddir in reversed(self._date_dirs(data.directory, 0)):
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
