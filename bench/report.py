"""The report: ``results.md`` (targets and one block per section), ``results.png`` (four panels,
chart.py) and ``results.json`` (the raw figures, which git ignores); the targets are targets.py."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.chart import render_chart
from bench.codecs import GO_DECODE_NS, GO_ENCODE_NS, SEED_SIZES
from bench.common import BenchConfig, fmt, mib, rate
from bench.profiling import STAGES
from bench.streams import render_jobs_md, render_streams_md
from bench.targets import targets


def _yes(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**not met**")


def render_markdown(results: dict[str, Any], cfg: BenchConfig) -> str:
    """``results.md``: the header and the targets, then one block per section in the report's order
    (a new section adds its block to this tuple)."""
    lines = _header_md(results, cfg)
    e2e, resources = _e2e_md(results, cfg)
    for block in (_codec_md(results), e2e, render_streams_md(results), render_jobs_md(results), _scale_md(results),
                  _features_md(results), _schema_md(results), resources, _profile_md(results, cfg), _peer_md(results),
                  _tables_md(results), _follower_md(results), _reader_md(results), _objectstore_md(results),
                  _manytables_md(results), _own_md(results, "skew"), _own_md(results, "ramp"),
                  _own_md(results, "follow"), _own_md(results, "longlog")):
        lines += block
    notes = results.get("notes")
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    lines += ["", "Raw figures: `bench/results.json` (not committed). Re-run: `make bench` "
                  "(`make bench BENCH_ARGS=\"--events 100000\"`; `--quick` for a short smoke run).", ""]
    return "\n".join(lines)


def _schema_md(results: dict[str, Any]) -> list[str]:
    """Schema change at lake scale: RENAME COLUMN, rewrite vs metadata-only."""
    if not results.get("schema"):
        return []
    from bench.schema import render_markdown as render_schema

    return ["", render_schema(results["schema"])]


def _own_md(results: dict[str, Any], name: str) -> list[str]:
    """A section whose module renders its own block (``bench.<name>.render_markdown``)."""
    if not results.get(name):
        return []
    return ["", importlib.import_module(f"bench.{name}").render_markdown(results[name])]


def _manytables_md(results: dict[str, Any]) -> list[str]:
    """Many tables, measured: CREATE + first write of N tables, Delta's floor, shards, projection."""
    if not results.get("manytables"):
        return []
    from bench.manytables import render_markdown as render_manytables

    return ["", render_manytables(results["manytables"])]


def _features_md(results: dict[str, Any]) -> list[str]:
    """Table features: a 100-row MERGE vs a 100-row append per profile; deletion vectors at scale."""
    if not results.get("features"):
        return []
    from bench.features import render_markdown as render_features

    return ["", render_features(results["features"])]


def _header_md(results: dict[str, Any], cfg: BenchConfig) -> list[str]:
    """Title, machine, versions, load, and the targets table."""
    m = results["machine"]
    lines = [
        "# replicator benchmark results",
        "",
        f"Measured in one run of `python -m bench {' '.join(results['argv'])}` on {m['date']} "
        f"(git `{m['git']}`), total {results['elapsed_s'] / 60:.1f} min.",
        "",
        f"- **Machine:** {m['cores']} cores ({m['cpu']}), {m['ram_gib']} GiB RAM, {m['os']}",
        f"- **Load average (1/5/15 min):** {' / '.join(map(str, m['load_start']))} at start, "
        f"{' / '.join(map(str, results['load_end']))} at the end (other jobs shared the machine; "
        "best-of-N figures are the least disturbed)",
        f"- **Versions:** Python {m['python']}, PySpark {m['pyspark']}, delta-spark {m['delta-spark']}, "
        f"kafka-python {m['kafka-python']} (crc32c {m['crc32c']}), pyarrow {m['pyarrow']}, {m['java']}",
        "",
        "## Targets",
        "",
        "| target | measured | |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {t} | {v} | {_yes(ok)} |" for t, v, ok in targets(results, cfg)]
    return lines


