"""DDL events -> Delta operations and catalog changes.

One declarative table (`DDL_TYPES`) maps every TiDB DDL type code (1-36) to its name and to a
Delta operation, or to an explicit "no-op: reason" / "unsupported: reason"; the DDL table
of docs/ddl.md is rendered from it (`render_ddl_markdown`). The query is parsed with sqlglot (MySQL
dialect), and with small hand-parsers (`replicator.mysql`) for what sqlglot cannot read;
upstream SQL text is never executed. Every identifier in generated Spark SQL is backtick-quoted.

Idempotence: the engine applies a DDL once (ledger), but a crash between a DDL's Delta commit
and the state commit re-applies it against the *old* catalog. So each handler derives the new
catalog from the old one and checks the live Delta schema before every change
(check-before-alter). A DdlError restores the catalog as it was, so `--on-ddl-error skip`
never commits half a DDL to the catalog.
"""

from __future__ import annotations

from replicator.delta.ddl.base import DdlOutcome, _context
from replicator.delta.ddl.ops import DdlOps
from replicator.delta.ddl.rules import DDL_TYPES
from replicator.errors import DdlError
from replicator.events import DdlCode, DdlEvent
from replicator.warehouse import State, TableEntry

_ADDS_ONLY = frozenset({DdlCode.CREATE_SCHEMA, DdlCode.CREATE_TABLE})
"""Codes whose handlers add catalog entries and change no existing one."""


def _rollback_copy(state: State, ddl: DdlEvent) -> dict[str, TableEntry]:
    """The catalog's tables as a failing DDL must leave them, taken before every DDL. Handlers
    replace an entry's fields (never mutate a nested value), so a shallow copy of each entry is
    enough, and a CREATE keeps the entries themselves: a changefeed opening with a thousand
    CREATE TABLEs would otherwise copy the growing catalog a thousand times (quadratic)."""
    if ddl.ddl_type in _ADDS_ONLY:
        return dict(state.tables)
    return {uid: e.model_copy() for uid, e in state.tables.items()}


class DdlApplier(DdlOps):
    """Applies DDL events to the catalog (`State.tables`) and the Delta tables it points at."""

    def apply(self, state: State, ddl: DdlEvent) -> DdlOutcome:
        """Apply one DDL event to `state` and Delta.

        DdlError (naming code, query and Kafka position) on an unknown code, an unparsable query or
        an unsupported change; the catalog is then exactly as before, so skipping it is safe.
        """
        rule = DDL_TYPES.get(ddl.ddl_type)
        if rule is None:
            raise DdlError(_context(f"unknown DDL type code {ddl.ddl_type}", ddl))
        if rule.kind == "no-op":
            return DdlOutcome("no-op", f"{rule.name}: {rule.operation}")
        if rule.handler is None:
            raise DdlError(_context(f"DDL type {ddl.ddl_type} ({rule.name}) is {rule.operation}", ddl))
        tables = _rollback_copy(state, ddl)
        schemas = list(state.schemas)
        self.step = state.steps + 1
        try:
            return rule.handler(self, state, ddl)
        except DdlError as exc:
            state.tables, state.schemas = tables, schemas
            raise DdlError(_context(str(exc), ddl, rule.name)) from None
