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

from replicator.events import RowChange
from replicator.sources import executor as ex
from replicator.storage import fileio_for, is_url
from replicator.tables import TableName

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.sources.spark_reader import SparkBatch

log = logging.getLogger("replicator")


def _warm(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A Python worker's first task: what the spill's reading needs, imported (`SpillFiles.warm_up`)."""
    ex.change_schema  # noqa: B018  (this module, and so the executor's decoder, is imported by now)
    yield from batches


class SpillFiles:
    """A run's spill (engine/rows.py `Spill`): Parquet files under `root`/<run>/."""

    def __init__(self, root: str, spark: Callable[[], SparkSession]) -> None:
        self.io = fileio_for(root)
        self.parent = root
        self.root = self.io.join(root, uuid.uuid4().hex[:12])
        self._spark = spark
        self.rows = 0
        self._files: dict[TableName, list[str]] = {}  # a table's files
        self._topic: dict[TableName, str] = {}
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

    def write(self, table: TableName, topic: str, rows: Sequence[tuple[RowChange, int, int, int]]) -> None:
        self.warm_up()
        out = ex.EventRows()
        idx: dict[tuple[int, int], int] = {}  # a record's rows, in order (Open Protocol batches rows)
        for row, partition, offset, wm_before in rows:
            i = idx[(partition, offset)] = idx.get((partition, offset), -1) + 1
            out.add(partition, offset, i, ex.ROW, row.commit_ts, wm_before, ex.KEEP, table[0], table[1],
                    ex.row_payload(row))
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_batches([out.flush()]), sink)
        self._n += 1
        path = self.io.join(self.root, f"{self._n:08d}.parquet")
        if is_url(path):
            self.io.write(path, sink.getvalue().to_pybytes())
        else:  # scratch: a crash re-reads these rows from Kafka, so no fsync (a file a table and spill)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_bytes(sink.getvalue().to_pybytes())
        self._files.setdefault(table, []).append(path)
        self._topic[table] = topic
        self._sources.pop(table, None)
        self.rows += len(rows)

    def source(self, table: TableName) -> SparkBatch:
        from replicator.sources.spark_reader import SparkBatch

        batch = self._sources.get(table)
        if batch is None:  # its own files only: a read opens no other table's
            files, topic = self._files[table], self._topic[table]
            spark = self._spark()
            events = spark.read.schema(ex.EVENTS_DDL).parquet(*files)
            batch = self._sources[table] = SparkBatch(spark, topic, events, vouched=True)
        return batch

    def clear(self) -> None:
        for files in self._files.values():
            self.io.remove_listed(self.root, files)
        log.debug("spill of %d rows applied", self.rows)
        self._files.clear()
        self._topic.clear()
        self._sources.clear()
        self.rows = 0

    def close(self) -> None:
        """The run ends: nothing of its spill stays (it holds the lease, so the spill is its own)."""
        self.clear()
        self.io.remove_tree(self.parent)