def _codec_md(results: dict[str, Any]) -> list[str]:
    """## 1. Codecs."""
    lines: list[str] = []
    codec = results.get("codec")
    if codec:
        c0 = codec["case0"]
        lines += [
            "",
            "## 1. Codecs",
            "",
            "Case 0 (the reference's message: one update of `a.b`, 8 new + 8 old columns), ns per message, "
            "pure Python on one core: best of N rounds of process CPU time (median; best wall-clock round), "
            "rounds interleaved across the codecs. The reference's case-0 data writes relaxed dates "
            "('2021/01/02 00:00:00'); the last row decodes the same message as TiCDC writes it. The Go figures "
            "are the seed's own (another machine).",
            "",
            "| | Craft (Python) | Open Protocol (Python) | Craft (seed, Go) |",
            "| --- | ---: | ---: | ---: |",
        ]
        for op, label, go in (("decode", "decode", fmt(GO_DECODE_NS)), ("encode", "encode", fmt(GO_ENCODE_NS)),
                              ("decode_ticdc", "decode, dates as TiCDC writes them ('-')", "")):
            cr, op_ = c0["craft"][op], c0["open"][op]
            lines.append(f"| {label} | {fmt(cr['min_ns'])} ({fmt(cr['median_ns'])}; {fmt(cr['wall_min_ns'])}) | "
                         f"{fmt(op_['min_ns'])} ({fmt(op_['median_ns'])}; {fmt(op_['wall_min_ns'])}) | {go} |")
        w = codec["workload"]
        lines += [
            "",
            f"Multi-table workload: the same {w['events']:,} events ({w['row_events']:,} row changes over "
            f"{w['tables']} tables, plus resolved and CREATE TABLE events) encoded in both protocols "
            "(16 rows per message); best of N interleaved rounds of process CPU time:",
            "",
            "| | Craft | Open Protocol | Craft / Open |",
            "| --- | ---: | ---: | ---: |",
        ]
        cw, ow = w["craft"], w["open"]
        for label, key, digits in (("decode events/s", "decode_events_per_s", 0), ("decode MB/s", "decode_mb_per_s", 1),
                                   ("decode ns/event", "decode_ns_per_event", 0),
                                   ("encode events/s", "encode_events_per_s", 0), ("encode MB/s", "encode_mb_per_s", 1),
                                   ("bytes per row event", "bytes_per_row", 0),
                                   ("zlib bytes per row event", "zlib_bytes_per_row", 0)):
            lines.append(f"| {label} | {fmt(cw[key], digits)} | {fmt(ow[key], digits)} | "
                         f"{cw[key] / ow[key]:.2f} |")
        sink = codec.get("storage_sink")
        if sink:
            kafka = sink["kafka_canal_json"]["rows_per_s"]
            lines += [
                "",
                f"Storage sink (no Kafka): the same kind of stream ({sink['events']:,} events, "
                f"{sink['tables']} tables) "
                "written as TiCDC's storage sink lays it out, then listed, read and decoded by the source "
                "`run --storage-sink` uses (process CPU time, best of N), in rounds interleaved with canal-json's "
                "decode of the codec workload's Kafka messages (already in memory, so the comparison favours Kafka):",
                "",
                "| | CSV files | canal-json files | canal-json messages (decode only) |",
                "| --- | ---: | ---: | ---: |",
                f"| row events/s | {fmt(sink['csv']['rows_per_s'])} | {fmt(sink['canal-json']['rows_per_s'])} | "
                f"{fmt(kafka)} |",
                f"| files / bytes | {sink['csv']['files']} / {fmt(sink['csv']['bytes'])} | "
                f"{sink['canal-json']['files']} / {fmt(sink['canal-json']['bytes'])} | |",
            ]
        crc = codec.get("crc", {})
        if "c_extension" in crc:
            lines += [
                "",
                f"Kafka fetch: kafka-python checks each record batch's CRC-32C. Pure-Python fallback "
                f"{crc['pure_python']:.1f} ns/byte vs the `crc32c` C extension {crc['c_extension']:.3f} ns/byte "
                f"(now a dependency): for this workload's Open Protocol messages "
                f"({w['open']['bytes_per_row']:,.0f} bytes per row event) the fallback alone would cost "
                f"{crc['pure_python'] * w['open']['bytes_per_row'] / 1000:.0f} µs per row event, more than decoding.",
            ]
        s = codec["sizes"]
        lines += [
            "",
            "Message sizes in bytes (Open Protocol: key + value; zlib level 6 per message):",
            "",
            "| message | Craft | Open Protocol | Craft zlib | Open Protocol zlib |",
            "| --- | ---: | ---: | ---: | ---: |",
            f"| case 0 (this codec) | {s['case0']['craft']['raw']} | {s['case0']['open']['raw']} | "
            f"{s['case0']['craft']['zlib']} | {s['case0']['open']['zlib']} |",
            f"| case 0 (seed's table) | {SEED_SIZES['craft']} | {SEED_SIZES['open']} | {SEED_SIZES['craft_zlib']} | "
            f"{SEED_SIZES['open_zlib']} |",
            f"| {s['batch16']['rows']} rows of the workload, one message | {s['batch16']['craft']['raw']} | "
            f"{s['batch16']['open']['raw']} | {s['batch16']['craft']['zlib']} | {s['batch16']['open']['zlib']} |",
        ]
    return lines


