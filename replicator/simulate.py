"""Compatibility re-export: the documented simulator API (`Simulation`, `SimConfig`, `produce`,
`write_archive`, ...) now lives in `replicator.sim`."""

from replicator.sim.simulate import (
    ExpectedState,
    SimConfig,
    SimMessage,
    SimStats,
    Simulation,
    SinkReport,
    expected_state,
    generate,
    produce,
    resolve_ddl_kinds,
    supported_ddl_kinds,
    write_archive,
)

__all__ = [
    "ExpectedState",
    "SimConfig",
    "SimMessage",
    "SimStats",
    "Simulation",
    "SinkReport",
    "expected_state",
    "generate",
    "produce",
    "resolve_ddl_kinds",
    "supported_ddl_kinds",
    "write_archive",
]
