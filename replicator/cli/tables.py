"""`replicator tables`: the replicated tables of a warehouse."""

from __future__ import annotations

import json
import sys
from typing import Any

from replicator.cli.common import add_config, add_storage, settings_from
from replicator.cli.settings import TablesCommand


def register(sub: Any) -> None:
    p = sub.add_parser("tables", help="list the replicated tables of a warehouse")
    add_storage(p)
    p.add_argument("--json", action="store_true", help="a JSON array instead of a readable table")
    add_config(p)
    p.set_defaults(handler=lambda ns: tables(TablesCommand(settings=settings_from(ns), json=ns.json)))


def tables(cmd: TablesCommand) -> int:
    from replicator.delta.listing import list_tables

    root, rows = list_tables(cmd.settings.require("warehouse"))
    if cmd.json:
        sys.stdout.write(json.dumps([r.to_json() for r in rows]) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"warehouse {root}")
    for col in ("schema", "table", "key", "applied watermark", "reader features", "path", "source"):
        table.add_column(col)
    for r in rows:
        table.add_row(r.schema, r.table, ", ".join(r.key), r.applied_text(), ", ".join(r.reader_features) or "-",
                      r.path, r.source)
    Console().print(table)
    return 0
