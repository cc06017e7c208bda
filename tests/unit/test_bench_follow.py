"""The long-follow section's step times (pure, no Spark): a stream whose tables start at different
times has cheap first steps; the like-for-like figure compares only steps that did the same work."""

from __future__ import annotations

import datetime as dt
from typing import Any

from bench.follow import composition, step_cycles


def _log(cycles: list[tuple[float, dict[str, str]]]) -> list[dict[str, Any]]:
    """A step log whose step i starts when the cycles before it have passed."""
    t0, out = dt.datetime(2026, 1, 1, tzinfo=dt.UTC), []
    at = 0.0
    for i, (seconds, writes) in enumerate(cycles, start=1):
        tables = {uid: {"write": w} for uid, w in writes.items()}
        out.append({"step": i, "recorded_at": (t0 + dt.timedelta(seconds=at)).isoformat(), "tables": tables})
        at += seconds
    return out


def test_composition_names_each_table_and_how_it_was_written() -> None:
    record = {"tables": {"b": {"write": "merge"}, "a": {"write": "append"}, "c": {}}}
    assert composition(record) == "a:append,b:merge,c:none"
    assert composition({"tables": {}}) == "-"


def test_like_for_like_leaves_out_the_cheaper_steps_of_another_composition() -> None:
    append_only, both = {"a": "append"}, {"a": "append", "b": "merge"}
    # 10 warm-up steps, 30 append-only steps at 1 s, then 60 append+MERGE steps at a steady 3 s
    cycles = [(5.0, append_only)] * 10 + [(1.0, append_only)] * 30 + [(3.0, both)] * 60 + [(0.0, both)]
    st = step_cycles(_log(cycles), window=30)
    assert st["warm_up"] == 10
    assert st["first_median_s"] == 1.0 and st["last_median_s"] == 3.0  # all steps: 3x "growth"
    like = st["like"]
    assert like["composition"] == "a:append,b:merge"
    assert like["measured"] == 60 and like["window"] == 20
    assert like["first_median_s"] == 3.0 and like["last_median_s"] == 3.0 and like["ratio_median"] == 1.0


def test_like_for_like_sees_real_growth() -> None:
    both = {"a": "append", "b": "merge"}
    cycles = [(2.0, both)] * 10 + [(2.0 + i / 100, both) for i in range(90)] + [(0.0, both)]
    like = step_cycles(_log(cycles), window=30)["like"]
    assert like["measured"] == 90 and like["window"] == 30
    assert abs(like["ratio_median"] - (2.0 + 0.745) / (2.0 + 0.145)) < 1e-4  # timestamps are to the microsecond
