"""The run's Spark side, built on first use: the Delta and DDL appliers, the MERGE pool and its sessions."""

from __future__ import annotations

import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import suppress
from typing import TYPE_CHECKING

from replicator.engine.options import RunOptions
from replicator.engine.schedule import InlineExecutor
from replicator.metrics import Metrics
from replicator.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.delta.ddl import DdlApplier
    from replicator.delta.writer import TableWriter


class SparkEdge:
    """The Delta applier on the main session (started in the background by `warm_up`, or on first
    use), the DDL applier over it, and where a step's MERGEs run (`executor`, `session_delta`)."""

    def __init__(self, warehouse: Warehouse, options: RunOptions, metrics: Metrics,
                 spark: SparkSession | None = None) -> None:
        self.warehouse = warehouse
        self.options = options
        self.metrics = metrics
        self._spark = spark
        self._delta: TableWriter | None = None
        self._ddl: DdlApplier | None = None
        self._executor: Executor | None = None
        self._local = threading.local()
        self._delta_lock = threading.Lock()
        self._warming: threading.Thread | None = None

    @property
    def delta(self) -> TableWriter:
        with self._delta_lock:  # the warm-up thread may be building it
            if self._delta is None:
                from replicator.delta.writer import TableWriter
                from replicator.runtime import commitfence
                from replicator.runtime.spark import get_spark

                delta = TableWriter(self._spark or get_spark(), table_features=self.options.table_features)
                lease = self.warehouse.lease
                if lease is not None and self.warehouse.on_object_store:  # commits fenced in the JVM too
                    commitfence.arm(delta.spark, lease, self.warehouse.root)
                delta.schema_change, delta.rewrite_limit = self.options.schema_change, self.options.rewrite_limit
                delta.fence = self.warehouse.fence  # every Delta statement: only while this run holds the lease
                delta.epoch = self.warehouse.epoch  # and every commit says under which lease epoch
                delta.on_conflict = self.metrics.conflict_retry
                self._delta = delta
            return self._delta

    @property
    def started(self) -> bool:
        """Whether Spark is up for this run (its table writer built), by a warm-up or a first use."""
        return self._delta is not None

    def warm_up(self) -> None:
        """Start the Spark session in the background while the engine reads and decodes.

        The JVM's start (6 s on the 2-core machine) then overlaps the read of a catch-up run
        instead of following it. A failure here is left for the first real use of `delta` to
        raise, where the run reports it; the engine calls this only when there is data to read.
        """
        def start() -> None:
            with suppress(Exception):
                _ = self.delta

        if not self.started and self._warming is None:
            self._warming = threading.Thread(target=start, name="replicator-spark-start", daemon=True)
            self._warming.start()

    @property
    def ddl(self) -> DdlApplier:
        if self._ddl is None:
            from replicator.delta.ddl import DdlApplier

            self._ddl = DdlApplier(self.delta, self.warehouse)
        return self._ddl

    @property
    def executor(self) -> Executor:
        """Where a step's MERGEs run: inline for parallelism 1, else a pool whose threads each hold
        their own Spark session (so one write's userMetadata and MERGE session confs
        never reach another), in a FAIR scheduler pool (so no table's jobs starve)."""
        if self._executor is None:
            n = self.options.apply_parallelism
            if n <= 1:
                self._executor = InlineExecutor()
            else:
                self._executor = ThreadPoolExecutor(n, thread_name_prefix="replicator-apply",
                                                    initializer=self._start_worker)
        return self._executor

    def _start_worker(self) -> None:
        from replicator.runtime.spark import APPLY_POOL

        session = self.delta.spark.newSession()
        session.sparkContext.setLocalProperty("spark.scheduler.pool", APPLY_POOL)
        self._local.delta = self.delta.for_session(session)

    def session_delta(self) -> TableWriter:
        """The calling thread's Delta applier: a pool worker's own, else the main one."""
        return getattr(self._local, "delta", None) or self.delta

    def close(self) -> None:
        """Stop the MERGE pool (its threads and their sessions) at the end of a run; a Spark start
        still under way (a run that ended before it needed Spark) is waited for, so the process
        never exits or stops Spark in the middle of it."""
        if self._warming is not None:
            self._warming.join()
            self._warming = None
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
