"""Table names, a table's shape, and a DDL's scope: which tables a DDL is a barrier for.

It lives at the bottom of the package because the engine (which plans steps around DDLs,
engine/plan.py), the Spark reader (which groups rows by table), the Delta side (which tells a DDL's
scope, delta/ddl/scope.py, and maps types to a `TableSpec`, delta/typemap.py), the warehouse's
records (which keep each table's `TableSpec`, warehouse/store.py) and the shard map (shards.py) all
use it, and the Delta side sits below the engine and the reader. `TableName`, `ColumnSpec` and
`TableSpec` are defined here only. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

__all__ = ["EVERYTHING", "NOTHING", "ColumnSpec", "DdlScope", "TableName", "TableSpec"]

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


@dataclass(frozen=True)
class ColumnSpec:
    """One replicated column: its Delta type plus the upstream facts values need (labels, unsigned)."""

    name: str
    spark_type: str
    tidb_type: str = ""
    labels: tuple[str, ...] = ()
    is_set: bool = False
    nullable: bool = True
    default: str | None = None  # upstream DEFAULT as SQL text, None when absent
    comment: str | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["labels"] = list(self.labels)
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> ColumnSpec:
        return ColumnSpec(**{**d, "labels": tuple(d.get("labels", ()))})


@dataclass(frozen=True)
class TableSpec:
    """Shape of a replicated table."""

    schema: str
    table: str
    columns: tuple[ColumnSpec, ...]
    key: tuple[str, ...]
    comment: str | None = None
    partition_def: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def column(self, name: str) -> ColumnSpec | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "table": self.table,
            "columns": [c.to_json() for c in self.columns],
            "key": list(self.key),
            "comment": self.comment,
            "partition_def": self.partition_def,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> TableSpec:
        return TableSpec(
            schema=d["schema"],
            table=d["table"],
            columns=tuple(ColumnSpec.from_json(c) for c in d["columns"]),
            key=tuple(d["key"]),
            comment=d.get("comment"),
            partition_def=d.get("partition_def"),
        )

    def with_columns(self, columns: Sequence[ColumnSpec]) -> TableSpec:
        return replace(self, columns=tuple(columns))
