"""The mapping: every TiDB DDL type code (1-36) -> its name and Delta operation or the reason it is a
no-op (`DDL_TYPES`), and the DDL table of docs/ddl.md rendered from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from replicator.delta.ddl.alter import _alter_table
from replicator.delta.ddl.base import Handler, Kind
from replicator.delta.ddl.tables import (
    _create_schema,
    _create_table,
    _drop_schema,
    _drop_table,
    _partition_op,
    _recover_table,
    _rename_table,
    _truncate_table,
)

# ---------------------------------------------------------------------------------------------
# The mapping

@dataclass(frozen=True)
class DdlRule:
    """One TiDB DDL type code: its name and Delta operation (or the reason it is a no-op)."""

    code: int
    name: str
    kind: Kind
    operation: str
    handler: Handler | None = None
    metadata: str = "same"
    """What the metadata-only choice does instead (a table at or over `--rewrite-limit`, or
    `--schema-change metadata`; replicator/delta/schemachange.py): "same" when the choice changes
    nothing for this code."""


def _noop(code: int, name: str, reason: str) -> DdlRule:
    """A code with nothing to do on the Delta side, and why."""
    return DdlRule(code, name, "no-op", reason)


_ALTER = "ALTER TABLE"
_RULES: tuple[DdlRule, ...] = (
    DdlRule(1, "Create Schema", "apply", "catalog: record the schema (a directory; no Delta object)",
            _create_schema),
    DdlRule(2, "Drop Schema", "apply", "catalog: its live tables become dropped (files kept, recoverable)",
            _drop_schema),
    DdlRule(3, "Create Table", "apply", "`CREATE TABLE IF NOT EXISTS` at a new path: change data feed only on the "
            "default profile (plus column mapping when a column name holds one of ` ,;{}()=`, tab, newline, which "
            "Delta stores no other way); `--table-features fast`: also column mapping, deletion vectors, type "
            "widening; either way `delta.checkpointInterval = 100` (docs/delta.md, Log checkpoints); `IF NOT "
            "EXISTS`; `LIKE` copies the "
            "catalog spec; the partition definition is kept in the catalog", _create_table),
    DdlRule(4, "Drop Table", "apply", "catalog: each named table becomes dropped (hidden from `replicator "
            "tables`, files kept until purged)", _drop_table),
    DdlRule(5, "Add Column", "apply", f"`{_ALTER} ADD COLUMNS` (nullable, at the end; metadata-only), then one "
            "`UPDATE` giving existing rows the upstream default (the type's zero value for NOT NULL without default): "
            "that rewrites every data file and shows every row as an update in the change data feed; a nullable "
            "column without default needs no `UPDATE`", _alter_table,
            "same (Delta cannot give existing rows a default without writing them)"),
    DdlRule(6, "Drop Column", "apply", f"`{_ALTER} DROP COLUMNS` (metadata-only) on a table with column mapping; "
            "otherwise one overwrite of the table without the column (readable by every reader; change-feed churn)",
            _alter_table, "column mapping enabled on the table (a reader change: no polars, no deltalake dataset "
            f"path), then `{_ALTER} DROP COLUMNS`: no data file written, no change-feed row"),
    _noop(7, "Add Index", "no-op: Delta has no secondary indexes"),
    _noop(8, "Drop Index", "no-op: Delta has no secondary indexes"),
    _noop(9, "Add Foreign Key", "no-op: Delta enforces no foreign keys"),
    _noop(10, "Drop Foreign Key", "no-op: Delta enforces no foreign keys"),
    DdlRule(11, "Truncate Table", "apply", "`DELETE FROM` without predicate (metadata-only)", _truncate_table),
    DdlRule(12, "Modify Column", "apply", "renamed: `RENAME COLUMN` on a table with column mapping (enabled when the "
            "new name needs it), else one overwrite of the table with the column renamed; same Delta type "
            f"(e.g. VARCHAR length, ENUM labels): catalog only; widening: `{_ALTER} ALTER COLUMN .. TYPE` with type "
            "widening (`fast`, or a table that has it), else one overwrite of the table with the column cast; any "
            "other type: with column mapping a rewrite in place (temp column, `UPDATE` with `CAST`, drop, rename, "
            "reposition), else one overwrite of the table with the column cast; "
            "`DROP NOT NULL`, comment and default follow; every overwrite is change-feed churn",
            _alter_table, "renamed: column mapping enabled (a reader change: no polars, no deltalake dataset path), "
            "then `RENAME COLUMN`; widening (byte/short/int/long up, float -> double, decimal precision up, "
            f"date -> timestamp_ntz): type widening enabled (a reader change: Spark only), then `{_ALTER} ALTER "
            "COLUMN .. TYPE`; both metadata-only, no change-feed row; any other type change: rewritten as on the "
            "left (Delta has no metadata-only way), the outcome says so"),
    _noop(13, "Rebase Auto ID", "no-op: auto-increment counters are not table data"),
    DdlRule(14, "Rename Table", "apply", "catalog: the entry (uid, path, history) takes the new name; `RENAME TABLE` "
            "with one or several pairs, `ALTER TABLE .. RENAME`", _rename_table),
    DdlRule(15, "Set Default Value", "apply", f"`{_ALTER} ALTER COLUMN .. SET|DROP DEFAULT` (table feature "
            "`allowColumnDefaults`) and the catalog default; existing rows unchanged, as upstream", _alter_table),
    _noop(16, "Shard RowID", "no-op: row-id sharding is TiKV layout"),
    DdlRule(17, "Modify Table Comment", "apply", f"`{_ALTER} SET TBLPROPERTIES ('comment' = ..)`", _alter_table),
    _noop(18, "Rename Index", "no-op: Delta has no secondary indexes"),
    DdlRule(19, "Add Table Partition", "apply", "catalog: partition definitions appended (Delta rows are not "
            "physically partitioned)", _partition_op),
    DdlRule(20, "Drop Table Partition", "apply", "`DELETE WHERE <partition predicate>`: exactly the dropped "
            "partitions' rows; definitions removed from the catalog", _partition_op),
    _noop(21, "Create View", "no-op: views are not replicated (query the Delta tables)"),
    _noop(22, "Modify Table Charset And Collate", "no-op: strings are UTF-8 `STRING` in Delta"),
    DdlRule(23, "Truncate Table Partition", "apply", "`DELETE WHERE <partition predicate>` (`ALL`: no predicate)",
            _partition_op),
    _noop(24, "Drop View", "no-op: views are not replicated"),
    DdlRule(25, "Recover Table", "apply", "catalog: the most recently dropped table of that name is live again, "
            "with its rows (`RECOVER TABLE`, `FLASHBACK TABLE .. TO`)", _recover_table),
    _noop(26, "Modify Schema Charset And Collate", "no-op: strings are UTF-8 `STRING` in Delta"),
    _noop(27, "Lock Table", "no-op: upstream session locks"),
    _noop(28, "Unlock Table", "no-op: upstream session locks"),
    _noop(29, "Repair Table", "no-op: repairs TiDB metadata, not data"),
    _noop(30, "Set TiFlash Replica", "no-op: TiFlash replicas are upstream storage"),
    _noop(31, "Update TiFlash Replica Status", "no-op: TiFlash replicas are upstream storage"),
    DdlRule(32, "Add Primary Key", "apply", "catalog: the merge key becomes the primary key columns", _alter_table),
    DdlRule(33, "Drop Primary Key", "apply", "catalog: merge key cleared; the next rows' handle-key columns (TiCDC's "
            "fallback unique index) become the key", _alter_table),
    _noop(34, "Create Sequence", "no-op: sequences are not table data"),
    _noop(35, "Alter Sequence", "no-op: sequences are not table data"),
    _noop(36, "Drop Sequence", "no-op: sequences are not table data"),
)

DDL_TYPES: dict[int, DdlRule] = {r.code: r for r in _RULES}
DDL_NAMES: dict[int, str] = {r.code: r.name for r in _RULES}
HANDLERS: dict[int, Handler] = {r.code: r.handler for r in _RULES if r.handler is not None}

DDL_NOTES = """\
- Column facts from `ALTER`: `NOT NULL` is replicated as nullable (Delta rejects `NOT NULL` in
  `ADD COLUMNS`; `MODIFY` only ever drops `NOT NULL`); position clauses (`FIRST`/`AFTER`) are ignored.
