"""Section "ramp": a follower under a rising input, where its lag starts to grow (issue 49, item 4,
"measured where users run").

One live stream and one following ``replicator run`` (no ``--until-caught-up``; a subprocess, as
the follower section runs it: `bench.follower`) per protocol of `ramp_protocols` and table count
of `ramp_tables`; the follower keeps its JVM across the rates. The input climbs through
`ramp_rates` row changes/s (500, 2,000, 5,000, 10,000), `ramp_seconds` each (60), a resolved
event on every partition every second, then drops to `ramp_drop_rate` (500) for
`ramp_drop_seconds` (45): does the lag recover? Every segment lasts at least `ramp_table_seconds`
(2 s) x the table count (`segment_seconds`): a step that MERGEs every table takes 0.6-0.9 s a
table here, so at 100 tables a 60 s segment would hold less than one step, and its "lag after the
first minute" nothing but the follower's first step (100 CREATE TABLEs). After the drop the stream
ends at a point where the simulator's state is exactly what was sent (`LiveStream.finish`), the
bench waits for the follower to apply it (at most a segment, at least a minute) and stops it with
SIGTERM.

Lag per row as in the follower section (`bench.follower.row_lags`), split by the segment (rate) its
commit ts falls in. Per segment: the rate achieved (the producer is the bench's own Python process,
on the same machine: a rate it did not reach within `REACHED` is marked so); lag p50 / p99 per
third and the slope; p99 after the first minute (after the first third when the segment is shorter
than three minutes); the median step time (a step's ``recorded_at`` in the step log to its last
Delta commit, `bench.follower.step_times`, for the steps that ran during the segment: begun in it,
or in flight when it began; the run's median step when none did); the driver's
RSS (sampled every second: peak and at the end of the segment). The lag **grows** when the last
third's p99 is more than max(2 s, the median step time) above the first third's (a step more or
less in a third moves a percentile by about a step). The **knee** of a run: the highest rate
reached and sustained without lag growing, every lower rate sustained too; the step time there and
at the next rate is what sets it. The drop: lag at its end (rows made in its last `END_WINDOW_S`),
recovered when that p99 is within the bound below.

Targets (issue 49): below the knee (at the knee and every lower rate), p99 lag after the first minute
<= 2.5 x (flush interval + median step time); above it, the lag's slope no steeper than the excess
load explains (`above_knee`); after the drop, recovered.

Rows per table are checked against the simulator's at the end (from the Delta log, no Spark); the
follower section checks a follower's values.
"""

from __future__ import annotations

import statistics
import time
import uuid
from bisect import bisect_left
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import BenchConfig, log, mib
from bench.follower import (
    FLAT_TOLERANCE_S,
    Follower,
    LiveStream,
    StartFollower,
    SubprocessFollower,
    feed,
    lag_stats,
    pct,
    row_lags,
    start_following,
    step_times,
    wait_applied,
)

REACHED = 0.9
"""A rate counts as reached when the producer sent at least this share of it."""
WARM_UP_S = 60.0
LAG_BOUND = 2.5
"""Target: p99 lag after the warm-up <= this x (flush interval + median step time)."""
END_WINDOW_S = 10.0
"""The drop's lag at its end: the rows made in its last this many seconds."""


def flush_interval_s() -> float:
    from replicator.engine.loop import LoopOptions

    return float(LoopOptions.flush_interval_s)


def segment_seconds(seconds: float, table_seconds: float, tables: int) -> float:
    """How long a rate (or the drop) lasts at `tables` tables: `seconds`, or longer at many tables,
    so that a segment holds a few steps (module doc)."""
    return max(seconds, table_seconds * tables)


def bench_ramp(cfg: BenchConfig, bootstrap: str, scratch: Path, start: StartFollower | None = None) -> dict[str, Any]:
    """Section "ramp" (Spark-free): one follower per protocol and table count across every rate."""

    def subprocess_follower(b: str, t: str, p: str, w: Path, d: Path) -> Follower:
        return SubprocessFollower(cfg, b, t, p, w, d)

    out: dict[str, Any] = {"rates": list(cfg.ramp_rates), "seconds": cfg.ramp_seconds, "drop_rate": cfg.ramp_drop_rate,
                           "drop_seconds": cfg.ramp_drop_seconds, "table_seconds": cfg.ramp_table_seconds,
                           "partitions": cfg.partitions,
                           "max_buffer_rows": cfg.max_buffer_rows, "flush_interval_s": flush_interval_s(), "runs": []}
    for i, protocol in enumerate(cfg.ramp_protocols):
        for j, tables in enumerate(cfg.ramp_tables):
            out["runs"].append(_ramp_run(cfg, bootstrap, scratch, start or subprocess_follower, protocol, tables,
                                         cfg.seed + 400 + 10 * i + j, out["flush_interval_s"]))
    return out


