"""Compatibility re-export: the documented `replicator.simcheck.check_warehouse` now lives in
`replicator.sim.simcheck`."""

from replicator.sim.simcheck import (
    ActualTable,
    canonical,
    check_warehouse,
    compare_tables,
    read_warehouse,
    spark_value_to_json,
)

__all__ = ["ActualTable", "canonical", "check_warehouse", "compare_tables", "read_warehouse", "spark_value_to_json"]
