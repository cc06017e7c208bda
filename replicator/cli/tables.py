"""`replicator tables`: the replicated tables of a warehouse, with their row counts.

On a terminal: a readable table. Piped or redirected: plain tab-separated lines (a header, then
one line per table) with every value whole, for `grep`, `cut -f` and `column -t -s $'\\t'` (a
table drawn for a terminal would be cut or folded to 80 columns). `--json`: for machines.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from replicator.cli.common import add_config, add_storage, files_text, maintained_text, settings_from
from replicator.cli.settings import TablesCommand

if TYPE_CHECKING:
    from replicator.views.listing import ListedTable

DESCRIPTION = (
    "List the live tables of a warehouse: schema, table, row count, key, applied watermark, reader features, "
    "path, source and catalog name (with --catalog-uri). On a terminal a readable table; piped, tab-separated "
    "lines with whole values (a header line first). For machines and scripts use --json."
)
TSV_COLUMNS = ("schema", "table", "rows", "key", "applied", "reader_features", "path", "source", "catalog")


def register(sub: Any) -> None:
    p = sub.add_parser("tables", help="list the replicated tables of a warehouse (row counts; --json for machines)",
                       description=DESCRIPTION)
    add_storage(p)
    p.add_argument("--json", action="store_true",
                   help="machine-readable output: one JSON array of objects with keys schema, table, path, key, "
                        "rows, applied_ts, source, reader_features, readers (spark, deltalake-sql, deltalake-dataset, "
                        "polars: the ones that read the table), reader_changes (which DDL changed them, and why), "
                        "catalog (the table's name in the metastore, database.table, or null)")
    add_config(p)
    p.set_defaults(handler=lambda ns: tables(TablesCommand(settings=settings_from(ns), json=ns.json)))


def tables(cmd: TablesCommand) -> int:
    from replicator.views.listing import list_tables

    root, rows = list_tables(cmd.settings.require("warehouse"), count=True)
    out = sys.stdout
    if cmd.json:
        out.write(json.dumps([r.to_json() for r in rows]) + "\n")
    elif out.isatty():
        print_table(root, rows)
    else:
        write_tsv(out, rows)
    return 0


def rows_text(rows: int | None) -> str:
    return "-" if rows is None else str(rows)


def print_table(root: str, rows: Sequence[ListedTable]) -> None:
    """The readable table, for a terminal (narrow: cells fold, nothing is cut off)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"warehouse {root}")
    now = time.time()
    sharded = any(r.shard is not None for r in rows)
    for col in ("schema", "table", "rows", "files (small)", "maintained", "key", "applied watermark",
                "reader features", "path", "source", "catalog", *(("shard",) if sharded else ())):
        table.add_column(col, justify="right" if col in ("rows", "files (small)") else "left", overflow="fold")
    for r in rows:
        table.add_row(r.schema, r.table, f"{r.rows:,}" if r.rows is not None else "-",
                      files_text(r.files, r.small_files), maintained_text(r.compacted_at, r.vacuumed_at, now),
                      ", ".join(r.key),
                      r.applied_text(), ", ".join(r.reader_features) or "-", r.path, r.source, r.catalog or "-",
                      *((r.shard or "-",) if sharded else ()))
    Console().print(table)


def _cell(text: str) -> str:
    """One TSV cell: backslash, tab and line breaks escaped, so a line is always one table."""
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def tsv_lines(rows: Sequence[ListedTable]) -> list[str]:
    """Header and one line per table, tab-separated, nothing cut (lists comma-joined)."""
    sharded = any(r.shard is not None for r in rows)  # a sharded warehouse's: a last column, the shard
    lines = ["\t".join(TSV_COLUMNS + (("shard",) if sharded else ()))]
    for r in rows:
        cells = (r.schema, r.table, rows_text(r.rows), ",".join(r.key), r.applied_text(),
                 ",".join(r.reader_features) or "-", r.path, r.source, r.catalog or "-")
        lines.append("\t".join(_cell(c) for c in cells + ((r.shard or "-",) if sharded else ())))
    return lines


def write_tsv(out: TextIO, rows: Sequence[ListedTable]) -> None:
    out.write("".join(line + "\n" for line in tsv_lines(rows)))
