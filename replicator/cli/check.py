"""`replicator check`: compare a warehouse with the expected final tables `replicator simulate` wrote.

Proves an installation end to end without code: simulate a stream (`--expected FILE`), replicate
it with `replicator run`, then `replicator check --warehouse W --expected FILE`. Exit 0 and one
line when every table equals the expected one; exit 1 with the differences (the first
`SHOWN_DIFFERENCES`, then how many more); exit 2 when the expected file or the warehouse cannot be
read. The comparison is `replicator.sim.simcheck`'s (`compare_tables` over `read_warehouse`, and
the applied watermark must have reached the stream's final resolved ts), the same check as
`check_warehouse` and the demo's.

`--json` prints one object on stdout:
`{"ok", "tables", "rows", "warehouse_tables", "warehouse_rows", "differences", "differences_total"}`:
`tables` / `rows` are what the expected file holds (every expected row is looked up by key in
the warehouse and compared column by column), `warehouse_*` what the warehouse's live tables hold,
`differences` the readable lines (at most `JSON_DIFFERENCES`; `differences_total` counts them all).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replicator.cli.common import add_config, add_storage, settings_from
from replicator.cli.settings import ReplicatorSettings
from replicator.errors import ConfigError

if TYPE_CHECKING:
    from replicator.sim.expected import ExpectedState
    from replicator.sim.simcheck import ActualTable

SHOWN_DIFFERENCES = 20
"""Differences listed in the readable output (then "... and N more")."""
JSON_DIFFERENCES = 1000
"""Differences listed in `--json` (`differences_total` counts them all)."""
_NO_LIMIT = sys.maxsize


@dataclass(frozen=True)
class CheckCommand:
    """`replicator check`."""

    settings: ReplicatorSettings
    expected: str
    json: bool = False


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one comparison (`evaluate`)."""

    tables: int  # tables in the expected file
    rows: int  # rows in the expected file
    warehouse_tables: int
    warehouse_rows: int
    differences: Sequence[str]
    by_table: Mapping[str, int]  # differences per table; "": not of one table (the watermark)

    @property
    def ok(self) -> bool:
        return not self.differences

    def to_json(self, limit: int = JSON_DIFFERENCES) -> dict[str, Any]:
        return {"ok": self.ok, "tables": self.tables, "rows": self.rows, "warehouse_tables": self.warehouse_tables,
                "warehouse_rows": self.warehouse_rows, "differences": list(self.differences[:limit]),
                "differences_total": len(self.differences)}


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check", help="compare a warehouse with the expected tables `replicator simulate` wrote",
        description="Compare every table of a warehouse with the expected final tables of a simulated stream "
                    "(`replicator simulate --expected FILE`), row by row by key, and its applied watermark with "
                    "the stream's last. Exit 0 when they are equal, 1 with the differences listed, 2 when the "
                    "expected file or the warehouse cannot be read.")
    add_storage(p)
    p.add_argument("--expected", metavar="FILE", required=True,
                   help="the expected final tables (JSON) written by `replicator simulate --expected FILE`")
    p.add_argument("--json", action="store_true",
                   help='machine-readable result on stdout: {"ok", "tables", "rows", "warehouse_tables", '
                        f'"warehouse_rows", "differences" (at most {JSON_DIFFERENCES}), "differences_total"}}')
    add_config(p)
    p.set_defaults(handler=lambda ns: check(CheckCommand(settings=settings_from(ns), expected=ns.expected,
                                                         json=ns.json)))


def evaluate(expected: ExpectedState, actual: Mapping[str, ActualTable], applied_ts: int) -> CheckResult:
    """Compare (pure): the warehouse's tables as read back and its applied watermark."""
    from replicator.sim.simcheck import compare_tables

    diffs: list[str] = []
    if applied_ts < expected.watermark:
        diffs.append(f"warehouse applied watermark {applied_ts} is behind the stream's final resolved ts "
                     f"{expected.watermark}: not caught up")
    diffs += compare_tables(expected, actual, max_diffs=_NO_LIMIT)
    return CheckResult(
        tables=len(expected.tables), rows=sum(len(rows) for rows in expected.tables.values()),
        warehouse_tables=len(actual), warehouse_rows=sum(len(t.rows) for t in actual.values()),
        differences=diffs, by_table=count_by_table(diffs, [*expected.tables, *actual]))


def count_by_table(diffs: Sequence[str], names: Sequence[str]) -> dict[str, int]:
    """Differences per table (a line `<table>: ...` belongs to the longest table name it starts
    with; other lines to "")."""
    ordered = sorted(set(names), key=len, reverse=True)
    counts: dict[str, int] = {}
    for line in diffs:
        owner = next((n for n in ordered if line.startswith(n + ": ")), "")
        counts[owner] = counts.get(owner, 0) + 1
    return counts


def render(result: CheckResult, warehouse: str, expected: str, limit: int = SHOWN_DIFFERENCES) -> list[str]:
    """The readable report (pure): one line when equal; else a headline, the first `limit`
    differences and how many more."""
    if result.ok:
        return [f"warehouse {warehouse} matches {expected}: {result.tables} tables, {result.rows:,} rows compared"]
    n = len(result.differences)
    tables = sorted(t for t in result.by_table if t)
    where = ", ".join([*(f"{t}: {result.by_table[t]}" for t in tables),
                       *([f"watermark: {result.by_table['']}"] if "" in result.by_table else [])])
    lines = [f"warehouse {warehouse} differs from {expected}: {n} difference{'s' if n != 1 else ''} ({where})",
             f"  expected {result.tables} tables, {result.rows:,} rows; the warehouse has {result.warehouse_tables} "
             f"tables, {result.warehouse_rows:,} rows"]
    lines += [f"  {d}" for d in result.differences[:limit]]
    if n > limit:
        lines.append(f"  ... and {n - limit} more differences (--json lists up to {JSON_DIFFERENCES})")
    return lines


def check(cmd: CheckCommand) -> int:
    from replicator.sim.expected import ExpectedState
    from replicator.warehouse import Warehouse

    expected = ExpectedState.load(cmd.expected)  # ConfigError (exit 2) before Spark starts
    wh = Warehouse(cmd.settings.require("warehouse"))
    if not wh.state_path.exists() and wh.recorded_shards() is None:
        raise ConfigError(f"{wh.root} is not a warehouse written by `replicator run` (no _replicator/state.json)")
    from replicator.runtime.spark import get_spark, plan_jit, use_storage
    from replicator.sim.simcheck import applied_watermark, read_warehouse
    from replicator.storage import is_url

    plan_jit(short_lived=True, tables_bytes=wh.tables_bytes)
    spark = get_spark("replicator-check")
    if is_url(wh.root):
        use_storage(spark)  # a session started before the settings were known reaches the store too
    # a sharded warehouse: every shard's tables, and the smallest shard watermark
    result = evaluate(expected, read_warehouse(spark, wh.root), applied_watermark(wh.root))
    if cmd.json:
        sys.stdout.write(json.dumps(result.to_json()) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in render(result, wh.root, cmd.expected)))
    sys.stdout.flush()
    return 0 if result.ok else 1
