"""Apply the seed's statement-based binary log into Delta: ``replicator run --binlog PATH...``.

The log (``replicator.formats.binlog``) carries MySQL statements with their session variables, interleaved
by transaction and closed by Commit or Rollback events. This package replays the committed ones, in
commit order, statement by statement through Spark SQL on path-based Delta tables.

Three layers, the first two pure (unit-tested without Spark), one module each beside the shared
``model`` (statements, catalog, actions) and the state file ``binlog.json``
(``replicator.warehouse.binlog_state``, where the warehouse's table listing reads it too):

* ``TransactionAssembler`` (``assembly``) buffers Query events per Global Transaction ID (server_id, trans_id)
  until their Commit (Rollback discards) and numbers committed transactions 1, 2, 3... in log
  order: that number (``seq``) is the resume key, because trans ids may be reused.
* ``translate`` (``translate``) parses one MySQL statement with sqlglot, rejects what cannot be replayed
  deterministically, substitutes ``@variables`` as string literals, and produces Delta actions whose
  SQL is built from sqlglot-generated expressions plus backtick-quoted identifiers.
* ``BinlogApplier`` (``applier``) runs the actions through a ``DeltaSession``
  (``replicator.delta.session``) and keeps ``<warehouse>/_replicator/binlog.json``.

Exactly once: every Delta write of statement ``i`` of transaction ``seq`` runs with Delta's
idempotent-DML confs (txnAppId ``binlog/<table uid>``, txnVersion ``seq << 28 | i << 8 | step``),
so Delta itself skips a write it already committed, atomically with the data; DDL is
check-before-alter against the real Delta schema; catalog changes (CREATE/DROP TABLE) live in the
state file, which is atomically replaced after every statement together with the progress
(``seq``, statements done). A crash anywhere therefore re-runs at most the one statement in flight,
and that re-run is a no-op if its write had landed. See docs/binlog.md.
"""

from __future__ import annotations

from replicator.binlog_apply.applier import (
    APP_ID_PREFIX,
    TABLES_DIR,
    VARIABLE_SUBSTITUTE,
    BinlogApplier,
    Hook,
    Summary,
    check_paths,
)
from replicator.binlog_apply.assembly import TransactionAssembler
from replicator.binlog_apply.model import (
    DEFAULT_DATABASE,
    Action,
    AddColumn,
    Catalog,
    CreateTable,
    Dml,
    DropColumn,
    DropTable,
    Noop,
    Statement,
    Transaction,
    table_uid,
    txn_version,
)
from replicator.binlog_apply.translate import (
    NON_DETERMINISTIC,
    TABLE_PROPERTIES,
    check_deterministic,
    parse_statement,
    parse_use,
    substitute_variables,
    translate,
    verify_generated,
)
from replicator.warehouse.binlog_state import (
    STATE_FILE,
    STATE_FORMAT,
    BinlogState,
    ColumnInfo,
    InFlight,
    Position,
    TableInfo,
    load_state,
    save_state,
)

__all__ = [
    "APP_ID_PREFIX",
    "DEFAULT_DATABASE",
    "NON_DETERMINISTIC",
    "STATE_FILE",
    "STATE_FORMAT",
    "TABLES_DIR",
    "TABLE_PROPERTIES",
    "VARIABLE_SUBSTITUTE",
    "Action",
    "AddColumn",
    "BinlogApplier",
    "BinlogState",
    "Catalog",
    "ColumnInfo",
    "CreateTable",
    "Dml",
    "DropColumn",
    "DropTable",
    "Hook",
    "InFlight",
    "Noop",
    "Position",
    "Statement",
    "Summary",
    "TableInfo",
    "Transaction",
    "TransactionAssembler",
    "check_deterministic",
    "check_paths",
    "load_state",
    "parse_statement",
    "parse_use",
    "save_state",
    "substitute_variables",
    "table_uid",
    "translate",
    "txn_version",
    "verify_generated",
]

