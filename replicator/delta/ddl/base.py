"""What every DDL handler shares: the outcome type, the handler signature and small catalog helpers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sqlglot import exp

from replicator.errors import DdlError
from replicator.events import DdlEvent
from replicator.tables import ColumnSpec, TableSpec
from replicator.warehouse import State, TableEntry

if TYPE_CHECKING:
    from pyspark.sql.types import StructField

    from replicator.delta.ddl.ops import DdlOps



@dataclass(frozen=True)
class DdlOutcome:
    """What a DDL did: 'applied' or 'no-op' (with the reason); touched table uids for the windows log;
    the tables whose reader requirements it changed (a feature enabled for a metadata-only change:
    table, feature, why, readers after, ddl, commit_ts) for the run's summary; the tables it left
    without a row (`emptied`: TRUNCATE), whose keys the run's written-keys guard forgets
    (engine/merging.py)."""

    action: str
    detail: str
    tables: tuple[str, ...] = ()
    reader_changes: tuple[dict[str, Any], ...] = ()
    emptied: tuple[str, ...] = ()


Handler = Callable[["DdlOps", State, DdlEvent], DdlOutcome]
Kind = Literal["apply", "no-op", "unsupported"]

TMP_PREFIX = "__replicator_retype_"
"""Temporary column of a type rewrite (MODIFY COLUMN that Delta type widening cannot do)."""


def _context(reason: str, ddl: DdlEvent, name: str | None = None) -> str:
    """The error text: reason, then DDL code/name, the query and the Kafka position."""
    if "[DDL type " in reason:
        return reason
    what = f"DDL type {ddl.ddl_type}" + (f" ({name})" if name else "")
    where = f", {ddl.position}" if ddl.position else ""
    return f"{reason} [{what}, query {ddl.query!r}{where}]"


def _lookup(spec: TableSpec, name: str) -> ColumnSpec | None:
    """Column by name, case-insensitively (MySQL column names are)."""
    return spec.column(name) or next((c for c in spec.columns if c.name.lower() == name.lower()), None)


def _field(fields: dict[str, StructField], name: str) -> StructField | None:
    return fields.get(name) or next((f for k, f in fields.items() if k.lower() == name.lower()), None)


def _set_spec(entry: TableEntry, spec: TableSpec) -> None:
    entry.spec = spec.to_json()


def _target(table: exp.Expression | None, ddl: DdlEvent) -> tuple[str, str]:
    if not isinstance(table, exp.Table):
        raise DdlError("statement names no table")
    return (table.db or ddl.schema), table.name


def _unknown(schema: str, table: str) -> DdlOutcome:
    """A DDL on a table the catalog does not know: it predates the stream and has no rows yet."""
    return DdlOutcome("no-op", f"table {schema}.{table} is not in the catalog (created before the stream, no rows "
                               "replicated yet); its shape will be inferred from its first row event")


def _outcome(done: Sequence[str], uid: str, nothing: str) -> DdlOutcome:
    return DdlOutcome("applied" if done else "no-op", "; ".join(done) or nothing, (uid,))
