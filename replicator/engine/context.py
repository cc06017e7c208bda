"""What one run's steps are applied with, decided once: `RunContext`.

Why: the step applier (applier.py) and its parts need the same things (the warehouse and its
loaded state, the run's options, summary and metrics, the Spark side, the catalog and shard
decisions). The engine (pipeline.py) decides all of them under the warehouse's lease before the
first step and builds the applier from this one value, so nothing is set on it afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from replicator.engine.options import RunOptions
from replicator.engine.sharding import ShardFilter
from replicator.engine.spark_edge import SparkEdge
from replicator.engine.summary import RunSummary
from replicator.metrics import Metrics
from replicator.warehouse import State, Warehouse

if TYPE_CHECKING:
    from replicator.delta.catalog import CatalogConfig


def _nothing() -> None:
    pass


@dataclass(frozen=True)
class RunContext:
    """One run's parts, as the engine decided them before its first step."""

    warehouse: Warehouse
    options: RunOptions
    summary: RunSummary
    metrics: Metrics
    source_name: str
    edge: SparkEdge  # the Delta and DDL appliers and the MERGE pool, started on first use
    state: State  # loaded under the lease; the applier updates it and saves it with each step
    catalog: CatalogConfig | None = None  # where tables are registered by name (None: nowhere)
    shard: ShardFilter | None = None  # --shard: other shards' rows not dropped when decoded
    after_commit: Callable[[], None] = _nothing  # after each step's progress is saved (the engine's gauges)