def _e2e_md(results: dict[str, Any], cfg: BenchConfig) -> tuple[list[str], list[str]]:
    """## 2. End to end, and ## 4. Resources (figures of the same runs, placed after section 3)."""
    lines: list[str] = []
    resources_at = 0
    e2e = results.get("e2e")
    if e2e:
        lines += [
            "",
            "## 2. End to end",
            "",
            f"{cfg.events:,} simulated row changes over {cfg.tables} tables and {cfg.partitions} partitions (plus "
            "the stream's at-least-once replays), produced into a local Kafka broker started by the bench; "
            f"`replicator run --until-caught-up --max-buffer-rows {cfg.max_buffer_rows:,}` as a subprocess "
            "(wall time includes Python and JVM start-up). Baselines in the same run: a plain Delta append of "
            "the same final rows into fresh tables (same schema and table properties; create + append timed; "
            "best of N after an untimed warm-up), reading the topic alone, and reading + decoding it (no apply). "
            f"A cold Spark session start took {results.get('spark_start_s', 0.0):.1f} s in the bench process.",
            "",
            "| | " + " | ".join(e2e) + " |",
            "| --- | " + " | ".join("---:" for _ in e2e) + " |",
        ]

        def row(label: str, fn: Callable[[dict[str, Any]], str]) -> None:
            lines.append(f"| {label} | " + " | ".join(fn(r) for r in e2e.values()) + " |")

        def rate(r: dict[str, Any]) -> float:
            return float(r["run"]["summary"]["rows"]) / float(r["run"]["wall_s"])

        def rate_warm(r: dict[str, Any]) -> float:
            warm = float(r["run"]["wall_s"]) - float(results.get("spark_start_s", 0.0))
            return float(r["run"]["summary"]["rows"]) / max(warm, 1e-9)

        row("Kafka records / row events read",
            lambda r: f"{r['stream']['records']:,} / {r['run']['summary']['rows']:,}")
        row("replicated: wall time", lambda r: f"{r['run']['wall_s']:.1f} s")
        row("replicated: engine time (summary)", lambda r: f"{r['run']['summary']['elapsed_s']:.1f} s")
        row("replicated: DDLs, steps that MERGEd rows / MERGEs / median changes per MERGE",
            lambda r: f"{r['steps']['ddl']}, {r['steps']['windows']} / {r['steps']['merges']} / "
                      f"{r['steps']['rows_per_merge']:,.0f}")
        row("**replicated rows/s** (row events / wall)", lambda r: f"**{fmt(rate(r))}**")
        row("final rows", lambda r: f"{r['append']['rows']:,}")
        row("plain append: time", lambda r: f"{r['append']['elapsed_s']:.1f} s")
        row("**plain append rows/s**", lambda r: f"**{fmt(r['append']['rows_per_s'])}**")
        row("replicated rows/s without start-up (wall − cold Spark start)",
            lambda r: fmt(rate_warm(r)))
        row("read only: records/s (best of N)", lambda r: fmt(r['consume']['records'] / r['consume']['elapsed_s']))
        row("read + decode: row events/s (best of N)",
            lambda r: fmt(r['decode']['rows'] / r['decode']['elapsed_s']))
        row("read + decode: CPU per row event", lambda r: f"{r['decode']['cpu_s'] / r['decode']['rows'] * 1e6:.1f} µs")
        row("**ratio** replicated ÷ append", lambda r: f"**{rate(r) / r['append']['rows_per_s']:.2f}**")
        row("ratio replicated ÷ read + decode",
            lambda r: f"{rate(r) / (r['decode']['rows'] / r['decode']['elapsed_s']):.2f}")
        row("result equals the simulator's expected tables", lambda r: "yes" if r["verified"] else "NO")
        resources_at = len(lines)
        lines += [
            "",
            "## 4. Resources (the end-to-end runs of section 2)",
            "",
            "| | " + " | ".join(e2e) + " |",
            "| --- | " + " | ".join("---:" for _ in e2e) + " |",
        ]
        row("peak RSS, Python driver", lambda r: mib(r["run"]["driver_peak_rss"]))
        row("peak RSS, its JVM", lambda r: mib(r["run"]["jvm_peak_rss"]))
        row("CPU time, Python driver", lambda r: f"{r['run']['driver_cpu_s']:.0f} s")
        row("CPU time, its JVM", lambda r: f"{r['run']['jvm_cpu_s']:.0f} s")

        def files(r: dict[str, Any], key: str) -> str:
            vals = [t[key] for t in r["files"].values()]
            return f"{sum(vals):,} (per table {min(vals)}–{max(vals)})" if vals else "-"

        row("data files in the current snapshots", lambda r: files(r, "live_files"))
        row("data files on disk (incl. superseded)", lambda r: files(r, "parquet_on_disk"))
        row("deletion-vector files", lambda r: files(r, "dv_files"))
        row("change-data-feed files", lambda r: files(r, "cdf_files"))
        row("Delta commits", lambda r: files(r, "log_commits"))
    return lines[:resources_at], lines[resources_at:]


