"""How one step is applied: each table's rows split at the DDLs that affect that table, and what
must wait for what. Pure logic (no Spark), unit- and property-tested; `engine/schedule.py` runs a
plan, concurrently where it allows.

A DDL is a barrier only for the tables in its scope (the table itself, both names of a RENAME,
the source of CREATE TABLE LIKE, every table of a DROP SCHEMA; every table when the scope cannot
be told). For each table in scope, every row at or before the DDL's commit ts is applied before it
and none after; rows of other tables flow past it. DDLs themselves apply one at a time, in commit
order (they change the catalog).

Idempotence: a segment's txnVersion is the commit ts of the DDL it precedes, or the step's upper
bound for a table's last segment, so one table's versions rise within a step and across steps,
and a re-run skips exactly the segments a crashed run committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from replicator.events import DdlEvent, RowChange

TableName = tuple[str, str]


@dataclass(frozen=True)
class DdlScope:
    """The tables a DDL affects, by name, case-insensitively (MySQL table names may be)."""

    tables: frozenset[TableName] = frozenset()
    schemas: frozenset[str] = frozenset()  # every table of these schemas (DROP SCHEMA)
    everything: bool = False  # the scope cannot be told: a barrier for every table
    # Re-applying the DDL after rows that follow it were applied changes nothing of theirs (catalog
    # only, or an idempotent Delta change that leaves columns and rows alone: CREATE, RENAME, DROP
    # TABLE, comments, defaults, keys), so those rows may share its step (window.py `Step`).
    rerunnable: bool = False

    @classmethod
    def of(cls, *names: TableName, schemas: Sequence[str] = (), rerunnable: bool = False) -> DdlScope:
        return cls(frozenset((s.lower(), t.lower()) for s, t in names), frozenset(s.lower() for s in schemas),
                   rerunnable=rerunnable)

    def covers(self, table: TableName) -> bool:
        if self.everything:
            return True
        schema, name = table[0].lower(), table[1].lower()
        return schema in self.schemas or (schema, name) in self.tables


EVERYTHING = DdlScope(everything=True)
NOTHING = DdlScope()


@dataclass(frozen=True)
class Segment:
    """Rows of one table applied by one MERGE.

    `after`: how many of the step's DDLs must be applied before it starts; `before`: the index of
    the DDL that waits for it (None for a table's last segment); `version`: its txnVersion.
    """

    table: TableName
    rows: list[RowChange]
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


def plan_step(hi: int, rows: dict[TableName, list[RowChange]], ddls: Sequence[DdlEvent],
              scope_of: Callable[[DdlEvent], DdlScope]) -> StepPlan:
    """Split each table's rows (in commit-ts order) at the DDLs whose scope covers it."""
    scopes = tuple(scope_of(d) for d in ddls)
    segments: list[Segment] = []
    for table, table_rows in sorted(rows.items()):
        barriers = [j for j, sc in enumerate(scopes) if sc.covers(table)]
        start, after = 0, 0
        for j in barriers:
            ts = ddls[j].commit_ts
            end = start
            while end < len(table_rows) and table_rows[end].commit_ts <= ts:
                end += 1
            if end > start:
                segments.append(Segment(table, table_rows[start:end], ts, after, j))
            start, after = end, j + 1
        if start < len(table_rows):
            segments.append(Segment(table, table_rows[start:], hi, after, None))
    return StepPlan(hi, tuple(ddls), scopes, tuple(segments))
