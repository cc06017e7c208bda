"""Rows a full buffer moves out of driver memory, and reads back with Spark as a step's spans.

Why: a step costs about the same whatever its size (a commit per busy table), so a catch-up whose
buffer bound (`--max-buffer-rows`) forced a step each time it filled made many small steps (issue
49). The windower instead moves complete rows here (`Windower.spill_ready`) and applies them as
one step when one is due (caught up, the interval, a stop, a failure, `--spill-rows` reached): the
bound on memory holds, and the step is as large as the backlog.

The files are the Spark reader's events (sources/executor.py `EVENTS_SCHEMA`, one Parquet file a
table and spill), so a step reads them as that reader's batch does (`SparkBatch`, `vouched`: the
driver saw every row), one batch per table over its own files (its rows come from one topic).
They live in the warehouse (`_replicator/spill/<run>/`, every executor reads it, on every
store), are deleted once applied, and the next run holding the lease deletes what a crashed one
left: a crash loses nothing, since the windower's restart cursors stay at the spilled rows'
offsets until they are applied.

Once its table's spec is known (`spec_of`: the catalog's as the spill is written, or the one its
first step will infer from the rows), a keyed table's rows are also written decoded, as the typed
changes the executors would make of them (`executor.change_batches`, a second file per spill): a
span read back under a spec of the same shape (`executor.change_shape`) then reads them as plain
Parquet, without a Python worker decoding each row on the executors (about 0.6 s of fixed cost
per table and step on a small machine). A span under another spec (a DDL applied between) or a
row that does not decode under it reads the events instead, as before.

The driver also keeps an index of each table's typed changes (sources/spill_index.py): a span's
count, deletes, fresh inserts and key range come from it, not from a Spark job, and the changes a
later one of their key supersedes are dropped by row number instead of by a window. Within a
budget of `driver_rows` changes at once (the run's `--max-buffer-rows`), a span's typed files are
read back on the driver and handed to Spark as rows in memory are (`TypedRows.read_back`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from replicator.errors import ReplicatorError
from replicator.events import DdlEvent, RowChange
from replicator.sources import executor as ex
from replicator.sources.spill_index import ChangeIndex, DriverBudget, TypedRows
from replicator.storage import fileio_for, is_url
from replicator.tables import TableName, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from replicator.sources.spark_reader import SparkBatch

log = logging.getLogger("replicator")


def _warm(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A Python worker's first task: what the spill's reading needs, imported (`SpillFiles.warm_up`)."""
    ex.change_schema  # noqa: B018  (this module, and so the executor's decoder, is imported by now)
    yield from batches


class _Typed:
    """A table's spilled rows decoded under one spec, in files beside its events, and the driver's
    index of them (sources/spill_index.py)."""

    def __init__(self, spec: TableSpec) -> None:
        self.spec = spec
        self.shape = ex.change_shape(spec)
        self.files: list[str] = []
        self.rows: list[int] = []  # each file's changes
        self.index = ChangeIndex([f"_c{i}" for i, c in enumerate(spec.columns) if c.name in spec.key])


