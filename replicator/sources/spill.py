"""Rows a full buffer moves out of driver memory, and reads back with Spark as a step's spans.

Why: a step costs about the same whatever its size (a commit per busy table), so a catch-up whose
buffer bound (`--max-buffer-rows`) forced a step each time it filled made many small steps (issue
49). The windower instead moves complete rows here (`Windower.spill_ready`) and applies them as
one step when one is due (caught up, the interval, a stop, a failure, `--spill-rows` reached): the
bound on memory holds, and the step is as large as the backlog.

The files are the Spark reader's events (sources/executor.py `EVENTS_SCHEMA`, one Parquet file a
table and spill), so a step reads them as that reader's batch does (`SparkBatch`, `vouched`: the
driver saw every row), one batch per topic. They live in the warehouse (`_replicator/spill/<run>/`,
every executor reads it, on every store), are deleted once applied, and the next run holding the
lease deletes what a crashed one left: a crash loses nothing, since the windower's restart
cursors stay at the spilled rows' offsets until they are applied.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from replicator.events import RowChange
from replicator.sources import executor as ex
from replicator.storage import fileio_for
from replicator.tables import TableName

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.sources.spark_reader import SparkBatch

log = logging.getLogger("replicator")


class SpillFiles:
    """A run's spill (engine/rows.py `Spill`): Parquet files under `root`/<run>/."""

    def __init__(self, root: str, spark: Callable[[], SparkSession]) -> None:
        self.io = fileio_for(root)
        self.parent = root
        self.root = self.io.join(root, uuid.uuid4().hex[:12])
        self._spark = spark
        self.rows = 0
        self._files: dict[str, list[str]] = {}  # topic -> its files
        self._topic: dict[TableName, str] = {}
        self._sources: dict[str, SparkBatch] = {}
        self._n = 0

    def forget_crashed(self) -> None:
        """Delete what earlier runs left (a crash before they applied it): this run holds the lease."""
        self.io.remove_tree(self.parent)

    def write(self, table: TableName, topic: str, rows: Sequence[tuple[RowChange, int, int, int]]) -> None:
        cols: list[list[object]] = [[] for _ in ex.EVENTS_SCHEMA]
        idx: dict[tuple[int, int], int] = {}  # a record's rows, in order (Open Protocol batches rows)
        for row, partition, offset, wm_before in rows:
            i = idx[(partition, offset)] = idx.get((partition, offset), -1) + 1
            for col, value in zip(cols, (partition, offset, i, ex.ROW, row.commit_ts, wm_before, ex.KEEP,
                                         table[0], table[1], ex.row_payload(row)), strict=True):
                col.append(value)
        arrays = [pa.array(c, type=f.type) for c, f in zip(cols, ex.EVENTS_SCHEMA, strict=True)]
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_arrays(arrays, schema=ex.EVENTS_SCHEMA), sink)
        self._n += 1
        path = self.io.join(self.root, f"{self._n:08d}.parquet")
        self.io.write(path, sink.getvalue().to_pybytes())
        self._files.setdefault(topic, []).append(path)
        self._topic[table] = topic
        self._sources.pop(topic, None)
        self.rows += len(rows)

    def source(self, table: TableName) -> SparkBatch:
        from replicator.sources.spark_reader import SparkBatch

        topic = self._topic[table]
        batch = self._sources.get(topic)
        if batch is None:
            spark = self._spark()
            events = spark.read.schema(ex.EVENTS_DDL).parquet(*self._files[topic])
            batch = self._sources[topic] = SparkBatch(spark, topic, events, vouched=True)
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
