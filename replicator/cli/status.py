"""`replicator status`: where a warehouse stands, read-only and safe while a follower runs.

The applied watermark and its age, the last applied step (its time and outcome), who holds the
warehouse now (the writer lease), the dead letters, and per table its Delta version, row count and
applied commit ts. Read from small files without Spark (`replicator.views.status`): it never takes
the lease and never writes, so it may run as often as wanted beside a running `replicator run`.

On a terminal: readable. Piped or redirected: plain lines (`name: value`, then the tables
tab-separated under a header line). `--json`: one JSON object on stdout:

    {"warehouse": str,
     "applied_watermark": int | null,            # TSO; null before the first step (or a binlog-only warehouse)
     "applied_watermark_time": str | null,       # its physical time, ISO 8601 UTC
     "applied_watermark_age_s": float | null,    # now minus that time, seconds
     "last_step": {"step": int, "time": str, "age_s": float, "outcome": str, "kind": "window" | "ddl",
                   "applied_ts": int, "tables": int, "ddls": [{"query", "outcome"}] (DDL steps)} | null,
     "holder": {"host": str, "pid": int, "since": str, "expires_at": str} | null,   # the live lease holder
     "last_holder": {"host", "pid", "since", "expires_at", "ended": "released" | "expired" | "process gone"} | null,
     "dead_letters": {"total": int | null, "by_reason": {reason: int} | null},  # reason: the error's exception name
     "tables": [{"schema", "table", "path", "delta_version": int | null, "rows": int | null,
                 "applied_ts": int | null, "source": "kafka" | "binlog"}],
     "storage_sink": {"url": str, "checkpoint_ts": int | null, "checkpoint_time": str | null,
                      "lag_s": float | null} (only for a warehouse replicating a storage sink),
     "shards": [{"shard": "I/N", "applied_watermark", "applied_watermark_time", "applied_watermark_age_s",
                 "last_step", "holder", "last_holder", "dead_letters", "tables": int}]
               (only for a sharded warehouse: then applied_watermark is the smallest shard's, last_step
                the latest of any shard, dead_letters all shards', holder and last_holder null)}

Times are ISO 8601 in UTC. `rows` is null when the table's log cannot say exactly (no Spark count
here: use `replicator tables`); `by_reason` is null when it would not be cheap or exact.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from replicator.cli.common import add_config, add_storage, files_text, maintained_text, settings_from
from replicator.cli.settings import ReplicatorSettings

if TYPE_CHECKING:
    from replicator.views.status import Status

DESCRIPTION = (
    "Show where a warehouse stands: the applied watermark and its age, the last step's time and outcome, "
    "who holds the warehouse now (host, pid, since), the dead letters, and per table its Delta version, row "
    "count and applied commit ts. Read-only and without Spark: safe while `replicator run` follows the topic. "
    "For machines use --json."
)
TSV_COLUMNS = ("schema", "table", "delta_version", "rows", "applied_ts", "path")


@dataclass(frozen=True)
class StatusCommand:
    """`replicator status`."""

    settings: ReplicatorSettings
    json: bool = False


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="where a warehouse stands: watermark, last step, lease holder, dead letters, "
                                      "tables (read-only; --json for machines)", description=DESCRIPTION)
    add_storage(p)
    p.add_argument("--json", action="store_true",
                   help="machine-readable output: one JSON object with keys warehouse, applied_watermark, "
                        "applied_watermark_age_s, last_step, holder, dead_letters, tables (see docs/running.md)")
    add_config(p)
    p.set_defaults(handler=lambda ns: status(StatusCommand(settings=settings_from(ns), json=ns.json)))


def status(cmd: StatusCommand) -> int:
    from replicator.views.status import warehouse_status

    st = warehouse_status(cmd.settings.require("warehouse"))
    out = sys.stdout
    if cmd.json:
        out.write(json.dumps(st.to_json()) + "\n")
    elif out.isatty():
        print_status(st)
    else:
        write_plain(out, st)
    return 0


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = abs(seconds)
    text = f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"
    return f"{text} ago" if seconds >= 0 else f"in {text}"


def summary_lines(st: Status) -> list[tuple[str, str]]:
    """(label, value) of everything above the tables, for both readable forms."""
    doc = st.to_json()
    wm = doc["applied_watermark"]
    lines = [("warehouse", st.warehouse),
             ("applied watermark", "none yet" if not wm else
              f"{wm} ({doc['applied_watermark_time']}, {_age(doc['applied_watermark_age_s'])})")]
    step = doc["last_step"]
    lines.append(("last step", "none yet" if step is None else
                  f"{step['step']} ({step['kind']}) at {step['time']} ({_age(step['age_s'])}): {step['outcome']}"))
    h, last = doc["holder"], doc["last_holder"]
    if doc.get("shards") is None:
        lines.append(("held by", _held(h, last)))
    else:  # sharded: the warehouse's watermark is the slowest shard's; each shard its own line
        lines[1] = ("applied watermark", lines[1][1] + ("" if not wm else " (the slowest shard's: every shard "
                                                         "has applied it)"))
        for sh in doc["shards"]:
            swm = sh["applied_watermark"]
            lines.append((f"shard {sh['shard']}", (f"watermark {swm} ({_age(sh['applied_watermark_age_s'])})"
                                                    if swm else "watermark none yet")
                          + f", {sh['tables']} tables, held by {_held(sh['holder'], sh['last_holder'])}"))
    sink = doc.get("storage_sink")
    if sink is not None:
        lag = "" if sink["lag_s"] is None else f", lag {_age(sink['lag_s']).removesuffix(' ago')}"
        lines.append(("storage sink", f"{sink['url']}: checkpoint-ts "
                      + ("unreadable" if sink["checkpoint_ts"] is None else
                         f"{sink['checkpoint_ts']} ({sink['checkpoint_time']}{lag})")))
    dl = doc["dead_letters"]
    total = "?" if dl["total"] is None else str(dl["total"])
    if dl["by_reason"]:
        total += " (" + ", ".join(f"{k} {v}" for k, v in dl["by_reason"].items()) + ")"
    lines.append(("dead letters", total))
    return lines


def _held(h: dict[str, Any] | None, last: dict[str, Any] | None) -> str:
    if h is not None:
        return f"host {h['host']}, pid {h['pid']}, since {h['since']} (lease until {h['expires_at']})"
    if last is not None:
        end = "released" if last["ended"] == "released" else f"{last['ended']}, lease until"
        return f"nobody (last holder host {last['host']}, pid {last['pid']}, {end} {last['expires_at']})"
    return "nobody"


def _text(v: Any) -> str:
    return "-" if v is None else str(v)


def print_status(st: Status) -> None:
    """The readable form, for a terminal."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for label, value in summary_lines(st):
        console.print(f"[bold]{label:<18}[/bold] {value}", highlight=False, soft_wrap=True)
    table = Table(title=f"{len(st.tables)} table{'s' if len(st.tables) != 1 else ''}")
    now = time.time()
    for col in ("schema", "table", "Delta version", "rows", "files (small)", "maintained", "applied ts", "path"):
        table.add_column(col, justify="right" if col in ("Delta version", "rows", "files (small)") else "left",
                         overflow="fold", no_wrap=col == "applied ts")
    for t in st.tables:
        table.add_row(t.schema, t.table, _text(t.delta_version), f"{t.rows:,}" if t.rows is not None else "-",
                      files_text(t.files, t.small_files), maintained_text(t.compacted_at, t.vacuumed_at, now),
                      _text(t.applied_ts), t.path)
    console.print(table)


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def plain_lines(st: Status) -> list[str]:
    """`label: value` lines, a blank line, then the tables tab-separated under a header line."""
    lines = [f"{label}: {value}" for label, value in summary_lines(st)]
    lines += ["", "\t".join(TSV_COLUMNS)]
    for t in st.tables:
        cells = (t.schema, t.table, _text(t.delta_version), _text(t.rows), _text(t.applied_ts), t.path)
        lines.append("\t".join(_cell(c) for c in cells))
    return lines


def write_plain(out: TextIO, st: Status) -> None:
    out.write("".join(line + "\n" for line in plain_lines(st)))
