"""A TiCDC workload simulator: a model upstream database and the Kafka stream TiCDC emits for it.

Why: users must be able to try the replicator without a TiDB of their own, and tests and
benchmarks need streams whose true final state is known. The model upstream holds several
tables of varied column types (signed/unsigned integers with their extremes, DECIMAL up to
(65,30), FLOAT/DOUBLE, DATE/DATETIME(6)/TIMESTAMP(3)/TIME/YEAR, JSON, unicode text and empty
strings, arbitrary bytes, ENUM/SET, BIT, NULLs) in two databases. It runs transactions of one to
dozens of rows across tables (inserts; updates with old values; deletes; primary-key changes
sent as delete + insert, as TiCDC splits them), DDL mid-stream (broadcast), resolved events per
partition at independent moments, and at-least-once replays (producer retries re-sending a few
recent events, and changefeed restarts re-sending everything after the last checkpoint). Rows
are routed to partitions by a hash of their table and key (or, with ``dispatcher="table"``, of the
table alone; ``hot_share`` makes the first table carry that share of the changes: a skewed
stream), so every change of a row stays on one partition. The stream is encoded with the
project's own encoders (Open Protocol or Craft, batched as TiCDC batches rows) and the final state
of every table is known exactly.

Deterministic per seed: the same configuration gives the same messages and the same expected
state (with ``ddl="auto"`` the DDL mix depends on what this build's ``replicator.delta.ddl``
supports; the resolved mix is recorded in the expected file). Streaming: events are generated
one transaction at a time; memory holds the live rows and a bounded replay history, so a
million events fit comfortably.

The simulator lives in modules of `replicator.sim` by concern: `columns` (column types, value
generators), `templates` (the model tables and their DDL), `model` (`SimConfig`, the live tables),
`stream` (`Simulation`), `expected` (the expected final state), `sinks` (`produce`, `write_archive`).
This module re-exports their public names (the documented import path, also via
`replicator.simulate`) and holds the `replicator simulate` command.

Pure logic: no Spark and no Kafka import here (``produce`` imports kafka-python lazily).
"""

from __future__ import annotations

import logging

from replicator.sim.columns import ColumnDef, column, f32, gen_value, quote, table_value
from replicator.sim.expected import EXPECTED_FORMAT, ExpectedState, SimStats
from replicator.sim.model import DEFAULT_START, SimConfig
from replicator.sim.sinks import SinkReport, ensure_topic, produce, write_archive
from replicator.sim.stream import SimMessage, Simulation, expected_state, generate
from replicator.sim.templates import (
    DDL_KINDS,
    TEMPLATES,
    KeyFn,
    Template,
    resolve_ddl_kinds,
    supported_ddl_kinds,
)

__all__ = [
    "DDL_KINDS",
    "DEFAULT_START",
    "EXPECTED_FORMAT",
    "TEMPLATES",
    "ColumnDef",
    "ExpectedState",
    "KeyFn",
    "SimConfig",
    "SimMessage",
    "SimStats",
    "Simulation",
    "SinkReport",
    "Template",
    "column",
    "ensure_topic",
    "expected_state",
    "f32",
    "gen_value",
    "generate",
    "produce",
    "quote",
    "resolve_ddl_kinds",
    "supported_ddl_kinds",
    "table_value",
    "write_archive",
]

log = logging.getLogger("replicator.sim.simulate")
