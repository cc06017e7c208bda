"""The end-to-end streams side by side, and the Spark jobs each kind of Delta commit took.

Why: the standard stream MERGEs into every table; the insert-heavy one (append-only tables and one
mixed table) is the shape where the engine can write a plain Delta append instead of a MERGE (one
Spark job against about a dozen). Each stream next to a plain append of its final rows and to the
foreachBatch peer, and the jobs per commit by kind (from the run summaries' ``commits``), show what
that path is worth. A summary without those fields (a build before them) shows "n/a".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bench.common import STREAMS, fmt, rate, stream_key

COMMIT_KINDS: tuple[tuple[str, str], ...] = (("append", "append"), ("merge", "MERGE"), ("ddl", "DDL"))
"""(summary key, label) of the commit kinds the summary counts, in the report's order."""

Run = tuple[str, str, dict[str, Any], "dict[str, Any] | None"]
"""(stream, protocol, its end-to-end result, its peer result or None)."""


def commits(summary: Mapping[str, Any]) -> dict[str, dict[str, float]] | None:
    """The run's Delta commits by kind, each {count, jobs, seconds}; None when the summary has none."""
    raw = summary.get("commits")
    if not isinstance(raw, Mapping):
        return None
    out: dict[str, dict[str, float]] = {}
    for kind, figures in raw.items():
        if isinstance(figures, Mapping):
            out[str(kind)] = {"count": int(figures.get("count", 0)), "jobs": int(figures.get("jobs", 0)),
                              "seconds": float(figures.get("seconds", 0.0))}
    return out


def stream_runs(results: Mapping[str, Any]) -> list[Run]:
    """Every end-to-end run of the results, stream by stream, protocol by protocol."""
    out: list[Run] = []
    for stream in STREAMS:
        peer = results.get(stream_key("peer", stream)) or {}
        for protocol, res in (results.get(stream_key("e2e", stream)) or {}).items():
            out.append((stream, protocol, res, peer.get(protocol)))
    return out


def _verdict(res: Mapping[str, Any] | None) -> str:
    if res is None:
        return "not run"
    if "verified" not in res:
        return "not checked"
    return "yes" if res["verified"] else f"NO ({res.get('diff_count', len(res.get('diffs', [])))} differences)"


def _tables_split(summary: Mapping[str, Any]) -> str:
    appended, merged = summary.get("tables_appended"), summary.get("tables_merged")
    return "n/a" if appended is None or merged is None else f"{int(appended):,} / {int(merged):,}"


def render_streams_md(results: Mapping[str, Any]) -> list[str]:
    """## 2b: per stream and protocol, replicated rows/s against a plain append and the peer."""
    runs = stream_runs(results)
    if not runs or all(stream == "standard" for stream, *_ in runs):
        return []  # the standard stream alone: section 2 and section 6 say it all
    lines = [
        "",
        "## 2b. End to end by stream: standard and insert-heavy",
        "",
        "Two simulated streams, each on every protocol of section 2: **standard** (its tables take inserts, "
        "updates, deletes and key changes) and **insert-heavy** (four insert-only tables, as logs and events "
        "tables are, and one mixed table; the same number of row changes, about nine in ten of them inserts). "
        "Each is replicated by `replicator run --until-caught-up` (a subprocess), checked against the simulator's "
        "expected tables, and put next to a plain Delta append of its final rows in the bench's session and to "
        "the Structured Streaming `foreachBatch` MERGE peer of section 6 on the same topic. Tables appended / "
        "merged count (step, table) pairs from the run summary: a table whose step holds fresh inserts alone "
        "can be written with a plain append instead of a MERGE.",
        "",
        "| | " + " | ".join(f"{stream} {protocol}" for stream, protocol, _, _ in runs) + " |",
        "| --- | " + " | ".join("---:" for _ in runs) + " |",
    ]

    def row(label: str, fn: Callable[[dict[str, Any], dict[str, Any] | None], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(fn(res, peer) for _, _, res, peer in runs) + " |")

    def changes(res: dict[str, Any]) -> str:
        s = res["stream"]["stats"]
        return f"{s['inserts']:,} / {s['updates']:,} / {s['deletes']:,} / {s['key_changes']:,}"

    def mine(res: dict[str, Any]) -> float:
        return rate(res["run"])

    row("row changes: inserts / updates / deletes / key changes", lambda r, p: changes(r))
    row("Kafka records / row events read", lambda r, p: f"{r['stream']['records']:,} / {r['run']['summary']['rows']:,}")
    row("replicated: wall time", lambda r, p: f"{r['run']['wall_s']:.1f} s")
    row("tables appended / merged (per step)", lambda r, p: _tables_split(r["run"]["summary"]))
    row("**replicated rows/s**", lambda r, p: f"**{fmt(mine(r))}**")
    row("plain append rows/s (final rows)",
        lambda r, p: f"{fmt(r['append']['rows_per_s'])} ({r['append']['rows']:,} rows)" if "append" in r else "n/a")
    row("**replicated ÷ append**",
        lambda r, p: f"**{mine(r) / r['append']['rows_per_s']:.2f}**" if r.get("append", {}).get("rows_per_s")
        else "n/a")
    row("peer rows/s", lambda r, p: fmt(rate(p["run"])) if p else "not run")
    row("**replicated ÷ peer**", lambda r, p: f"**{mine(r) / max(rate(p['run']), 1e-9):.2f}x**" if p else "not run")
    row("result equals the expected tables: replicator / peer", lambda r, p: f"{_verdict(r)} / {_verdict(p)}")
    return lines


def render_jobs_md(results: Mapping[str, Any]) -> list[str]:
    """## 2c: Spark jobs and seconds per Delta commit, by kind, for every end-to-end run."""
    runs = stream_runs(results)
    if not runs:
        return []
    lines = [
        "",
        "## 2c. Spark jobs per Delta commit (end to end)",
        "",
        "From each end-to-end run's summary (`commits`): the Delta statements it committed by kind (a plain "
        "append, a MERGE, a DDL), the Spark jobs they ran (counted from Spark's status store) and their wall "
        "seconds, summed over statements that run concurrently across tables (so a sum can exceed the run's "
        "wall time). A MERGE runs about a dozen jobs (scan for matches, rewrite, statistics); an append one. A "
        "catch-up that fits in one step (`--events` at most `--max-buffer-rows`) creates every table in that "
        "step and appends into all of them, mixed or not: MERGEs need later steps. "
        "\"n/a\": the run's summary has no commit counts.",
        "",
        "| stream | protocol | commit | commits | Spark jobs | **jobs per commit** | seconds | **s per commit** |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for stream, protocol, res, _ in runs:
        counted = commits(res["run"]["summary"])
        if counted is None:
            lines.append(f"| {stream} | {protocol} | all | n/a | n/a | n/a | n/a | n/a |")
            continue
        for kind, label in COMMIT_KINDS:
            c = counted.get(kind, {"count": 0, "jobs": 0, "seconds": 0.0})
            n = c["count"]
            per_jobs = f"**{c['jobs'] / n:.1f}**" if n else "–"
            per_s = f"**{c['seconds'] / n:.2f} s**" if n else "–"
            lines.append(f"| {stream} | {protocol} | {label} | {n:,.0f} | {c['jobs']:,.0f} | {per_jobs} | "
                         f"{c['seconds']:.1f} s | {per_s} |")
    return lines
