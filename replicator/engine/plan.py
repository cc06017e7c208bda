"""How one step is applied: each table's rows split at the DDLs that affect that table, and what
must wait for what. Pure logic (no Spark), unit- and property-tested; `engine/schedule.py` runs a
plan, concurrently where it allows.

A DDL is a barrier only for the tables in its scope (the table itself, both names of a RENAME,
the source of CREATE TABLE LIKE, every table of a DROP SCHEMA; every table when the scope cannot
be told). For each table in scope, every row at or before the DDL's commit ts is applied before it
and none after; rows of other tables flow past it. DDLs themselves apply one at a time, in commit
order (they change the catalog).

Idempotence: a segment's version (the applied ts its commit records, delta/writer.py) is the commit
ts of the DDL it precedes, or the step's upper
bound for a table's last segment, so one table's versions rise within a step and across steps,
and a re-run skips exactly the segments a crashed run committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from replicator.engine.rows import Rows, split_rows
from replicator.events import DdlEvent
from replicator.tables import DdlScope, TableName


@dataclass(frozen=True)
class Segment:
    """Rows of one table applied by one MERGE.

    `after`: how many of the step's DDLs must be applied before it starts; `before`: the index of
    the DDL that waits for it (None for a table's last segment); `version`: the applied ts it brings
    its table to.
    """

    table: TableName
    rows: Rows
    version: int
    after: int
    before: int | None


@dataclass(frozen=True)
class StepPlan:
    hi: int
    ddls: tuple[DdlEvent, ...]
    scopes: tuple[DdlScope, ...]
    segments: tuple[Segment, ...]

    def waits_for(self, ddl_index: int) -> list[Segment]:
        """The segments DDL `ddl_index` waits for (rows of its tables before it)."""
        return [s for s in self.segments if s.before == ddl_index]


def plan_step(hi: int, rows: Mapping[TableName, Rows], ddls: Sequence[DdlEvent],
              scope_of: Callable[[DdlEvent], DdlScope]) -> StepPlan:
    """Split each table's rows (in commit-ts order) at the DDLs whose scope covers it."""
    scopes = tuple(scope_of(d) for d in ddls)
    segments: list[Segment] = []
    for table, table_rows in sorted(rows.items()):
        rest: Rows | None = table_rows
        after = 0
        for j in (j for j, sc in enumerate(scopes) if sc.covers(table)):
            if rest is None:
                break
            before, rest = split_rows(rest, ddls[j].commit_ts)
            if before is not None:
                segments.append(Segment(table, before, ddls[j].commit_ts, after, j))
            after = j + 1
        if rest is not None:
            segments.append(Segment(table, rest, hi, after, None))
    return StepPlan(hi, tuple(ddls), scopes, tuple(segments))
