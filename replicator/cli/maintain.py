"""`replicator maintain`: compact small files and vacuum a warehouse's tables, under the lease.

On a terminal or piped: one line per table (what it holds, what was or would be compacted and
removed), then a total line. `--json`: one JSON object on stdout:

    {"warehouse": str, "dry_run": bool, "retention_hours": float, "target_file_size": int,
     "min_small_files": int, "compacted_tables": int, "vacuum_files": int, "vacuum_bytes": int,
     "seconds": float,
     "tables": [{"schema", "table", "path", "files": int, "bytes": int, "small_files": int,
                 "small_bytes": int, "compact": bool, "files_after": int, "retention_floor_hours": float,
                 "vacuum_files": int, "vacuum_bytes": int, "vacuum_change_data_files": int,
                 "seconds": float, "spark_jobs": {kind: int}, "shard": "I/N" (a sharded warehouse's)}]}

`files_after` is an estimate with --dry-run (the small files' bytes packed into target-size
files), else the live data files after the compaction; `vacuum_*` is what VACUUM would remove
now (--dry-run) or removed.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replicator.cli.common import add_config, add_storage, settings_from
from replicator.cli.maintain_settings import add_size_flags
from replicator.cli.settings import ReplicatorSettings, defaults
from replicator.delta.schemachange import format_size
from replicator.filters import TableFilter

if TYPE_CHECKING:
    from replicator.maintenance import MaintainReport, TableReport

@dataclass(frozen=True)
class MaintainCommand:
    """`replicator maintain`: the layered settings (`maintain_settings.MaintainFields` among them)
    and the flags that are not layered."""

    settings: ReplicatorSettings
    dry_run: bool = False
    json: bool = False
    allow_short_retention: bool = False


DESCRIPTION = (
    "Compact each table's small files (Delta OPTIMIZE, a dataChange=false commit: change-data-feed and streaming "
    "readers see no change) once it holds --min-small-files of them, then remove the files no version within "
    "--retention-hours needs (Delta VACUUM, change-data files included). Takes the warehouse's writer lease (each "
    "shard's, one shard at a time, on a sharded warehouse) so it never races `replicator run`; --dry-run prints "
    "what it would do and changes nothing."
)


def register(sub: Any) -> None:
    d = defaults(ReplicatorSettings)
    p = sub.add_parser("maintain", help="compact small files and vacuum the tables of a warehouse (under the lease)",
                       description=DESCRIPTION)
    add_storage(p)
    p.add_argument("--include", action="append", metavar="RULE",
                   help="maintain only tables matching RULE (the table-filter syntax of `run`; repeatable)")
    p.add_argument("--exclude", action="append", metavar="RULE",
                   help="skip tables matching RULE (repeatable; exclude wins over include)")
    p.add_argument("--dry-run", action="store_true",
                   help="print what would be compacted and removed (files, sizes); take no lease, change nothing")
    p.add_argument("--retention-hours", type=float, metavar="HOURS",
                   help="VACUUM removes files no version of the last HOURS needs, change-data files included "
                        "(so the change data feed stays readable that far back); below a table's "
                        f"delta.deletedFileRetentionDuration it is refused (default {d['retention_hours']:g})")
    p.add_argument("--allow-short-retention", action="store_true",
                   help="allow --retention-hours below a table's delta.deletedFileRetentionDuration: readers of "
                        "older versions and change-data-feed readers further behind can fail (flag only)")
    add_size_flags(p, d, "compact")
    p.add_argument("--wait", action="store_true", default=None,
                   help="wait for a run holding the warehouse's lease to finish instead of failing")
    p.add_argument("--lease-seconds", type=float, metavar="SECONDS",
                   help=f"term of the writer lease this command takes (default {d['lease_seconds']:g})")
    p.add_argument("--json", action="store_true", help="machine-readable output: one JSON object (see --help)")
    add_config(p)
    p.set_defaults(handler=lambda ns: maintain(MaintainCommand(
        settings=settings_from(ns), dry_run=ns.dry_run, json=ns.json, allow_short_retention=ns.allow_short_retention)))


def maintain(cmd: MaintainCommand) -> int:
    from replicator.maintenance import MaintainOptions
    from replicator.maintenance import maintain as run_maintenance

    s = cmd.settings
    options = MaintainOptions(
        retention_hours=s.retention_hours, target_file_bytes=s.target_file_size, min_small_files=s.min_small_files,
        allow_short_retention=cmd.allow_short_retention, dry_run=cmd.dry_run,
        table_filter=TableFilter(s.include, s.exclude), wait=s.wait, lease_seconds=s.lease_seconds)
    out = sys.stdout

    def line(t: TableReport) -> None:  # as each table is done: a long run shows its progress
        out.write(table_line(t, cmd.dry_run) + "\n")
        out.flush()

    report = run_maintenance(s.require("warehouse"), options, on_table=None if cmd.json else line)
    if cmd.json:
        out.write(json.dumps(report.to_json()) + "\n")
    else:
        out.write(total_line(report) + "\n")
    return 0


def table_line(t: TableReport, dry_run: bool) -> str:
    name = f"{t.schema}.{t.table}" + (f" (shard {t.shard})" if t.shard else "")
    held = f"{t.files} files, {format_size(t.bytes)}; {t.small_files} small ({format_size(t.small_bytes)})"
    if t.compact:
        compact = f"{'would compact' if dry_run else 'compacted'} to {'~' if dry_run else ''}{t.files_after} files"
    else:
        compact = "no compaction"
    removed = (f"{'would remove' if dry_run else 'removed'} {t.vacuum_files} files ({format_size(t.vacuum_bytes)}"
               f", {t.vacuum_change_data_files} change-data)")
    return f"{name}: {held}; {compact}; {removed}"


def total_line(report: MaintainReport) -> str:
    o = report.options
    compacted = sum(t.compact for t in report.tables)
    files = sum(t.vacuum_files for t in report.tables)
    size = format_size(sum(t.vacuum_bytes for t in report.tables))
    verb = ("would compact", "would remove") if o.dry_run else ("compacted", "removed")
    return (f"warehouse {report.warehouse}: {len(report.tables)} tables; {verb[0]} {compacted}; {verb[1]} {files} "
            f"files ({size}) older than {o.retention_hours:g} hours" + (" (dry run: nothing changed)" if o.dry_run
                                                                         else "")
            + (f"; {report.steps_rolled} old steps of the step log rolled up" if report.steps_rolled else "")
            + f"; {report.seconds:.1f}s")
