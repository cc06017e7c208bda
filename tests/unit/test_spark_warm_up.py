"""The engine starts Spark in the background while it reads (WarehouseApplier.warm_up, engine/spark_edge.py):
one session however many threads ask for it, and a run never ends while that start is under way."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from replicator.engine.context import RunContext
from replicator.engine.pipeline import RunOptions, RunSummary, WarehouseApplier
from replicator.engine.spark_edge import SparkEdge
from replicator.metrics import Metrics
from replicator.warehouse import State, Warehouse


class SlowSpark:
    """Stands in for the session a slow JVM start returns."""


def _applier(tmp_path: Path, monkeypatch: Any, started: list[float]) -> WarehouseApplier:
    def slow_get_spark(app_name: str = "replicator") -> Any:
        started.append(time.monotonic())
        time.sleep(0.3)
        return SlowSpark()

    monkeypatch.setattr("replicator.runtime.spark.get_spark", slow_get_spark)
    warehouse, options, metrics = Warehouse(tmp_path), RunOptions(warehouse=str(tmp_path), protocol="open"), Metrics()
    edge = SparkEdge(warehouse, options, metrics)
    return WarehouseApplier(RunContext(warehouse, options, RunSummary(), metrics, "test", edge, State()))


def test_warm_up_starts_spark_once_in_the_background(tmp_path: Path, monkeypatch: Any) -> None:
    started: list[float] = []
    applier = _applier(tmp_path, monkeypatch, started)
    t0 = time.monotonic()
    applier.warm_up()
    assert time.monotonic() - t0 < 0.2  # did not wait for the start
    seen: list[Any] = []
    threads = [threading.Thread(target=lambda: seen.append(applier.delta.spark)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    applier.warm_up()  # already started: nothing more
    assert len(started) == 1
    assert len({id(s) for s in seen}) == 1 and isinstance(seen[0], SlowSpark)


def test_close_waits_for_a_start_under_way(tmp_path: Path, monkeypatch: Any) -> None:
    started: list[float] = []
    applier = _applier(tmp_path, monkeypatch, started)
    applier.warm_up()
    applier.close()
    assert started and applier.edge.started


def test_a_run_makes_full_collections_rare_and_restores_the_thresholds_after() -> None:
    """While rows are buffered, the collector's oldest generation waits for 1,000 young collections
    (not 10): every full collection re-scans every buffered row (Engine.run, engine/gcpolicy.py)."""
    import gc

    from replicator.engine.gcpolicy import FULL_COLLECTION_EVERY, few_full_collections

    before = gc.get_threshold()
    with few_full_collections():
        assert gc.get_threshold() == (before[0], before[1], max(before[2], FULL_COLLECTION_EVERY))
    assert gc.get_threshold() == before
