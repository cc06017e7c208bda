"""`replicator tables`: the replicated tables of a warehouse."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from replicator.cli.common import add_config, settings_from
from replicator.cli.settings import TablesCommand
from replicator.errors import ConfigError


def register(sub: Any) -> None:
    p = sub.add_parser("tables", help="list the replicated tables of a warehouse")
    p.add_argument("--warehouse", help="warehouse directory")
    p.add_argument("--json", action="store_true", help="a JSON array instead of a readable table")
    add_config(p)
    p.set_defaults(handler=lambda ns: tables(TablesCommand(settings=settings_from(ns), json=ns.json)))


def tables(cmd: TablesCommand) -> int:
    from replicator.delta.warehouse import Warehouse

    wh = Warehouse(cmd.settings.require("warehouse"))
    if not wh.state_path.exists():
        raise ConfigError(f"{wh.root} is not a replicator warehouse (no _replicator/state.json)")
    state = wh.load_state()
    rows = [
        {"schema": e.schema_name, "table": e.table, "path": str(Path(e.path).resolve()), "key": e.key,
         "applied_ts": state.applied_ts}
        for e in state.live_tables()
    ]
    if cmd.json:
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    from replicator.events import tso_to_datetime

    table = Table(title=f"warehouse {wh.root}")
    for col in ("schema", "table", "key", "applied watermark", "path"):
        table.add_column(col)
    ts = int(state.applied_ts)
    when = tso_to_datetime(ts).isoformat() if ts else "-"
    for r in rows:
        table.add_row(str(r["schema"]), str(r["table"]), ", ".join(map(str, r["key"])), f"{ts} ({when})",  # type: ignore[call-overload]
                      str(r["path"]))
    Console().print(table)
    return 0
