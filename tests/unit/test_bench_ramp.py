"""The ramp section's arithmetic: segment bounds, the knee, the slope above it (bench/ramp.py)."""

from __future__ import annotations

from typing import Any

from bench.ramp import LAG_BOUND, _segment, above_knee, knee, segment_seconds


def _seg(kind: str, rate: int, lo: float, hi: float, achieved: float | None = None) -> dict[str, Any]:
    return {"kind": kind, "rate": rate, "started_at": lo, "ended_at": hi,
            "achieved_rate": rate if achieved is None else achieved}


def _lags(lo: float, hi: float, lag: float, slope_per_s: float = 0.0) -> list[tuple[float, float]]:
    return [(t, lag + slope_per_s * (t - lo)) for t in (lo + 0.5 * i for i in range(int((hi - lo) * 2)))]


def test_segment_seconds_grow_with_tables() -> None:
    assert segment_seconds(60, 2, 10) == 60
    assert segment_seconds(60, 2, 100) == 200


def test_a_segment_no_step_ran_in_is_bounded_by_the_runs_median_step() -> None:
    flush = 2.0
    steps = [(0.0, 80.0), (85.0, 90.0)]  # both end before the drop begins at 200 s
    lags = _lags(200.0, 230.0, 60.0)
    seg = _segment(_seg("drop", 500, 200.0, 230.0), lags, steps, flush, run_step_s=85.0)
    assert seg["steps"] == 0
    assert seg["bound_s"] == LAG_BOUND * (flush + 85.0)
    assert seg["recovered"] is True
    # Without a run median the bound would be the flush interval's alone.
    assert _segment(_seg("drop", 500, 200.0, 230.0), lags, steps, flush)["bound_s"] == LAG_BOUND * flush


def test_a_step_in_flight_when_a_segment_began_counts_for_it() -> None:
    steps = [(90.0, 30.0), (10.0, 5.0)]
    seg = _segment(_seg("ramp", 500, 100.0, 160.0), _lags(100.0, 160.0, 5.0), steps, 2.0, run_step_s=1.0)
    assert seg["steps"] == 1 and seg["median_step_s"] == 30.0


def test_knee_is_the_highest_rate_sustained_with_every_lower_one() -> None:
    steps = [(t, 4.0) for t in range(0, 400, 5)]
    segs = [_segment(_seg("ramp", 500, 0, 100), _lags(0, 100, 5.0), steps, 2.0),
            _segment(_seg("ramp", 2000, 100, 200), _lags(100, 200, 5.0), steps, 2.0),
            _segment(_seg("ramp", 5000, 200, 300, achieved=5000), _lags(200, 300, 5.0, 0.5), steps, 2.0),
            _segment(_seg("ramp", 10000, 300, 400, achieved=4000), _lags(300, 400, 5.0), steps, 2.0)]
    k = knee(segs)
    assert (k["rate"], k["next_rate"], k["next_why"], k["below"]) == (2000, 5000, "lag grows", [500, 2000])
    assert k["flat_up_to"] == 2000
    above_knee(segs, k)
    # 5,000/s against a knee of 2,000/s: at most (1 - 2000/5000) x 60 = 36 s a minute, plus the saw-tooth.
    assert segs[2]["excess_slope_s_per_min"] == 36.0
    assert segs[2]["slope_ok"] is True  # 30 s a minute
    assert segs[3]["slope_ok"] is True
    assert segs[0]["slope_ok"] is None and segs[1]["slope_ok"] is None


def test_a_rate_the_producer_did_not_reach_leaves_a_lower_bound_where_the_lag_stayed_flat() -> None:
    steps = [(t, 4.0) for t in range(0, 300, 5)]
    segs = [_segment(_seg("ramp", 500, 0, 100), _lags(0, 100, 5.0), steps, 2.0),
            _segment(_seg("ramp", 2000, 100, 200, achieved=1217), _lags(100, 200, 5.0), steps, 2.0),
            _segment(_seg("ramp", 5000, 200, 300, achieved=1648), _lags(200, 300, 5.0), steps, 2.0)]
    k = knee(segs)
    assert (k["rate"], k["next_rate"], k["next_why"], k["flat_up_to"]) == (500, 2000, "not reached", 1648)