def _ramp_run(cfg: BenchConfig, bootstrap: str, scratch: Path, start: StartFollower, protocol: str, tables: int,
              seed: int, flush_s: float) -> dict[str, Any]:
    topic = f"bench-ramp-{protocol}-{tables}-{uuid.uuid4().hex[:8]}"
    warehouse = scratch / f"wh-ramp-{protocol}-{tables}"
    seconds = segment_seconds(cfg.ramp_seconds, cfg.ramp_table_seconds, tables)
    drop_seconds = segment_seconds(cfg.ramp_drop_seconds, cfg.ramp_table_seconds, tables)
    planned = sum(r * seconds for r in cfg.ramp_rates) + cfg.ramp_drop_rate * drop_seconds
    # Generated longer than it is sent: it must not run out before the drop ends (finish() cuts it).
    stream = LiveStream(protocol, seed, bootstrap, topic, events=int(planned * 1.5) + 1000, tables=tables,
                        partitions=cfg.partitions)
    out: dict[str, Any] = {"protocol": protocol, "tables": tables, "topic": topic, "warehouse": str(warehouse),
                           "seconds": seconds, "drop_seconds": drop_seconds}
    segments: list[dict[str, Any]] = []
    follower: Follower | None = None
    try:
        follower, out["startup_s"] = start_following(stream, start, bootstrap, protocol, warehouse, scratch)
        log.info("ramp %s %d tables: follower up after %.1f s", protocol, tables, out["startup_s"])
        sample: Callable[[], int] | None = getattr(follower, "driver_rss", None)
        plan = [("ramp", r, seconds) for r in cfg.ramp_rates]
        plan.append(("drop", cfg.ramp_drop_rate, drop_seconds))
        for kind, rate, seconds in plan:
            samples: list[int] = []

            def on_second(samples: list[int] = samples) -> None:
                if sample is not None:
                    samples.append(sample())

            fed = feed(stream, follower, rate, seconds, on_second=on_second)
            fed.update(kind=kind, driver_rss_peak=max(samples, default=0), driver_rss_end=samples[-1] if samples else 0)
            segments.append(fed)
            log.info("ramp %s %d tables: %s %d row changes/s: sent %d (%.0f/s)", protocol, tables, kind, rate,
                     fed["rows"], fed["achieved_rate"])
        expected = stream.finish()
        final_ts = stream.resolve()
        out["rows_sent"] = stream.rows_sent
        t_drain = time.monotonic()
        out["caught_up"] = wait_applied(warehouse, final_ts, follower, timeout_s=max(60.0, seconds))
        out["drain_s"] = time.monotonic() - t_drain
    finally:
        out["stopped_at"] = time.time()
        if follower is not None:
            out["exit"] = follower.stop()
        stream.close()
    out["counts"] = _count_check(warehouse, expected)
    lags, out["unapplied_rows"] = row_lags(warehouse, stream.produced, out["stopped_at"])
    steps = step_times(warehouse)
    run_step = statistics.median([d for _, d in steps]) if steps else 0.0
    out["median_step_s"] = run_step
    out["segments"] = [_segment(seg, lags, steps, flush_s, run_step) for seg in segments]
    out["knee"] = knee(out["segments"])
    above_knee(out["segments"], out["knee"])
    k = out["knee"]
    log.info("ramp %s %d tables: knee %s row changes/s (median step %.1f s); caught up %s in %.1f s", protocol,
             tables, f"{k['rate']:,}" if k["rate"] else "none", k.get("step_s") or 0.0, out["caught_up"],
             out["drain_s"])
    return out