- Backfill of `ADD COLUMN`: the default as TiDB stores it for existing rows; `CURRENT_TIMESTAMP`
  becomes the DDL's commit time (UTC, truncated to the column's precision); zero dates become
  NULL; a per-row expression default (e.g. `(UUID())`) stops with a DdlError.
- Type rewrites cast with Spark's ANSI `CAST` (fractional -> integer rounds like MySQL); a value
  that does not convert stops with a DdlError and leaves the table as it was.
- Partitions: the predicate re-evaluates the partitioning on each row. Understood: `RANGE`,
  `RANGE COLUMNS`, `LIST`, `LIST COLUMNS` (incl. `DEFAULT`) on columns or `YEAR`/`MONTH`/`DAY`/
  `TO_DAYS`/`UNIX_TIMESTAMP` of a column (UTC), `HASH` (`abs(expr % n)`, NULL as 0) and `KEY` on
  integer columns (CRC32 of the values' text, as TiDB's `LocateKeyPartition`); anything else
  fails at the partition DDL with "unsupported partition expression".
- Errors: an unknown code or an unparsable query stops the run naming code, query and Kafka
  position; `--on-ddl-error skip` records it in the dead-letter table and continues. DDL on a
  table the catalog does not know (created before the stream) is a recorded no-op.
