"""Table names and a DDL's scope: which tables a DDL is a barrier for (engine/plan.py).

It lives at the bottom of the package because the engine (which plans steps around DDLs), the
Spark reader (which groups rows by table), the Delta side (which tells a DDL's scope,
delta/ddl/scope.py) and the shard map (shards.py) all use it, and the Delta side sits below the
engine and the reader. `TableName` is defined here only. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["EVERYTHING", "NOTHING", "DdlScope", "TableName"]

TableName = tuple[str, str]
"""(schema, table) as TiDB names them."""


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