def _count_check(warehouse: Path, expected: Any) -> dict[str, Any]:
    """Every table's rows (from its Delta log) against the simulator's state where the stream ended."""
    from replicator.delta.rowcount import Inexact, count_rows
    from replicator.warehouse import Warehouse

    state = Warehouse(str(warehouse)).load_state()
    diffs: list[str] = []
    for name, rows in expected.tables.items():
        schema, table = name.split(".", 1)
        entry = state.live_table(schema, table)
        try:
            got = count_rows(entry.path) if entry is not None else None
        except Inexact as exc:
            diffs.append(f"{name}: not counted from its log ({exc})")
            continue
        if got != len(rows):
            diffs.append(f"{name}: {got} rows, expected {len(rows)}")
    return {"tables": len(expected.tables), "rows": sum(len(r) for r in expected.tables.values()), "ok": not diffs,
            "diffs": diffs[:5]}


def _segment(seg: dict[str, Any], lags: list[tuple[float, float]], steps: list[tuple[float, float]],
             flush_s: float, run_step_s: float = 0.0) -> dict[str, Any]:
    """A segment's lag figures from the rows whose commit ts fall in it (see the module doc). A
    segment no step ran in (a drop shorter than the step under way) is bounded with the run's median
    step (`run_step_s`): its rows wait for the next step like any other."""
    lo, hi = seg["started_at"], seg["ended_at"]
    times = [t for t, _ in lags]
    part = lags[bisect_left(times, lo):bisect_left(times, hi)]
    # A step of many tables can outlast a short segment: one in flight when it began counts too.
    durations = [d for at, d in steps if at < hi and (at >= lo or at + d > lo)]
    median_step = statistics.median(durations) if durations else run_step_s
    stats = lag_stats(part, tolerance_s=max(FLAT_TOLERANCE_S, median_step))
    warm = min(WARM_UP_S, (hi - lo) / 3)
    after = [lag for t, lag in part if t >= lo + warm]
    end = [lag for t, lag in part if t >= hi - END_WINDOW_S]
    bound = LAG_BOUND * (flush_s + median_step)
    reached = seg["achieved_rate"] >= REACHED * seg["rate"]
    out = {**seg, "lag": stats, "steps": len(durations), "median_step_s": median_step, "warm_up_s": warm,
           "p99_after_warm_up_s": pct(after, 0.99), "bound_s": bound, "reached": reached,
           "grows": not stats.get("flat", True), "sustained": reached and bool(stats.get("rows")) and stats["flat"],
           "end_p50_s": pct(end, 0.5), "end_p99_s": pct(end, 0.99), "end_max_s": max(end, default=0.0)}
    out["recovered"] = out["end_p99_s"] <= bound if seg["kind"] == "drop" else None
    return out


def knee(segments: list[dict[str, Any]]) -> dict[str, Any]:
    """The highest rate sustained (reached, lag not growing) with every lower rate sustained too; its
    median step time, and the next rate's (where the lag grew or the rate was not reached)."""
    ramp = [s for s in segments if s["kind"] == "ramp"]
    best: dict[str, Any] | None = None
    nxt: dict[str, Any] | None = None
    for s in ramp:
        if not s["sustained"]:
            nxt = s
            break
        best = s
    # The producer (Python, on the same two cores) may not reach a rate the follower would keep up
    # with: the highest rate it did send while the lag stayed flat, every earlier rate flat too, is
    # then a lower bound of the knee that the table states beside it.
    flat = 0.0
    for s in ramp:
        if s["grows"] or not s["lag"].get("rows"):
            break
        flat = max(flat, s["achieved_rate"])
    return {"rate": best["rate"] if best else None, "step_s": best["median_step_s"] if best else None,
            "flat_up_to": flat,
            "next_rate": nxt["rate"] if nxt else None, "next_step_s": nxt["median_step_s"] if nxt else None,
            "next_why": None if nxt is None else ("not reached" if not nxt["reached"] else "lag grows"),
            "below": [s["rate"] for s in ramp if best is not None and s["rate"] <= best["rate"]]}


