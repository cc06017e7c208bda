"""A step's DDLs: each applied to Delta (or dead-lettered), and its CREATE TABLEs created ahead in parallel."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from replicator.engine.deadletters import DeadLetters
from replicator.engine.merging import WrittenKeys
from replicator.engine.options import RunOptions
from replicator.engine.plan import StepPlan
from replicator.engine.schedule import InlineExecutor
from replicator.engine.spark_edge import SparkEdge
from replicator.engine.summary import RunSummary
from replicator.errors import DdlError
from replicator.events import DdlCode, DdlEvent
from replicator.logformat import position
from replicator.metrics import Metrics
from replicator.warehouse import State, Warehouse

if TYPE_CHECKING:
    from replicator.tables import TableSpec

log = logging.getLogger("replicator")


class DdlSteps:
    """Applies a step's DDLs through the DDL applier (delta/ddl/), counting them in the summary and
    the metrics; the tables each one created, renamed, dropped or recovered go to `touched`, and
    `written` forgets the keys of those it emptied (engine/merging.py)."""

    def __init__(self, edge: SparkEdge, warehouse: Warehouse, options: RunOptions, summary: RunSummary,
                 metrics: Metrics, dead_letters: DeadLetters, written: WrittenKeys) -> None:
        self.edge = edge
        self.warehouse = warehouse
        self.options = options
        self.summary = summary
        self.metrics = metrics
        self.dead_letters = dead_letters
        self.written = written
        self.touched: set[str] = set()  # uids this step created, renamed, dropped or recovered

    def apply(self, state: State, ddl: DdlEvent, versions: dict[str, int]) -> dict[str, Any]:
        """One DDL; `versions` gets the Delta version of each live table it changed."""
        info: dict[str, Any] = {"type": ddl.ddl_type, "query": ddl.query, "schema": ddl.schema, "table": ddl.table,
                                "commit_ts": ddl.commit_ts}
        from replicator.delta.ddl.rules import DDL_TYPES

        rule = DDL_TYPES.get(ddl.ddl_type)
        rule_name = rule.name if rule is not None else "unknown"
        try:
            with self.metrics.table_context(f"{ddl.schema}.{ddl.table}" if ddl.table else ddl.schema):
                outcome = self.edge.ddl.apply(state, ddl)
        except DdlError as exc:
            if self.options.on_ddl_error != "skip":
                exc.commit_ts = ddl.commit_ts  # the loop then applies what precedes it before stopping
                raise
            self.dead_letters.ddl(ddl, exc)
            info["outcome"] = f"skipped: {exc}"
            self.summary.ddl_skipped += 1
            self.metrics.ddl(ddl.ddl_type, rule_name, [], applied=False)
            return info
        info["outcome"] = f"{outcome.action}: {outcome.detail}"
        # Now, not earlier or later: the table's rows before the DDL are written (their keys
        # added), those after it are not yet (engine/plan.py), and nothing else writes it meanwhile.
        for uid in outcome.emptied:
            self.written.reset(uid)
        self.touched.update(outcome.tables)
        self.summary.ddl_applied += 1
        if outcome.reader_changes:
            info["reader_changes"] = list(outcome.reader_changes)
            self.summary.reader_changes.extend(outcome.reader_changes)
        changed: list[str] = []
        # A table this CREATE made (here or ahead, in this JVM) has its commit as the snapshot
        # Delta installed: no log listing, which would cost a changefeed's first step a Spark
        # round trip per table.
        created = outcome.action == "applied" and ddl.ddl_type == DdlCode.CREATE_TABLE
        for uid in outcome.tables:
            entry = state.tables.get(uid)
            if entry is not None and entry.status == "live":
                if created:
                    versions[uid] = self.edge.delta.cached_version(entry.path)
                    if versions[uid] == 0:  # only the CREATE (a crashed run's table has its writes after it)
                        self.edge.delta.holds_nothing(entry.path, uid)
                else:
                    versions[uid] = self.edge.delta.table_version(entry.path)
                changed.append(f"{entry.schema_name}.{entry.table}")
        self.metrics.ddl(ddl.ddl_type, rule_name, changed, applied=True)
        pos = ddl.position
        log.info("DDL at %s: %s -> %s", ddl.commit_ts, ddl.query, info["outcome"],
                 extra={"table": f"{ddl.schema}.{ddl.table}" if ddl.table else ddl.schema, "ddl_type": ddl.ddl_type,
                        "commit_ts": ddl.commit_ts, "outcome": info["outcome"],
                        "position": position(pos.topic, pos.partition, pos.offset) if pos else None})
        return info

    def create_ahead(self, state: State, plan: StepPlan) -> None:
        """Create the Delta tables of the step's CREATE TABLEs concurrently, before the DDLs run one
        at a time (a changefeed over hundreds of tables starts with as many CREATE TABLEs, each a
        Delta commit of fixed cost). Only tables whose name no other DDL of the step touches and
        that the catalog does not have: then the CREATE's outcome is known, and creating a table at
        its deterministic path is idempotent (`CREATE TABLE IF NOT EXISTS`)."""
        if isinstance(self.edge.executor, InlineExecutor):
            return
        from replicator.delta.ddl import planned_table

        todo: list[tuple[str, TableSpec]] = []
        for i, ddl in enumerate(plan.ddls):
            planned = planned_table(ddl)
            if planned is None:
                continue
            spec, uid = planned
            name = (spec.schema, spec.table)
            if state.live_table(*name) is not None or any(
                    sc.covers(name) for j, sc in enumerate(plan.scopes) if j != i):
                continue
            todo.append((self.warehouse.new_table_path(spec.schema, spec.table, uid), spec))
        if len(todo) < 2:
            return
        list(self.edge.executor.map(lambda job: self.edge.session_delta().create_table(*job), todo))
        self.edge.ddl.created.update(path for path, _ in todo)
