"""What a storage-sink changefeed holds now (docs/storage-sink.md): its schema files (table
versions), its data streams and, per stream, the data files up to what its index files name.

Store calls grow with what changed, not with history: a pass whose `metadata` checkpoint did not
move lists nothing (the source skips it); a table version older than the table's newest is
listed once more after the checkpoint passed the newer one, then never again; a live version's
directory is listed once a pass, shared by its writers, and only its newest date directory (and
any new one) has its `meta/` listed again for new writers: an older date directory's writers were
all seen when a newer one appeared (TiCDC names date directories by the date it flushes at).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from replicator.codec.csv.decoder import TableShape
from replicator.codec.storage_sink.layout import (
    META_DIR,
    METADATA,
    DataFile,
    DateSeparator,
    StreamKey,
    date_key,
    index_name,
    index_writer,
    meta_topic,
    parse_index,
    parse_metadata,
)
from replicator.codec.storage_sink.schema import SchemaFile, parse_schema_file, parse_schema_name
from replicator.events import TP
from replicator.storage.fileio import FileIO

__all__ = ["DataStream", "MetaStream", "PlannedFile", "SinkListing"]


@dataclass(frozen=True, slots=True)
class PlannedFile:
    """A data file a pass is to read: named by its index (`last`: the one the index names)."""

    dkey: int
    num: int
    directory: str
    width: int
    last: bool


@dataclass
class DataStream:
    """One (schema, table, version, partition, writer) stream of data files: one engine partition."""

    key: StreamKey
    tp: TP
    directory: str
    next: tuple[int, int, int] = (0, 0, 0)  # (date key, file number, line) of the next record to read
    shape: TableShape | None = None
    dates: dict[int, tuple[str, int]] = field(default_factory=dict)  # date key -> (directory, name width)
    final: bool = False  # a newer version exists and the checkpoint passed it: read once more
    top: int = 0  # the highest commit ts read from it (its files are in commit-ts order)
    retired: bool = False  # read after it was final: nothing more can come
    pending: deque[PlannedFile] = field(default_factory=deque)  # this pass's files still to read
    lo: int = 0  # every row of the stream not yet read has a commit ts above this (as far as known)
    marked: int = -1  # the last resolved ts put on the stream
    turn: int = 0  # counts the stream's entries in the source's heap (only the last one is live)


@dataclass
class MetaStream:
    """A table's (or, with no table, a database's) schema files: one engine partition, offset = version."""

    schema: str
    table: str
    tp: TP
    directory: str
    next_version: int = 0
    first_version: int | None = None
    versions: dict[int, SchemaFile] = field(default_factory=dict)
    pending: deque[int] = field(default_factory=deque)  # versions of this pass still to hand out
    marked: int = -1


class SinkListing:
    """The changefeed's streams as found by listing the store, with the listings remembered."""

    def __init__(self, io: FileIO, root: str, *, ext: str, csv: bool, date_separator: DateSeparator,
                 partition_separator: bool) -> None:
        self.io, self.root, self.ext, self.csv = io, root, ext, csv
        self.date_separator: DateSeparator = date_separator
        self.partition_separator = partition_separator
        self.data: dict[str, DataStream] = {}
        self.meta: dict[str, MetaStream] = {}
        self.done: set[StreamKey] = set()  # table versions whose streams are all final
        self.lists = 0  # directory listings made (the listing cost)
        self.reads = 0  # small files read (metadata, index and schema files)
        self._pass_lists: dict[str, list[str]] = {}  # this pass's listings (a directory listed once a pass)
        self._writers: dict[str, set[str]] = {}  # stream directory -> writers found in its date directories
        self._writers_from: dict[str, int] = {}  # stream directory -> date key whose `meta/` is listed again

    def path(self, *parts: str) -> str:
        return self.io.join(self.root, *parts)

    def read(self, path: str) -> bytes | None:
        self.reads += 1
        return self.io.read(path)

    def read_checkpoint(self) -> int | None:
        data = self.read(self.path(METADATA))
        return None if data is None else parse_metadata(data, self.path(METADATA))

    def children(self, path: str) -> list[str]:
        found = self._pass_lists.get(path)
        if found is None:
            self.lists += 1
            found = self._pass_lists[path] = self.io.children(path)
        return found

    # -- discovery --------------------------------------------------------------------------------
    def discover(self, cp: int, ended: Mapping[str, int] | None = None) -> None:
        """Find new schema files (table versions) and data streams (a new pass: listings are fresh).
        `ended`: per "schema/table", the version up to which every stream was read, applied and
        forgotten (`StorageSinkSource._forget`): those versions are not listed again."""
        self._pass_lists = {}
        for schema in self.children(self.root):
            if schema == METADATA:
                continue
            for table in self.children(self.path(schema)):
                self._schema_files(schema, "" if table == META_DIR else table)
        newest: dict[tuple[str, str], int] = {}
        for meta in self.meta.values():
            if meta.table and meta.versions:
                newest[(meta.schema, meta.table)] = max(meta.versions)
        for meta in self.meta.values():
            if meta.table:
                last_ended = (ended or {}).get(f"{meta.schema}/{meta.table}", -1)
                for version, sf in meta.versions.items():
                    if version <= last_ended:
                        self.done.add(StreamKey(sf.schema, sf.table, version))
                        continue
                    self._streams_of(sf, version, cp, newest[(meta.schema, meta.table)])

    def _schema_files(self, schema: str, table: str) -> None:
        topic = meta_topic(schema, table)
        meta = self.meta.get(topic)
        directory = self.path(schema, table, META_DIR) if table else self.path(schema, META_DIR)
        if meta is None:
            meta = MetaStream(schema, table, TP(topic, 0), directory)
        for name in self.children(directory):
            parsed = parse_schema_name(name)
            if parsed is None or parsed[0] in meta.versions:
                continue
            path = self.io.join(directory, name)
            data = self.read(path)
            if data is None:
                continue
            meta.versions[parsed[0]] = parse_schema_file(data, path)
        if meta.versions:
            meta.first_version = min(meta.versions)
            self.meta.setdefault(topic, meta)

    def _streams_of(self, sf: SchemaFile, version: int, cp: int, newest: int) -> None:
        """The data streams of one table version (partition directories, writers)."""
        base = StreamKey(sf.schema, sf.table, version)
        if base in self.done:
            return
        vdir = self.path(sf.schema, sf.table, str(version))
        dirs: list[tuple[int | None, str]] = [(None, vdir)]
        if self.partition_separator:
            for name in self.children(vdir):
                if name.isdigit() and date_key(name, self.date_separator) is None:
                    dirs.append((int(name), self.io.join(vdir, name)))
        shape = TableShape.of(sf.schema, sf.table, sf.columns) if self.csv else None
        for partition, directory in dirs:
            for writer in self.writers(directory):
                key = StreamKey(base.schema, base.table, version, partition, writer)
                if key.topic not in self.data:
                    self.data[key.topic] = DataStream(key, TP(key.topic, 0), directory, shape=shape)
        # A version older than the table's newest is finished once the checkpoint passed the newer
        # one: its streams are read once more (this pass), then never listed again.
        if version < newest and cp >= newest:
            self.done.add(base)
            for d in self.data.values():
                if (d.key.schema, d.key.table, d.key.version) == (base.schema, base.table, version):
                    d.final = True

    def date_dirs(self, directory: str, since: int) -> list[tuple[int, str]]:
        """(date key, directory) of the stream's date directories at or after `since`, in order."""
        sep = self.date_separator
        if sep == "none":
            return [(0, directory)]
        found = []
        for name in self.children(directory):
            key = date_key(name, sep)
            if key is not None and key >= since:
                found.append((key, self.io.join(directory, name)))
        return sorted(found)

    def writers(self, directory: str) -> set[str]:
        """The writers (index files) of a stream directory: the `meta/` of each date directory is
        listed until a newer date directory appears, then no more."""
        writers = self._writers.setdefault(directory, set())
        dates = self.date_dirs(directory, self._writers_from.get(directory, 0))
        for _, ddir in dates:
            for name in self.children(self.io.join(ddir, META_DIR)):
                writer = index_writer(name)
                if writer is not None:
                    writers.add(writer)
        if dates:
            self._writers_from[directory] = dates[-1][0]
        return writers

    # -- a pass's files -----------------------------------------------------------------------------
    def plan(self, data: DataStream) -> list[PlannedFile]:
        """The data files of a stream from its position up to what its index files name now."""
        key, files = data.key, []
        for dkey, ddir in self.date_dirs(data.directory, data.next[0]):
            index = self.io.join(ddir, META_DIR, index_name(key.uuid))
            raw = self.read(index)
            if raw is None:
                continue
            last = parse_index(raw, index)
            start = data.next[1] if dkey == data.next[0] else 1
            files += [PlannedFile(dkey, num, ddir, last.width, num == last.num)
                      for num in range(max(start, 1), last.num + 1)]
        return files

    def file_path(self, data: DataStream, f: PlannedFile) -> str:
        return self.io.join(f.directory, DataFile(f.num, data.key.uuid, self.ext, f.width).name())