def above_knee(segments: list[dict[str, Any]], k: dict[str, Any]) -> None:
    """Marks each rate above the knee with the lag slope its excess load explains (issue 49: "lag
    grows no faster than the excess load requires"). A follower that applies C row changes/s fed R > C
    advances through upstream time at C / R of the wall clock's pace, so its lag grows by (1 - C / R)
    x 60 s a minute; the knee's rate is a lower bound of C, so this is the most the slope may be,
    plus what one step's saw-tooth can tilt a line fitted over the segment (60 x max(2 s, the median
    step) / the segment's span)."""
    for s in segments:
        s["excess_slope_s_per_min"] = s["slope_ok"] = None
        if s["kind"] != "ramp" or k["rate"] is None or s["rate"] <= k["rate"] or not s["lag"].get("rows"):
            continue
        achieved = max(s["achieved_rate"], 1e-9)
        excess = max(0.0, 1.0 - k["rate"] / achieved) * 60.0
        saw = 60.0 * max(FLAT_TOLERANCE_S, s["median_step_s"]) / max(s["lag"]["span_s"], 1.0)
        s["excess_slope_s_per_min"] = excess
        s["slope_ok"] = s["lag"]["slope_s_per_min"] <= excess + saw


def ramp_targets(ramp: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """Issue 49's target per protocol and table count: at and below the knee, p99 lag after the first
    minute <= 2.5 x (flush interval + median step time)."""
    out: list[tuple[str, str, bool | None]] = []
    for run in ramp["runs"]:
        label = (f"follower ramp, at and below the knee: p99 lag after the first minute <= {LAG_BOUND:g} x "
                 f"(flush interval + median step) ({run['protocol']}, {run['tables']} tables)")
        below = [s for s in run["segments"] if s["kind"] == "ramp" and s["rate"] in run["knee"]["below"]]
        if not below:
            out.append((label, "no rate sustained", None))
            continue
        worst = max(below, key=lambda s: s["p99_after_warm_up_s"] / max(s["bound_s"], 1e-9))
        ok = all(s["p99_after_warm_up_s"] <= s["bound_s"] for s in below)
        out.append((label, f"knee {run['knee']['rate']:,}/s; worst {worst['p99_after_warm_up_s']:.1f} s vs "
                           f"{worst['bound_s']:.1f} s at {worst['rate']:,}/s", ok))
        over = [s for s in run["segments"] if s.get("slope_ok") is not None]
        if over:
            label = (f"follower ramp, above the knee: lag grows no faster than the excess load requires: "
                     f"(1 - knee / rate) x 60 s/min ({run['protocol']}, {run['tables']} tables)")
            said = "; ".join(f"{s['rate']:,}/s ({s['achieved_rate']:,.0f} sent): {s['lag']['slope_s_per_min']:+.1f} "
                             f"vs {s['excess_slope_s_per_min']:.1f} s/min" for s in over)
            out.append((label, said, all(s["slope_ok"] for s in over)))
    return out


def render_markdown(ramp: dict[str, Any]) -> str:
    """The section's block of ``results.md``."""
    lines = [
        "## 14. Follower ramp: where lag starts to grow",
        "",
        f"`replicator run` following a live topic (a subprocess, `--max-buffer-rows {ramp['max_buffer_rows']:,}`, "
        f"flush interval {ramp['flush_interval_s']:g} s), one per protocol and table count, fed "
        + ", ".join(f"{r:,}" for r in ramp["rates"])
        + f" row changes/s for {ramp['seconds']:.0f} s each ({ramp['partitions']} partitions, a resolved event per "
        f"partition every second), then {ramp['drop_rate']:,}/s for {ramp['drop_seconds']:.0f} s (the drop); "
        f"at many tables each segment lasts at least {ramp.get('table_seconds', 0.0):g} s a table. Lag "
        "of a row: the Delta commit time of the MERGE that applied it minus its commit ts, by the segment its "
        f"commit ts falls in. A rate is *reached* when the bench's producer sent >= {REACHED:.0%} of it; the lag "
        "*grows* when the last third's p99 is more than max(2 s, median step) above the first third's; the "
        "*knee*: the highest rate reached without the lag growing, every lower one too. Step time: a step's "
        "`recorded_at` to its last Delta commit. Bound: "
        f"{LAG_BOUND:g} x (flush interval + median step).",
    ]
    summary = ["", "| protocol | tables | **knee** (row changes/s) | median step at the knee | next rate: median step, "
               "why | drop: p99 at its end | rows per table | caught up after the drop |",
               "| --- | ---: | ---: | ---: | --- | ---: | --- | --- |"]
    for run in ramp["runs"]:
        k = run["knee"]
        drop = next((s for s in run["segments"] if s["kind"] == "drop"), None)
        nxt = "–" if k["next_rate"] is None else (f"{k['next_rate']:,}/s: {k['next_step_s']:.1f} s, "
                                                  f"{k['next_why']}")
        if k["next_why"] == "not reached" and k.get("flat_up_to"):
            nxt += f"; lag flat at every rate sent, up to {k['flat_up_to']:,.0f}/s"
        drop_end = "–" if drop is None else (f"{drop['end_p99_s']:.1f} s ("
                                             + ("recovered" if drop["recovered"] else "**not recovered**") + ")")
        counts = run.get("counts", {})
        summary.append(
            f"| {run['protocol']} | {run['tables']} | **{'none' if k['rate'] is None else format(k['rate'], ',')}** | "
            + ("–" if k["step_s"] is None else f"{k['step_s']:.1f} s") + f" | {nxt} | {drop_end} | "
            + ("equal" if counts.get("ok") else f"NO: {'; '.join(counts.get('diffs', []))}") + " | "
            + f"{'yes' if run.get('caught_up') else 'NO'}, {run.get('drain_s', 0.0):.0f} s |")
    lines += summary
    for run in ramp["runs"]:
        segs = run["segments"]
        lines += ["", f"{run['protocol']}, {run['tables']} tables ({run.get('seconds', ramp['seconds']):.0f} s a rate, "
                      f"{run.get('drop_seconds', ramp['drop_seconds']):.0f} s the drop; follower start-up "
                      f"{run.get('startup_s', 0):.0f} s, "
                      f"not lag; {run.get('unapplied_rows', 0):,} rows never applied):", "",
                  "| | " + " | ".join(f"{s['rate']:,}/s" + (" (drop)" if s["kind"] == "drop" else "") for s in segs)
                  + " |", "| --- | " + " | ".join("---:" for _ in segs) + " |"]

        def row(label: str, fn: Callable[[dict[str, Any]], str], segs: list[dict[str, Any]] = segs,
                lines: list[str] = lines) -> None:
            lines.append(f"| {label} | " + " | ".join(fn(s) for s in segs) + " |")

        def thirds(s: dict[str, Any], key: str) -> str:
            th = s["lag"].get("thirds")
            return " / ".join(f"{t[key]:.1f}" for t in th) + " s" if th else "–"

        row("achieved row changes/s",
            lambda s: f"{s['achieved_rate']:,.0f}" + ("" if s["reached"] else " (not reached)"))
        row("lag p50 per third", lambda s: thirds(s, "p50_s"))
        row("lag p99 per third", lambda s: thirds(s, "p99_s"))
        row("**p99 after the warm-up** / bound",
            lambda s: f"**{s['p99_after_warm_up_s']:.1f} s** / {s['bound_s']:.1f} s (after {s['warm_up_s']:.0f} s)")
        row("slope", lambda s: f"{s['lag'].get('slope_s_per_min', 0.0):+.1f} s/min")
        row("lag grows", lambda s: "**yes**" if s["grows"] else "no")
        row("above the knee: slope the excess load explains",
            lambda s: "–" if s.get("slope_ok") is None else
            f"{s['excess_slope_s_per_min']:.1f} s/min ({'within' if s['slope_ok'] else '**faster**'})")
        row("median step time (steps run during it)",
            lambda s: f"{s['median_step_s']:.1f} s ({s['steps']})" if s["steps"] else "– (0)")
        row("lag at the end (last 10 s): p50 / p99 / max",
            lambda s: f"{s['end_p50_s']:.1f} / {s['end_p99_s']:.1f} / {s['end_max_s']:.1f} s")
        row("driver RSS: peak / at the end", lambda s: f"{mib(s['driver_rss_peak'])} / {mib(s['driver_rss_end'])}")
        ex = run.get("exit", {})
        lines += ["", f"Peak RSS over the run: Python driver {mib(ex.get('driver_peak_rss', 0))}, JVM "
                      f"{mib(ex.get('jvm_peak_rss', 0))}; SIGTERM: exit code {ex.get('exit_code')}."]
    return "\n".join(lines)
