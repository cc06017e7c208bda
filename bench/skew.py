"""Section "skew": a catch-up's rate with a bounded buffer, on even and on skewed partitions (issue
49, item 4, "measured where users run").

`--max-buffer-rows` bounds the rows a run holds; when the buffer is full the run is forced to apply
what is complete (below the global watermark, the lowest partition's resolved ts) before reading on.
When one partition carries most rows (TiCDC's table dispatcher and one busy table), the other
partitions' watermarks run ahead of it while their rows fill the buffer, so a forced step can find
few complete rows: many small steps. Per-partition backpressure (pausing partitions ahead of the
global watermark when the buffer nears full) is meant to make a forced step apply close to a full
buffer of complete rows; this section measures it.

Two insert-heavy streams (`bench.common.stream_shape`: four insert-only tables and one mixed) of
`skew_events` row changes each, per protocol of `skew_protocols`:

- **even**: the simulator's index-value dispatch (a hash of table and key): every table on every
  partition;
- **skewed**: TiCDC's table dispatcher (a table's rows on one partition) and a hot first table
  taking `skew_hot_share` of the changes (`SimConfig.dispatcher`, `SimConfig.hot_share`).

Each is replicated by ``replicator run --until-caught-up`` (a subprocess, as `bench.e2e` runs it)
at every `--max-buffer-rows` of `skew_buffers` (600, 4,000, 20,000, the engine's default and
"unbounded", 10**9), into a warehouse of its own, the two streams alternating at each buffer size.
Per run: wall time and row changes/s; the same after the JVM is up (**apply time**: from the first
Delta commit of the run to the state saved after its last step, `bench.manytables.step_seconds`: a
catch-up reads while its JVM starts, and that start-up, the same in every run, would pull every
ratio towards 1 at a few thousand changes); steps (the run summary's), steps that wrote rows and
their rows (upserts + deletes after the step's per-key collapse, from the step log), median, and
that median over the buffer (how full a step is); the driver's peak RSS; each rate over the
unbounded run's of the same stream and protocol. Every run's tables are checked against the
simulator's expected tables.

Targets (issue 49): a 600-row buffer at >= 0.5x the default buffer's rate and 4,000 rows at >= 0.8x,
on the skewed stream as on the even one (the apply rate; the wall-time ratio is shown next to it).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import DEFAULT_BUFFER_ROWS, UNBOUNDED_BUFFER_ROWS, BenchConfig, fmt, log, mib, run_args
from bench.e2e import Runner, merged, produce_stream, run_replicator

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SKEW_STREAMS: tuple[str, ...] = ("even", "skewed")
TARGETS: tuple[tuple[int, float], ...] = ((600, 0.5), (4_000, 0.8))
"""(buffer rows, at least this times the default buffer's rate) (issue 49)."""


def buffer_label(rows: int) -> str:
    if rows >= UNBOUNDED_BUFFER_ROWS:
        return "unbounded"
    if rows == DEFAULT_BUFFER_ROWS:
        return f"{rows:,} (default)"
    return f"{rows:,}"


def stream_options(kind: str, hot_share: float) -> dict[str, Any]:
    """The `SimConfig` fields of a skew stream on top of the insert-heavy shape."""
    if kind == "even":
        return {}
    if kind == "skewed":
        return {"dispatcher": "table", "hot_share": hot_share}
    raise ValueError(f"unknown skew stream {kind!r}: {', '.join(SKEW_STREAMS)}")


def subprocess_runner(cfg: BenchConfig) -> Runner:
    """`replicator run --until-caught-up` as a subprocess; its log named after its warehouse (several
    runs read one topic)."""

    def run(bootstrap: str, topic: str, protocol: str, warehouse: Path, max_buffer_rows: int,
            workdir: Path) -> dict[str, Any]:
        return run_replicator(bootstrap, topic, protocol, warehouse, max_buffer_rows, workdir, extra=run_args(cfg),
                              log_tag=f"-{warehouse.name}")
    return run


def step_rows(warehouse: Path) -> list[int]:
    """Rows each step that wrote rows wrote (upserts + deletes over its tables), from the step log."""
    from replicator.warehouse import Warehouse

    return [sum(int(t.get("upserts", 0)) + int(t.get("deletes", 0)) for t in merged(r))
            for r in Warehouse(str(warehouse)).windows() if merged(r)]


def _figures(run: dict[str, Any], warehouse: Path, changes: int, buffer: int) -> dict[str, Any]:
    from bench.manytables import step_seconds
    from replicator.warehouse import Warehouse

    rows = step_rows(warehouse)
    apply_s = step_seconds(Warehouse(str(warehouse)))["apply_s"]
    median = statistics.median(rows) if rows else 0.0
    return {"buffer": buffer, "warehouse": str(warehouse), "run": run, "wall_s": run["wall_s"],
            "rows_per_s": changes / max(run["wall_s"], 1e-9), "apply_s": apply_s,
            "apply_rows_per_s": changes / apply_s if apply_s > 0 else 0.0,
            "steps": int(run["summary"].get("steps", 0)), "row_steps": len(rows), "rows_per_step": median,
            "fill": median / buffer if buffer < UNBOUNDED_BUFFER_ROWS else None}


def bench_skew(cfg: BenchConfig, bootstrap: str, scratch: Path, runner: Runner | None = None) -> dict[str, Any]:
    """Section "skew" (Spark-free part): per protocol, produce the even and the skewed stream, then
    replicate each at every buffer size. `runner`: `subprocess_runner(cfg)` unless given (the smoke
    test runs the engine in-process)."""
    run = runner or subprocess_runner(cfg)
    buffers = list(dict.fromkeys(cfg.skew_buffers))
    out: dict[str, Any] = {"events": cfg.skew_events, "partitions": cfg.partitions, "hot_share": cfg.skew_hot_share,
                           "buffers": buffers, "default_buffer": DEFAULT_BUFFER_ROWS, "protocols": {}}
    for i, protocol in enumerate(cfg.skew_protocols):
        streams: dict[str, dict[str, Any]] = {}
        for j, kind in enumerate(SKEW_STREAMS):
            log.info("skew %s %s: simulating %d row changes into the broker", kind, protocol, cfg.skew_events)
            produced = produce_stream(cfg, bootstrap, protocol, cfg.skew_events, cfg.seed + 300 + 10 * i + j,
                                      "insert-heavy", options=stream_options(kind, cfg.skew_hot_share),
                                      label=f"skew-{kind}")
            messages = produced["stats"].get("messages", {})
            produced["records_per_partition"] = [int(messages.get(str(p), 0)) for p in range(cfg.partitions)]
            streams[kind] = produced
        runs: dict[str, dict[str, Any]] = {kind: {} for kind in SKEW_STREAMS}
        for buffer in buffers:  # the two streams alternate at each size: load bursts hit both alike
            for kind in SKEW_STREAMS:
                produced = streams[kind]
                warehouse = scratch / f"wh-skew-{kind}-{protocol}-{buffer}"
                res = run(bootstrap, produced["topic"], protocol, warehouse, buffer, scratch)
                fig = _figures(res, warehouse, int(produced["stats"]["row_changes"]), buffer)
                runs[kind][str(buffer)] = fig
                log.info("skew %s %s, buffer %s: %.1f s wall (%.0f row changes/s), %.1f s applying, %d steps, "
                         "median %.0f rows per step", kind, protocol, buffer_label(buffer), fig["wall_s"],
                         fig["rows_per_s"], fig["apply_s"], fig["steps"], fig["rows_per_step"])
        for kind in SKEW_STREAMS:
            _ratios(runs[kind])
        out["protocols"][protocol] = {"streams": streams, "runs": runs}
    return out


def _ratios(runs: dict[str, dict[str, Any]]) -> None:
    """Each run's rates over the unbounded run's (the largest buffer's, when none is unbounded)."""
    base = runs[max(runs, key=int)]
    for fig in runs.values():
        fig["ratio_wall"] = fig["rows_per_s"] / base["rows_per_s"] if base["rows_per_s"] else 0.0
        fig["ratio_apply"] = fig["apply_rows_per_s"] / base["apply_rows_per_s"] if base["apply_rows_per_s"] else 0.0


def finish_skew(spark: SparkSession, skew: dict[str, Any]) -> None:
    """Section "skew" (Spark part): every run's tables against its stream's expected tables."""
    from replicator.sim.simcheck import check_warehouse

    for protocol, res in skew["protocols"].items():
        for kind, produced in res["streams"].items():
            expected = produced.pop("expected")
            for buffer, fig in res["runs"][kind].items():
                diffs = check_warehouse(spark, fig["warehouse"], expected)
                fig["verified"] = not diffs
                fig["diffs"] = diffs[:5]
                if diffs:
                    log.info("skew %s %s, buffer %s: NOT verified: %s", kind, protocol, buffer, diffs[:3])
            log.info("skew %s %s: verified=%s", kind, protocol, all(f["verified"] for f in res["runs"][kind].values()))


def skew_targets(skew: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """Issue 49's targets: per protocol and stream, the 600- and 4,000-row buffers' apply rate against
    the default buffer's (the wall-time ratio shown next to it)."""
    out: list[tuple[str, str, bool | None]] = []
    default = str(skew["default_buffer"])
    for protocol, res in skew["protocols"].items():
        for kind, runs in res["runs"].items():
            if default not in runs:
                continue
            base = runs[default]
            for buffer, floor in TARGETS:
                fig = runs.get(str(buffer))
                if fig is None:
                    continue
                ratio = fig["apply_rows_per_s"] / base["apply_rows_per_s"] if base["apply_rows_per_s"] else 0.0
                wall = fig["rows_per_s"] / base["rows_per_s"] if base["rows_per_s"] else 0.0
                out.append((f"catch-up with a {buffer:,}-row buffer >= {floor:g}x the default buffer's rate "
                            f"({kind} partitions, {protocol}, {skew['events']:,} changes)",
                            f"{ratio:.2f}x ({fmt(fig['apply_rows_per_s'])} vs {fmt(base['apply_rows_per_s'])} row "
                            f"changes/s once the JVM is up; wall time {wall:.2f}x)", ratio >= floor))
    return out


def render_markdown(skew: dict[str, Any]) -> str:
    """The section's block of ``results.md``."""
    lines = [
        "## 13. Skew: catch-up with a bounded buffer, even and skewed partitions",
        "",
        f"Two insert-heavy streams of {skew['events']:,} row changes (four insert-only tables and one mixed, "
        f"{skew['partitions']} partitions): **even** (rows dispatched by a hash of table and key) and **skewed** "
        f"(TiCDC's table dispatcher, each table on one partition, and a hot table taking {skew['hot_share']:.0%} of "
        "the changes). Each replicated by `replicator run --until-caught-up` (a subprocess) at every "
        "`--max-buffer-rows`, the streams alternating. *Applying*: from the run's first Delta commit to the state "
        "saved after its last step (the JVM's start-up left out, the same in every run). Rows per step: rows "
        "written by each step that wrote rows (median), and that over the buffer. Ratios: over the unbounded run "
        "of the same stream. A buffer at least the stream's row events behaves as unbounded.",
    ]
    for protocol, res in skew["protocols"].items():
        parts = "; ".join(f"{kind} {' / '.join(f'{n:,}' for n in p['records_per_partition'])}"
                          for kind, p in res["streams"].items())
        lines += ["", f"{protocol} (Kafka records per partition: {parts}):", "",
                  "| stream | buffer rows | wall | row changes/s | ÷ unbounded | applying | "
                  "**row changes/s applying** | **÷ unbounded** | steps / with rows | rows per step (fill) | "
                  "driver peak RSS | verified |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
        for kind, runs in res["runs"].items():
            for fig in runs.values():
                fill = "" if fig["fill"] is None else f" ({fig['fill']:.0%})"
                verified = "not checked" if "verified" not in fig else ("yes" if fig["verified"] else "NO")
                lines.append(
                    f"| {kind} | {buffer_label(fig['buffer'])} | {fig['wall_s']:.1f} s | {fmt(fig['rows_per_s'])} | "
                    f"{fig['ratio_wall']:.2f}x | {fig['apply_s']:.1f} s | **{fmt(fig['apply_rows_per_s'])}** | "
                    f"**{fig['ratio_apply']:.2f}x** | {fig['steps']} / {fig['row_steps']} | "
                    f"{fig['rows_per_step']:,.0f}{fill} | {mib(fig['run']['driver_peak_rss'])} | {verified} |")
        for kind, runs in res["runs"].items():
            for buffer, fig in runs.items():
                if fig.get("diffs"):
                    lines += ["", f"First differences ({kind} {protocol}, buffer {buffer_label(int(buffer))}): "
                              + "; ".join(f"`{d}`" for d in fig["diffs"][:5])]
    return "\n".join(lines)