"""


def render_ddl_markdown() -> str:
    """The docs/ddl.md section between the ddl-table markers, rendered from `DDL_TYPES`."""
    lines = [
        "# DDL events (TiDB type code -> Delta)",
        "",
        "Generated from `replicator/delta/ddl/rules.py` (`DDL_TYPES`); a test keeps it in sync. Each DDL is applied",
        "once, as a barrier between the rows before and after it, and check-before-alter (a re-run after",
        "a crash changes nothing twice).",
        "",
        "Two choices for a table without the feature a change needs (`--schema-change`,",
        "[Schema change at lake scale](schema-change.md)): the rewrite (a table under `--rewrite-limit`, or",
        "`--schema-change rewrite`) and the metadata-only change (at or over the limit, or",
        "`--schema-change metadata`); a table that has the feature, or the `fast` profile, gets the",
        "metadata-only operation under either choice.",
        "",
        "| code | name | Delta operation (rewrite choice) | metadata-only choice |",
        "| --- | --- | --- | --- |",
    ]
    for r in _RULES:
        op = r.operation if r.kind != "unsupported" else f"unsupported: {r.operation}"
        meta = r.metadata if r.kind == "apply" else "same"
        lines.append(f"| {r.code} | {r.name} | {op.replace('|', chr(92) + '|')} | {meta.replace('|', chr(92) + '|')} |")
    return "\n".join([*lines, "", DDL_NOTES.rstrip()])


DOC_PATH = "docs/ddl.md"
DOC_START, DOC_END = "<!-- ddl-table:start -->", "<!-- ddl-table:end -->"


def doc_region(text: str) -> str:
    """The text between the ddl-table markers of a page (stripped)."""
    start, end = text.index(DOC_START) + len(DOC_START), text.index(DOC_END)
    return text[start:end].strip()


def update_doc(path: str | Path = DOC_PATH) -> bool:
    """Rewrite the ddl-table region of `path` (docs/ddl.md) from the mapping; True when it changed."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    start, end = text.index(DOC_START) + len(DOC_START), text.index(DOC_END)
    new = text[:start] + "\n" + render_ddl_markdown() + "\n" + text[end:]
    if new != text:
        p.write_text(new, encoding="utf-8")
    return new != text
