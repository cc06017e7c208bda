"""The bench's per-stream and jobs-per-commit blocks (pure, no Spark): figures from run summaries
with commit counts, and "n/a" from summaries of builds without them."""

from __future__ import annotations

from typing import Any

import pytest

from bench.common import stream_key, stream_shape
from bench.streams import commits, render_jobs_md, render_streams_md
from bench.targets import targets


def _e2e(rows: int, wall: float, append_rate: float, summary: dict[str, Any]) -> dict[str, Any]:
    stats = {"inserts": rows - 10, "updates": 6, "deletes": 3, "key_changes": 1}
    return {"stream": {"records": rows // 4, "stats": stats},
            "run": {"wall_s": wall, "summary": {"rows": rows, **summary}, "driver_peak_rss": 0},
            "append": {"rows": rows, "rows_per_s": append_rate, "elapsed_s": 1.0}, "verified": True}


NEW = {"commits": {"append": {"count": 8, "jobs": 8, "seconds": 2.0}, "merge": {"count": 2, "jobs": 24, "seconds": 3.0},
                   "ddl": {"count": 5, "jobs": 0, "seconds": 1.5}},
       "tables_appended": 8, "tables_merged": 2}


def results() -> dict[str, Any]:
    return {"e2e": {"open": _e2e(1000, 10.0, 400.0, {})},
            "peer": {"open": {"run": {"rows": 1000, "wall_s": 20.0}, "verified": False, "diff_count": 3}},
            "e2e_insert_heavy": {"open": _e2e(1000, 4.0, 500.0, NEW)},
            "peer_insert_heavy": {"open": {"run": {"rows": 1000, "wall_s": 16.0}, "verified": True}}}


def test_jobs_per_commit_by_kind_and_na_without_counts() -> None:
    md = "\n".join(render_jobs_md(results()))
    assert "| standard | open | all | n/a | n/a | n/a | n/a | n/a |" in md  # a summary without commits
    assert "| insert-heavy | open | append | 8 | 8 | **1.0** | 2.0 s | **0.25 s** |" in md
    assert "| insert-heavy | open | MERGE | 2 | 24 | **12.0** | 3.0 s | **1.50 s** |" in md
    assert "| insert-heavy | open | DDL | 5 | 0 | **0.0** | 1.5 s | **0.30 s** |" in md
    assert commits({"commits": {"merge": {"count": 1}}}) == {"merge": {"count": 1, "jobs": 0, "seconds": 0.0}}
    assert commits({}) is None


def test_streams_block_ratios_against_append_and_peer() -> None:
    md = render_streams_md(results())
    head = next(line for line in md if line.startswith("| |"))
    assert head == "| | standard open | insert-heavy open |"
    rows = {line.split(" | ")[0].lstrip("| "): line for line in md if line.startswith("| ")}
    assert rows["**replicated ÷ append**"].endswith("| **0.25** | **0.50** |")  # 100 / 400, 250 / 500 rows/s
    assert rows["**replicated ÷ peer**"].endswith("| **2.00x** | **4.00x** |")  # 100 / 50, 250 / 62.5 rows/s
    assert rows["tables appended / merged (per step)"].endswith("| n/a | 8 / 2 |")
    assert rows["result equals the expected tables: replicator / peer"].endswith(
        "| yes / NO (3 differences) | yes / yes |")
    assert render_streams_md({"e2e": results()["e2e"]}) == []  # the standard stream alone: sections 2 and 6


def test_targets_per_stream() -> None:
    from bench.common import BenchConfig

    got = {t: ok for t, _, ok in targets(results(), BenchConfig(events=1000))}
    assert got["end-to-end rows/s >= half the plain-append rate (open)"] is False
    assert got["end-to-end rows/s >= half the plain-append rate (insert-heavy, open)"] is True
    assert got["replicator rows/s >= 1.5x the Structured Streaming peer's (insert-heavy, open)"] is True


def test_stream_shapes_and_keys() -> None:
    assert stream_shape("standard", 10) == (10, 0)
    assert stream_shape("insert-heavy", 10) == (5, 4)  # four insert-only tables and one mixed
    assert (stream_key("e2e", "standard"), stream_key("peer", "insert-heavy")) == ("e2e", "peer_insert_heavy")
    with pytest.raises(ValueError):
        stream_shape("updates-only", 10)