class SpillFiles:
    """A run's spill (engine/rows.py `Spill`): Parquet files under `root`/<run>/."""

    def __init__(self, root: str, spark: Callable[[], SparkSession],
                 spec_of: Callable[[TableName, RowChange, Sequence[DdlEvent]], TableSpec | None] = lambda *_: None,
                 driver_rows: int = 0) -> None:
        self.io = fileio_for(root)
        self.budget = DriverBudget(driver_rows)  # typed changes read back on the driver at once
        self.parent = root
        self.root = self.io.join(root, uuid.uuid4().hex[:12])
        self._spark = spark
        self._spec_of = spec_of
        self.rows = 0
        self._files: dict[TableName, list[str]] = {}  # a table's files
        self._topic: dict[TableName, str] = {}
        self._typed: dict[TableName, _Typed | None] = {}  # None: its spans read the events
        self._sources: dict[TableName, SparkBatch] = {}
        self._n = 0
        self._warming: threading.Thread | None = None

    def forget_crashed(self) -> None:
        """Delete what earlier runs left (a crash before they applied it): this run holds the lease."""
        self.io.remove_tree(self.parent)

    def warm_up(self) -> None:
        """Start the executors' Python workers, with this module's decoder imported, while the run
        reads on: the step that reads the spill back runs its decoding there, and their first
        start (a few seconds on a small machine) would otherwise fall inside that step. A failure
        is left for the step to meet and report."""
        def start() -> None:
            with suppress(Exception):
                spark = self._spark()
                slots = spark.sparkContext.defaultParallelism
                spark.range(0, slots, 1, slots).mapInArrow(_warm, "id LONG").collect()

        if self._warming is None:
            self._warming = threading.Thread(target=start, name="replicator-spill-warm-up", daemon=True)
            self._warming.start()

    def write(self, table: TableName, topic: str, rows: Sequence[tuple[RowChange, int, int, int]],
              ddls: Sequence[DdlEvent] = ()) -> None:
        self.warm_up()
        out = ex.EventRows()
        idx: dict[tuple[int, int], int] = {}  # a record's rows, in order (Open Protocol batches rows)
        for row, partition, offset, wm_before in rows:
            i = idx[(partition, offset)] = idx.get((partition, offset), -1) + 1
            out.add(partition, offset, i, ex.ROW, row.commit_ts, wm_before, ex.KEEP, table[0], table[1],
                    ex.row_payload(row))
        events = out.flush()
        path = self._write(pa.Table.from_batches([events]))
        self._type(table, topic, events, next((r for r, *_ in rows if r.columns), rows[0][0]), ddls)
        self._files.setdefault(table, []).append(path)
        self._topic[table] = topic
        self._sources.pop(table, None)
        self.rows += len(rows)

    def _write(self, data: pa.Table) -> str:
        sink = pa.BufferOutputStream()
        pq.write_table(data, sink)
        self._n += 1
        path = self.io.join(self.root, f"{self._n:08d}.parquet")
        if is_url(path):
            self.io.write(path, sink.getvalue().to_pybytes())
        else:  # scratch: a crash re-reads these rows from Kafka, so no fsync (a file a table and spill)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(sink.getvalue().to_pybytes())
        return path

    def _type(self, table: TableName, topic: str, events: pa.RecordBatch, first: RowChange,
              ddls: Sequence[DdlEvent]) -> None:
        """The rows decoded under the table's spec now (`spec_of`: the catalog's, its CREATE's among
        `ddls`, or what it will infer from `first`), while its shape is the one of its earlier
        spills; else none of its spans read typed rows (they read the events)."""
        spec = self._spec_of(table, first, ddls)
        typed = self._typed.get(table) if table in self._typed else (_Typed(spec) if spec else None)
        if typed is None:
            self._typed[table] = None
            return
        if spec is None or ex.change_shape(spec) != typed.shape:
            self._untype(table, typed, "its spec changed")
            return
        hashes: list[int] = []
        try:
            data = pa.Table.from_batches(
                list(ex.change_batches([events], topic=topic, spec=typed.spec, key_hashes=hashes)),
                schema=ex.change_schema(typed.spec))
        except (ReplicatorError, pa.ArrowException, KeyError, TypeError, ValueError) as exc:
            # The span decodes the events when it is applied, and says then what is wrong, where.
            self._untype(table, typed, str(exc))
            return
        typed.files.append(self._write(typed.index.add(data, hashes)))
        typed.rows.append(data.num_rows)
        self._typed[table] = typed

    def _untype(self, table: TableName, typed: _Typed, why: str) -> None:
        """The table's spans read its events: its typed files go."""
        log.debug("spilled rows of %s.%s read as events: %s", table[0], table[1], why)
        self.io.remove_listed(self.root, typed.files)
        self._typed[table] = None

    def typed(self, table: TableName) -> TypedRows | None:
        """The table's spilled rows as they were decoded when spilled, if they all were."""
        typed = self._typed.get(table)
        return None if typed is None else TypedRows(typed.shape, tuple(typed.files), typed.index, self._read,
                                                    self.budget, tuple(typed.rows))

    def _read(self, path: str) -> pa.Table:
        data = self.io.read(path)
        if data is None:
            raise ReplicatorError(f"spill file {path} is gone before its rows were applied; the run's "
                                  "spill directory was changed by something else: run again (its rows are re-read)")
        # One file's reader, not `pq.read_table`: that one imports pyarrow.dataset, several MiB of
        # the driver's RSS for nothing a single file needs.
        return pq.ParquetFile(pa.BufferReader(data), pre_buffer=False).read(use_threads=False)

    def source(self, table: TableName) -> SparkBatch:
        from replicator.sources.spark_reader import SparkBatch

        batch = self._sources.get(table)
        if batch is None:  # its own files only: a read opens no other table's
            files, topic = self._files[table], self._topic[table]
            spark = self._spark()

            def events(files: list[str] = files) -> DataFrame:
                return spark.read.schema(ex.EVENTS_DDL).parquet(*files)

            batch = SparkBatch(spark, topic, None, load=events, vouched=True, typed=self.typed(table))
            self._sources[table] = batch
        return batch

    def clear(self) -> None:
        for files in self._files.values():
            self.io.remove_listed(self.root, files)
        for typed in self._typed.values():
            if typed is not None:
                self.io.remove_listed(self.root, typed.files)
        done = [t for t in self._typed.values() if t is not None]
        log.debug("spill of %d rows applied; %d of %d tables read typed", self.rows, len(done), len(self._files))
        self._files.clear()
        self._topic.clear()
        self._typed.clear()
        self._sources.clear()
        self.rows = 0

    def close(self) -> None:
        """The run ends: nothing of its spill stays (it holds the lease, so the spill is its own)."""
        self.clear()
        self.io.remove_tree(self.parent)
