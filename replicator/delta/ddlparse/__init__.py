"""Pure DDL text -> facts, for what sqlglot cannot parse (or parses loosely) in TiDB's MySQL dialect.

Nothing here touches Spark or executes upstream SQL: it tokenizes the query and reads it. One
module per concern (`tokens`, `partitions`, `statements`, `defaults`, `widening`); this package
re-exports their names, so callers keep using `from replicator.delta import ddlparse as dp`.
- A small MySQL tokenizer and cursor for hand-parsers: `RENAME TABLE a TO b, c TO d`,
  `RECOVER TABLE` / `FLASHBACK TABLE`, `ALTER TABLE .. ADD COLUMN (a int, b int)`,
  `ALTER TABLE .. ADD|DROP|TRUNCATE PARTITION`, the `PARTITION BY` clause of CREATE TABLE.
- The partition model (`Partitioning`), kept in the catalog as canonical MySQL text, and its
  translation into a Spark SQL predicate selecting exactly one partition's rows (rows carry only
  a physical partition id, so the partition expression is re-evaluated on the Delta side).
- Column defaults -> Spark literals (backfill of ADD COLUMN) and Delta DEFAULT expressions.
- Delta type-widening rules (what `ALTER COLUMN .. TYPE` accepts in delta-spark 4.0).
"""

from __future__ import annotations

from replicator.delta.ddlparse.defaults import (
    DefaultValue,
    backfill_literal,
    delta_default,
    value_literal,
    zero_value,
)
from replicator.delta.ddlparse.partitions import (
    Method,
    PartitionDef,
    Partitioning,
    PartitionOp,
    PExpr,
    PExprKind,
    add_partitions,
    parse_partition_op,
    parse_partitioning,
    partition_predicate,
    spark_expr,
    split_partition_clause,
)
from replicator.delta.ddlparse.statements import (
    Name,
    RecoverStmt,
    parse_add_column_list,
    parse_alter_rename,
    parse_recover,
    parse_rename_tables,
    parse_renames,
)
from replicator.delta.ddlparse.tokens import (
    Cursor,
    Token,
    TokenKind,
    alter_table_head,
    sanitize,
    tokenize,
)
from replicator.delta.ddlparse.widening import (
    INTEGRAL,
    can_widen,
    cast_expr,
    norm_type,
)

__all__ = [
    "INTEGRAL",
    "Cursor",
    "DefaultValue",
    "Method",
    "Name",
    "PExpr",
    "PExprKind",
    "PartitionDef",
    "PartitionOp",
    "Partitioning",
    "RecoverStmt",
    "Token",
    "TokenKind",
    "add_partitions",
    "alter_table_head",
    "backfill_literal",
    "can_widen",
    "cast_expr",
    "delta_default",
    "norm_type",
    "parse_add_column_list",
    "parse_alter_rename",
    "parse_partition_op",
    "parse_partitioning",
    "parse_recover",
    "parse_rename_tables",
    "parse_renames",
    "partition_predicate",
    "sanitize",
    "spark_expr",
    "split_partition_clause",
    "tokenize",
    "value_literal",
    "zero_value",
]
