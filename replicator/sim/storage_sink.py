"""A simulated stream written as TiCDC's storage sink writes it (`replicator simulate --storage-sink`).

The same model upstream as the Kafka stream (`Simulation`), laid out as files
(docs/storage-sink.md): per table version `{schema}/{table}/{version}/{date}/CDC{num}.{ext}` with
`meta/CDC.index`, schema files per version (a DDL's `Query` and `Type`; a table the changefeed
found existing gets a version without a DDL; a changefeed restart starts a new version of every
table without a DDL), database schema files for CREATE DATABASE, one table split between two
writers (`CDC_{uuid}_{num}` and `meta/CDC_{uuid}.index`), and the `metadata` checkpoint after
every flush. Every row a producer retry or a restart sent again is written once (the sink's
files hold each row change once; a restart's new versions then hold only rows after it).
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from replicator.codec import codec_for
from replicator.codec.csv.common import CsvConfig
from replicator.codec.csv.encoder import encode_row
from replicator.codec.storage_sink.layout import (
    EXTENSIONS,
    META_DIR,
    METADATA,
    DataFile,
    DateSeparator,
    date_dir,
    index_name,
    render_metadata,
)
from replicator.codec.storage_sink.schema import (
    SchemaFile,
    TableColumn,
    columns_from_sql,
    render_schema_file,
    schema_file_name,
)
from replicator.events import DdlCode, DdlEvent, Event, Resolved, RowChange, tso_to_datetime
from replicator.sim.model import ModelTable
from replicator.sim.sinks import SinkReport
from replicator.sim.stream import Simulation
from replicator.storage.fileio import FileIO, normalise_root
from replicator.storage.stores import fileio_for

__all__ = ["StorageLayout", "write_storage_sink"]

PREEXISTING = ("shop", "orders")  # written as a table the changefeed found (its first version has no DDL)
SPLIT = ("shop", "customers")  # written by two writers (the new architecture's table split)


@dataclass(frozen=True)
class StorageLayout:
    """How the simulated changefeed writes (its sink URI and `[sink]` settings)."""

    protocol: Literal["csv", "canal-json"] = "csv"
    csv: CsvConfig = field(default_factory=CsvConfig)
    date_separator: DateSeparator = "day"
    index_width: int = 20
    checkpoint_every: int = 1  # write `metadata` at every n-th advance of the checkpoint


@dataclass
class _Table:
    version: int
    columns: tuple[TableColumn, ...]
    writers: tuple[str, ...]
    rows: dict[str, list[RowChange]] = field(default_factory=dict)


class _Writer:
    def __init__(self, sim: Simulation, io: FileIO, root: str, layout: StorageLayout) -> None:
        self.sim, self.io, self.root, self.layout = sim, io, root, layout
        self.ext = EXTENSIONS[layout.protocol]
        self.tables: dict[tuple[str, str], _Table] = {}  # live tables
        self.names: dict[int, tuple[str, str]] = {}  # model table (by identity) -> its live name
        self.numbers: dict[str, int] = {}  # index path -> last file number
        self.files = 0
        self.checkpoints = 0
        self.seen: dict[int, Event] = {}  # events written (by identity): a resend is written once
        self.ddls: set[tuple[int, str]] = set()
        self.pending_ddl: DdlEvent | None = None
        self.resolved: dict[int, int] = {}
        self.checkpoint = 0
        self.advances = 0
        self.restarts = 0
        rnd = uuid.UUID(int=sim.config.seed * 7919 + 1, version=4).hex
        self.uuids = (rnd[:8], rnd[8:16])
        self.codec = codec_for("canal-json") if layout.protocol == "canal-json" else None

    def path(self, *parts: str) -> str:
        return self.io.join(self.root, *parts)

    # -- events ---------------------------------------------------------------------------------
    def run(self) -> None:
        partitions = self.sim.config.partitions
        for p, ev in self.sim.events():
            if self.pending_ddl is not None and not (isinstance(ev, DdlEvent) and self._same(ev, self.pending_ddl)):
                self._schema_file(self.pending_ddl)  # the model moved past it: its columns are the new ones
                self.pending_ddl = None
            if self.sim.stats.restarts > self.restarts:
                self.restarts = self.sim.stats.restarts
                self._restart()
            if isinstance(ev, Resolved):
                self.resolved[p] = ev.ts
                cp = min(self.resolved.values()) if len(self.resolved) == partitions else 0
                if cp > self.checkpoint:
                    self.checkpoint = cp
                    self._prune(cp)
                    self.advances += 1
                    if self.advances % self.layout.checkpoint_every == 0:
                        self._flush(cp)
                continue
            if id(ev) in self.seen:
                continue
            self.seen[id(ev)] = ev
            if isinstance(ev, DdlEvent):
                key = (ev.commit_ts, ev.query)
                if key not in self.ddls:
                    self.ddls.add(key)
                    self._flush_rows(ev.commit_ts)
                    self.pending_ddl = ev
            elif isinstance(ev, RowChange):
                table = self.tables[(ev.schema, ev.table)]
                writer = table.writers[zlib.crc32(repr(_key(ev)).encode()) % len(table.writers)]
                table.rows.setdefault(writer, []).append(ev)
        if self.pending_ddl is not None:
            self._schema_file(self.pending_ddl)
        self._flush(max(self.checkpoint, self.sim.ts))

    @staticmethod
    def _same(a: DdlEvent, b: DdlEvent) -> bool:
        return (a.commit_ts, a.query) == (b.commit_ts, b.query)

    def _prune(self, cp: int) -> None:
        """Events at or below the checkpoint are never sent again: forget them."""
        self.seen = {k: e for k, e in self.seen.items() if _ts(e) > cp}

    def _restart(self) -> None:
        """A changefeed restart: what was written is flushed, every table gets a new version (no DDL)."""
        self._flush_rows(self.sim.ts)
        for (schema, name), table in self.tables.items():
            table.version = max(table.version + 1, self.checkpoint)
            self._write_schema(SchemaFile(schema, name, table.version, "", 0, table.columns))

    # -- files ----------------------------------------------------------------------------------
    def _schema_file(self, ddl: DdlEvent) -> None:
        if ddl.ddl_type in (DdlCode.CREATE_SCHEMA, DdlCode.DROP_SCHEMA) or not ddl.table:
            self._write_schema(SchemaFile(ddl.schema, "", ddl.commit_ts, ddl.query, ddl.ddl_type))
            return
        model = self.sim.live_table(ddl.schema, ddl.table)
        if model is None:
            return
        columns = model_columns(model)
        query, code = ddl.query, ddl.ddl_type
        if (ddl.schema, ddl.table) == PREEXISTING and code == DdlCode.CREATE_TABLE and \
                (ddl.schema, ddl.table) not in self.tables:
            query, code = "", 0  # the changefeed found the table: its first version records no DDL
        writers = self.uuids if (ddl.schema, ddl.table) == SPLIT else ("",)
        old = self.names.get(id(model))
        if old is not None:
            self.tables.pop(old, None)  # renamed away (or about to be replaced by its next version)
        self._write_schema(SchemaFile(ddl.schema, ddl.table, ddl.commit_ts, query, code, columns))
        if code == DdlCode.DROP_TABLE:
            self.names.pop(id(model), None)
            return
        self.names[id(model)] = (ddl.schema, ddl.table)
        self.tables[(ddl.schema, ddl.table)] = _Table(ddl.commit_ts, columns, writers)

    def _write_schema(self, sf: SchemaFile) -> None:
        meta = self.path(sf.schema, sf.table, META_DIR) if sf.table else self.path(sf.schema, META_DIR)
        self.io.write(self.io.join(meta, schema_file_name(sf)), render_schema_file(sf))

    def _flush_rows(self, ts: int) -> None:
        """Every buffered row into a new file of its table version and writer, then the index files."""
        date = date_dir(tso_to_datetime(ts), self.layout.date_separator)
        for (schema, name), table in self.tables.items():
            for writer, rows in table.rows.items():
                if not rows:
                    continue
                directory = self.path(schema, name, str(table.version), *([date] if date else []))
                index = self.io.join(directory, META_DIR, index_name(writer))
                num = self.numbers.get(index, 0) + 1
                self.numbers[index] = num
                data = DataFile(num, writer, self.ext, self.layout.index_width)
                self.io.write(self.io.join(directory, data.name()), self._encode(rows, table, schema, name))
                self.io.write(index, (data.name() + "\n").encode())
                self.files += 1
            table.rows = {}

    def _encode(self, rows: Sequence[RowChange], table: _Table, schema: str, name: str) -> bytes:
        if self.codec is not None:
            lines = [value.decode() for r in rows for _, value in self.codec.encode_rows([r], max_batch_size=1)]
        else:
            model = self.sim.live_table(schema, name)
            labels = {c.name: c.labels for c in model.columns if c.labels} if model is not None else {}
            lines = [rec for r in rows for rec in encode_row(r, self.layout.csv, labels=labels)]
        term = self.layout.csv.terminator
        return "".join(line + term for line in lines).encode("utf-8", "surrogateescape")

    def _flush(self, cp: int) -> None:
        self._flush_rows(cp)
        self.io.write(self.path(METADATA), render_metadata(cp))
        self.checkpoints += 1


def _ts(ev: Event) -> int:
    return ev.ts if isinstance(ev, Resolved) else ev.commit_ts


def _key(row: RowChange) -> tuple[object, ...]:
    return tuple(c.value for c in row.image if c.is_handle_key)


def model_columns(model: ModelTable) -> tuple[TableColumn, ...]:
    """A model table's columns as its schema file records them."""
    return columns_from_sql([(c.name, c.sql, c.nullable, c.name in model.key) for c in model.columns])


def write_storage_sink(sim: Simulation, url: str, layout: StorageLayout | None = None, *,
                       io: FileIO | None = None) -> SinkReport:
    """Write the whole simulated stream under `url` (a directory or an object-store URL; `io`: the
    store to write through instead of the URL's own)."""
    layout = layout or StorageLayout()
    root = normalise_root(url)
    started = time.monotonic()
    writer = _Writer(sim, io or fileio_for(root), root, layout)
    writer.run()
    return SinkReport({0: writer.files}, time.monotonic() - started,
                      f"{root} ({layout.protocol}, {writer.files} files, {writer.checkpoints} checkpoints)")
