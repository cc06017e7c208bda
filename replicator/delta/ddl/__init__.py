"""DDL events -> Delta operations and catalog changes, one module per concern: `base` (the outcome
type, the handler signature, catalog helpers), `ops` (the Delta helpers the handlers run through),
`applier` (the `DdlApplier`: those helpers and the dispatch), `tables` (schemas, tables,
partitions), `alter` (ALTER TABLE), `rules` (the code -> operation table `DDL_TYPES` and the
DDL table of docs/ddl.md rendered from it)."""

from replicator.delta.ddl.applier import DdlApplier
from replicator.delta.ddl.base import TMP_PREFIX, DdlOutcome, Handler, Kind
from replicator.delta.ddl.rules import (
    DDL_NAMES,
    DDL_TYPES,
    HANDLERS,
    DdlRule,
    doc_region,
    render_ddl_markdown,
    update_doc,
)
from replicator.delta.ddl.tables import adopt_handle_key, planned_table

__all__ = [
    "DDL_NAMES",
    "DDL_TYPES",
    "HANDLERS",
    "TMP_PREFIX",
    "DdlApplier",
    "DdlOutcome",
    "DdlRule",
    "Handler",
    "Kind",
    "adopt_handle_key",
    "doc_region",
    "planned_table",
    "render_ddl_markdown",
    "update_doc",
]