def _scale_md(results: dict[str, Any]) -> list[str]:
    """## 3. Scale."""
    lines: list[str] = []
    scale = results.get("scale")
    if scale:
        lines += [
            "",
            f"## 3. Scale: MERGE of {scale['changes']:,} changes into a growing table",
            "",
            f"A fixed change set ({scale['changes']:,} changes: 60% updates and 20% deletes among the newest 50,000 "
            "keys, 20% inserts of new keys) applied by the engine's own `TableWriter.merge` into a table of N rows "
            f"(ids ascending, {scale['rows_per_file']:,} rows per file, deletion vectors on; the bench's own "
            "Spark session, whose JVM CPU time per MERGE is shown too). *Before*: the ON clause "
            "is the key equality only; *after*: it also bounds the key to the change set's [min, max], so Delta "
            "skips files by their statistics. Median of the rounds (each from the same table version).",
            "",
            "| table rows | data files | MERGE before | MERGE after | JVM CPU before | JVM CPU after | load time |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for size, r in scale["sizes"].items():
            lines.append(f"| {int(size):,} | {r.get('files', '-')} | {r['before_s']:.2f} s | {r['after_s']:.2f} s | "
                         f"{r.get('before_cpu_s', 0.0):.2f} s | {r.get('after_cpu_s', 0.0):.2f} s | "
                         f"{r['load_s']:.1f} s |")
        if "growth" in scale:
            g = scale["growth"]
            lines += ["", f"Growth {g['from']:,} → {g['to']:,} rows, wall time: **{g['before']:.2f}x** before, "
                          f"**{g['after']:.2f}x** after (JVM CPU time: {g.get('before_cpu', 0.0):.2f}x before, "
                          f"{g.get('after_cpu', 0.0):.2f}x after)."]
    return lines


def _profile_md(results: dict[str, Any], cfg: BenchConfig) -> list[str]:
    """## 5. Where the end-to-end time goes."""
    lines: list[str] = []
    prof = results.get("profile")
    if prof:
        protos = [p for p in cfg.protocols if p in prof]
        lines += [
            "",
            "## 5. Where the end-to-end time goes",
            "",
            f"cProfile of the engine in-process (`Engine.run`, --until-caught-up) on {prof['events']:,} row changes; "
            "cumulative seconds per stage (stages nest: decode and Kafka fetch run between MERGEs, the JVM "
            "figure is time spent waiting on Spark).",
            "",
            "| stage | " + " | ".join(protos) + " |",
            "| --- | " + " | ".join("---:" for _ in protos) + " |",
            "| wall | " + " | ".join(f"{prof[p]['wall_s']:.1f} s" for p in protos) + " |",
            "| Python CPU (driver) | " + " | ".join(f"{prof[p]['python_cpu_s']:.1f} s" for p in protos) + " |",
        ]
        for label, _, _ in STAGES:
            lines.append(f"| {label} | " + " | ".join(f"{prof[p]['stages'][label]:.2f} s" for p in protos) + " |")
    return lines


def _peer_md(results: dict[str, Any]) -> list[str]:
    """## 6. The peer: what a Spark user would write instead (same topics as section 2)."""
    peer, e2e = results.get("peer"), results.get("e2e", {})
    if not peer:
        return []
    protos = [p for p in peer if p in e2e]
    lines = [
        "",
        "## 6. The peer: Spark Structured Streaming on the same topics",
        "",
        "What a Spark user would write instead of the replicator (`bench/peer.py`), run as a subprocess right "
        "after the replicator's run of section 2 on the same topic: Spark's Kafka source, `Trigger.AvailableNow`, "
        "`foreachBatch` decoding each micro-batch with this project's codecs, the last change per key by commit "
        "ts, one MERGE per table per micro-batch, idempotent through `txnAppId` = the query id and `txnVersion` = "
        "the batch id. Micro-batches are bounded by `maxOffsetsPerTrigger`, sized to about the replicator's "
        "`--max-buffer-rows` row changes. It ignores resolved timestamps and DDL barriers; its tables are checked "
        "against the simulator's expected ones and every difference is counted, not hidden. Both wall times "
        "include Python and JVM start-up.",
        "",
        "| | " + " | ".join(protos) + " |",
        "| --- | " + " | ".join("---:" for _ in protos) + " |",
    ]

    def row(label: str, fn: Callable[[dict[str, Any], dict[str, Any]], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(fn(peer[p], e2e[p]) for p in protos) + " |")

    def batches(r: dict[str, Any], key: str) -> float:
        return sum(float(b[key]) for b in r["run"]["batches"])

    row("row events read (peer / replicator)", lambda r, e: f"{r['run']['rows']:,} / {e['run']['summary']['rows']:,}")
    row("micro-batches (maxOffsetsPerTrigger)",
        lambda r, e: f"{len(r['run']['batches'])} ({r['run']['max_offsets_per_trigger'] or 'unbounded'})")
    row("MERGEs: peer / replicator", lambda r, e: f"{r['run']['merges']} / {e['steps']['merges']}")
    row("peer: wall time", lambda r, e: f"{r['run']['wall_s']:.1f} s")
    row("peer, summed over micro-batches: Kafka read (toArrow) / decode / CREATE TABLE / MERGEs",
        lambda r, e: f"{batches(r, 'read_s'):.1f} s / {batches(r, 'decode_s'):.1f} s / "
                     f"{batches(r, 'create_s'):.1f} s / {batches(r, 'merge_s'):.1f} s")
    row("**peer rows/s**", lambda r, e: f"**{fmt(rate(r['run']))}**")
    row("**replicator rows/s** (section 2)", lambda r, e: f"**{fmt(rate(e['run']))}**")
    row("**replicator ÷ peer**", lambda r, e: f"**{rate(e['run']) / max(rate(r['run']), 1e-9):.2f}x**")
    row("peak RSS: Python driver / JVM",
        lambda r, e: f"{mib(r['run']['driver_peak_rss'])} / {mib(r['run']['jvm_peak_rss'])}")

    def verdict(r: dict[str, Any]) -> str:
        if "verified" not in r:
            return "not checked"
        if r["verified"]:
            return "yes"
        kinds = ", ".join(f"{n} {k}" for k, n in r["diff_kinds"].items() if n)
        return f"NO: {r['diff_count']:,} differences in {len(r['wrong_tables'])} tables ({kinds})"

    row("peer's result equals the simulator's expected tables", lambda r, e: verdict(r))
    for p in protos:
        if peer[p].get("diffs"):
            lines += ["", f"First differences of the peer's tables ({p}): "
                          + "; ".join(f"`{d}`" for d in peer[p]["diffs"][:5])]
    return lines


def _tables_md(results: dict[str, Any]) -> list[str]:
    """## 7. Many tables: the same row changes over few and many tables."""
    tables = results.get("tables")
    if not tables:
        return []
    runs = sorted(tables["runs"].values(), key=lambda r: int(r["tables"]))
    lines = [
        "",
        f"## 7. Many tables: {tables['events']:,} row changes over {runs[0]['tables']} and {runs[-1]['tables']} tables",
        "",
        f"The same number of simulated row changes ({tables['protocol']}, {tables['partitions']} partitions) over "
        f"{runs[0]['tables']} and over {runs[-1]['tables']} tables, each replicated by `replicator run "
        "--until-caught-up` (a subprocess) into a warehouse of its own. A CREATE TABLE holds back only its own "
        "table's rows, so one step can hold every table's CREATE TABLE (created concurrently) and then its "
        "first rows; a window step MERGEs every table with changes in it. The rate counts the simulated row changes "
        "(replays re-sent by the stream come on top, more with more tables). Step times from the step log (a "
        "step's `recorded_at` to the next one's).",
        "",
        "| | " + " | ".join(f"{r['tables']} tables" for r in runs) + " |",
        "| --- | " + " | ".join("---:" for _ in runs) + " |",
    ]

    def row(label: str, fn: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"| {label} | " + " | ".join(fn(r) for r in runs) + " |")

    row("row changes / row events read (with the stream's replays)",
        lambda r: f"{r['stream']['stats']['row_changes']:,} / {r['run']['summary']['rows']:,}")
    row("wall time", lambda r: f"{r['run']['wall_s']:.1f} s")
    row("**row changes/s** (row changes / wall)", lambda r: f"**{fmt(r['rows_per_s'])}**")
    row("DDLs (CREATE TABLE) / time of steps with DDLs only",
        lambda r: f"{r['steps']['ddl']} / {r['steps'].get('ddl_s', 0):.1f} s")
    row("steps that MERGEd rows / MERGEs", lambda r: f"{r['steps']['windows']} / {r['steps'].get('merges', 0)}")
    row("time per window step: median / max",
        lambda r: f"{r['steps'].get('window_median_s', 0):.1f} s / {r['steps'].get('window_max_s', 0):.1f} s")
    row("window time per MERGE", lambda r: f"{r['steps'].get('s_per_merge', 0):.2f} s")
    row("peak RSS: Python driver / JVM",
        lambda r: f"{mib(r['run']['driver_peak_rss'])} / {mib(r['run']['jvm_peak_rss'])}")
    row("result equals the simulator's expected tables",
        lambda r: "not checked" if "verified" not in r else ("yes" if r["verified"] else "NO"))
    lines += ["", f"{runs[-1]['tables']} tables replicate at **{tables['ratio']:.2f}x** the "
                  f"{runs[0]['tables']}-table rate."]
    return lines


def _reader_md(results: dict[str, Any]) -> list[str]:
    """## 9. The Spark reader next to the driver reader."""
    r = results.get("reader")
    if not r:
        return []
    sizes = sorted(r["sizes"].items(), key=lambda kv: int(kv[0]))
    lines = [
        "",
        "## 9. The Spark reader (`--reader spark`) vs the driver reader",
        "",
        f"The same simulated topic ({r['protocol']}, {r['partitions']} partitions, {r['tables']} tables) replicated "
        "by `replicator run --until-caught-up` (a subprocess, Spark `local[*]`) once per reader. The Spark reader "
        "reads and decodes on the executors (one task per Kafka partition) and MERGEs from distributed change sets; "
        "the driver reader reads with kafka-python and decodes in the Python driver.",
        "",
        "| row changes | reader | wall | **row changes/s** | peak RSS: Python driver / JVM | verified |",
        "| ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for events, size in sizes:
        for name in ("driver", "spark"):
            run = size["runs"][name]
            lines.append(
                f"| {int(events):,} | {name} | {run['run']['wall_s']:.1f} s | **{fmt(run['rows_per_s'])}** | "
                f"{mib(run['run']['driver_peak_rss'])} / {mib(run['run']['jvm_peak_rss'])} | "
                + ("not checked" if "verified" not in run else ("yes" if run["verified"] else "NO")) + " |")
    d = r["decode"]
    lines += ["", "Spark reader ÷ driver reader (row changes/s): "
              + ", ".join(f"{ratio:.2f}x at {int(e):,}" for e, ratio in ((e, s["ratio"]) for e, s in sizes)) + ".",
              "", f"One executor core decodes **{fmt(d['rows_per_core_s'])} row changes/s** "
                  f"({d['rows']:,} row changes of {d['records']:,} records in {d['cpu_s']:.1f} s CPU, the executors' "
                  "decode function timed in the bench process)."]
    return lines


def _objectstore_md(results: dict[str, Any]) -> list[str]:
    """## 10. Object store: a local warehouse vs an s3a:// one."""
    o = results.get("objectstore")
    if not o:
        return []
    from bench.objectstore import TARGET_RATIO

    lines = [
        "",
        "## 10. Object store: a local warehouse vs an `s3a://` warehouse",
        "",
        f"The same simulated stream ({o['events']:,} row changes, {o['tables']} tables, {o['partitions']} partitions) "
        "replicated by `replicator run --until-caught-up` (a subprocess) into a local warehouse and into an "
        f"`s3a://` warehouse on a local S3-compatible server (S3Proxy over a local directory, {o['endpoint']}, "
        "started by the section), alternating local / s3a:// "
        f"{o['pairs']} time(s), each run into a warehouse of its own. The s3a:// run reaches the store as a user's "
        "would: Delta through Hadoop's s3a file system, the replicator's own state (state.json, the step log in "
        "segments, the writer lease) through its S3 client with conditional writes. What it measures is the "
        "object-store path's own cost on one machine (requests, no rename, listings, the lease), not a network's: "
        f"the target is an s3a:// rate of at least {TARGET_RATIO:g}x the local one (best run of each). Cost split "
        "from each run's JSON summary: state writes (`state_write_s`: state.json and the step log, on each step's "
        "path), the lease's renewals (`lease_renewals` / `lease_renew_s`, a background thread) and Delta's side "
        "(the engine's wall time, `elapsed_s`, minus those two: reading, MERGEs and commits, Spark's start-up), "
        "per step.",
    ]
    for protocol, res in o["protocols"].items():
        runs = res["runs"]
        lines += [
            "",
            f"{protocol}:",
            "",
            "| | " + " | ".join(f"{r['target']} #{r['pair']}" for r in runs) + " |",
            "| --- | " + " | ".join("---:" for _ in runs) + " |",
        ]

        def row(label: str, fn: Callable[[dict[str, Any]], str], runs: list[dict[str, Any]] = runs,
                lines: list[str] = lines) -> None:
            lines.append(f"| {label} | " + " | ".join(fn(r) for r in runs) + " |")

        row("wall time (process)", lambda r: f"{r['run']['wall_s']:.1f} s")
        row("**row changes/s**", lambda r: f"**{fmt(r['rows_per_s'])}**")
        row("steps", lambda r: str(r["costs"]["steps"]))
        row("engine wall time (`elapsed_s`)", lambda r: f"{r['costs']['engine_s']:.1f} s")
        row("state writes: total / per step",
            lambda r: f"{r['costs']['state_write_s']:.2f} s / {r['costs']['state_write_per_step_s'] * 1000:.0f} ms")
        row("lease renewals / their time",
            lambda r: f"{r['costs']['lease_renewals']} / {r['costs']['lease_renew_s'] * 1000:.0f} ms")
        row("Delta's side per step", lambda r: f"{r['costs']['rest_per_step_s']:.2f} s")
        row("peak RSS: Python driver / JVM",
            lambda r: f"{mib(r['run']['driver_peak_rss'])} / {mib(r['run']['jvm_peak_rss'])}")
        row("result equals the simulator's expected tables",
            lambda r: "not checked" if "verified" not in r else ("yes" if r["verified"] else "NO"))
        lines += ["", f"s3a:// ÷ local ({protocol}, best of {o['pairs']} each): **{res['ratio']:.2f}x** "
                      f"({fmt(res['best']['s3'])} vs {fmt(res['best']['local'])} row changes/s)."]
        if "ratio_delta_store" in res:
            lines += ["", f"The same on `s3a://` with Delta's own log store (`S3SingleDriverLogStore`, "
                          "exists-then-PUT, `--s3-conditional-writes false`) instead of the replicator's conditional "
                          f"one (`s3-delta-store` runs): **{res['ratio_delta_store']:.2f}x** local: the fenced "
                          "commits' cost is the difference."]
        for r in runs:
            if r.get("diffs"):
                lines += ["", f"First differences ({protocol} {r['target']} #{r['pair']}): "
                              + "; ".join(f"`{d}`" for d in r["diffs"][:5])]
    return lines


def _follower_md(results: dict[str, Any]) -> list[str]:
    """## 8. Follower lag under a steady input."""
    f = results.get("follower")
    if not f:
        return []
    lag = f["lag"]
    lines = [
        "",
        "## 8. Follower lag under a steady input",
        "",
        f"`replicator run` following a live topic ({f['protocol']}) as a subprocess: {f['rate']:,} row changes/s "
        f"over {f['tables']} tables and {f['partitions']} partitions, each row's commit ts the current TSO, a "
        f"resolved event per partition every second, for {f['seconds']:.0f} s; stopped with SIGTERM once it "
        "applied the last resolved ts. Lag of a row: the Delta commit time of the MERGE that applied it (the first "
        "MERGE into its table whose step reached its commit ts) minus its commit ts. The follower was started, "
        "and its CREATE TABLE steps applied, before the input began (start-up is not lag).",
        "",
        "| | |",
        "| --- | ---: |",
        f"| rows sent / achieved rate | {f.get('rows_sent', 0):,} / {f.get('achieved_rate', 0.0):,.0f} rows/s |",
        f"| follower start-up (JVM, CREATE TABLE steps; not lag) | {f.get('startup_s', 0.0):.1f} s |",
    ]
    if lag.get("rows"):
        th = lag["thirds"]
        lines += [
            f"| **lag p50 / p99 / max** | **{lag['p50_s']:.1f} s / {lag['p99_s']:.1f} s / {lag['max_s']:.1f} s** |",
            f"| p99 per third of the run (first / middle / last) | {th[0]['p99_s']:.1f} s / {th[1]['p99_s']:.1f} s / "
            f"{th[2]['p99_s']:.1f} s |",
            f"| p50 per third of the run | {th[0]['p50_s']:.1f} s / {th[1]['p50_s']:.1f} s / {th[2]['p50_s']:.1f} s |",
            f"| slope of lag over the run | {lag['slope_s_per_min']:+.2f} s per minute |",
            f"| lag flat (p99 grew <= 2 s from first to last third) | {'yes' if lag['flat'] else '**no: growing**'} |",
        ]
    ex = f.get("exit", {})
    lines += [
        f"| rows never applied (in the lag figures with their age at the stop, a lower bound) | "
        f"{f.get('unapplied_rows', 0):,} |",
        f"| caught up after the last row | {'yes' if f.get('caught_up') else 'NO'}, in {f.get('drain_s', 0.0):.1f} s |",
        f"| SIGTERM: exit code / time to exit | {ex.get('exit_code')} / {ex.get('stop_s', 0.0):.1f} s |",
        f"| peak RSS: Python driver / JVM | {mib(ex.get('driver_peak_rss', 0))} / {mib(ex.get('jvm_peak_rss', 0))} |",
        "| result equals the simulator's expected tables | "
        + ("not checked" if "verified" not in f else ("yes" if f["verified"] else "NO")) + " |",
    ]
    return lines


def jsonable(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


def write_outputs(results: dict[str, Any], cfg: BenchConfig) -> None:
    """``results.json``, ``results.md`` and ``results.png`` into ``cfg.out``."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "results.json").write_text(json.dumps(jsonable(results), indent=1, default=str) + "\n")
    (cfg.out / "results.md").write_text(render_markdown(results, cfg))
    render_chart(results, cfg.out / "results.png")
