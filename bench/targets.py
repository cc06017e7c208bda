"""The bench's targets: what each section's figures are measured against, met or not."""

from __future__ import annotations

from typing import Any

from bench.codecs import CASE0_DECODE_TARGET_NS
from bench.common import STREAMS, BenchConfig, fmt, mib, rate, stream_key

GIB = 1 << 30


def targets(results: dict[str, Any], cfg: BenchConfig) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met): end-to-end throughput against a plain append and against the peer
    (per stream and protocol),
    Craft against Open Protocol decoding, case-0 decode time, MERGE growth with table size, many
    tables against few, follower lag, a small MERGE against an append, driver memory of the
    1M-event run."""
    out: list[tuple[str, str, bool | None]] = []
    for stream in STREAMS:  # the standard stream's labels name the protocol alone, as older reports did
        tag = "" if stream == "standard" else f"{stream}, "
        streamed = results.get(stream_key("e2e", stream), {})
        for protocol, res in streamed.items():
            replicated = res["run"]["summary"]["rows"] / res["run"]["wall_s"]
            half = res["append"]["rows_per_s"] / 2
            out.append((f"end-to-end rows/s >= half the plain-append rate ({tag}{protocol})",
                        f"{fmt(replicated)} vs {fmt(half)} rows/s", replicated >= half))
        for protocol, res in results.get(stream_key("peer", stream), {}).items():
            if protocol in streamed:
                mine, peer = rate(streamed[protocol]["run"]), rate(res["run"])
                ratio = mine / peer if peer else 0.0
                out.append((f"replicator rows/s >= 1.5x the Structured Streaming peer's ({tag}{protocol})",
                            f"{ratio:.2f}x ({fmt(mine)} vs {fmt(peer)} rows/s)", ratio >= 1.5))
    e2e = results.get("e2e", {})
    tables = results.get("tables")
    if tables:
        few, many = sorted(tables["runs"].values(), key=lambda r: int(r["tables"]))
        out.append((f"{many['tables']} tables >= half the {few['tables']}-table rate ({tables['events']:,} changes)",
                    f"{tables['ratio']:.2f} ({fmt(many['rows_per_s'])} vs {fmt(few['rows_per_s'])} rows/s)",
                    tables["ratio"] >= 0.5))
    many = results.get("manytables")
    if many and "floor" in many:
        from bench.manytables import TARGET_RATIO as MANY_RATIO

        out.append((f"{many['tables']:,} tables: CREATE + first write per table <= {MANY_RATIO:g}x Delta's floor "
                    "(bare CREATE TABLE + one INSERT)",
                    f"{many['ratio']:.2f}x ({many['one']['step_per_table_s']:.3f} vs "
                    f"{many['floor']['per_table_s']:.3f} s per table)", many["ratio"] <= MANY_RATIO))
    objectstore = results.get("objectstore")
    if objectstore:
        from bench.objectstore import TARGET_RATIO

        for protocol, res in objectstore["protocols"].items():
            best = res["best"]
            out.append((f"s3a:// warehouse rows/s >= {TARGET_RATIO:g}x a local warehouse's ({protocol}, "
                        f"{objectstore['events']:,} changes, local S3-compatible server)",
                        f"{res['ratio']:.2f}x ({fmt(best['s3'])} vs {fmt(best['local'])} row changes/s)",
                        res["ratio"] >= TARGET_RATIO))
    if results.get("skew"):
        from bench.skew import skew_targets

        out += skew_targets(results["skew"])
    if results.get("ramp"):
        from bench.ramp import ramp_targets

        out += ramp_targets(results["ramp"])
    if results.get("follow"):
        from bench.follow import follow_targets

        out += follow_targets(results["follow"])
    follower = results.get("follower")
    if follower and follower["lag"].get("rows"):
        lag = follower["lag"]
        out.append(("follower lag p99 <= 10 s and not growing",
                    f"p99 {lag['p99_s']:.1f} s; p99 first → last third {lag['thirds'][0]['p99_s']:.1f} → "
                    f"{lag['thirds'][2]['p99_s']:.1f} s",
                    lag["p99_s"] <= 10.0 and lag["flat"] and not follower["unapplied_rows"]))
    codec = results.get("codec")
    if codec:
        c, o = codec["workload"]["craft"], codec["workload"]["open"]
        out.append(("Craft decode faster than Open Protocol per event (workload)",
                    f"{fmt(c['decode_ns_per_event'])} vs {fmt(o['decode_ns_per_event'])} ns/event",
                    c["decode_ns_per_event"] < o["decode_ns_per_event"]))
        cj = codec["workload"].get("canal-json")
        if cj:
            out.append(("canal-json decode at least as fast as Open Protocol per event (workload, both JSON)",
                        f"{fmt(cj['decode_ns_per_event'])} vs {fmt(o['decode_ns_per_event'])} ns/event",
                        cj["decode_ns_per_event"] <= o["decode_ns_per_event"]))
        sink = codec.get("storage_sink")
        if sink:
            kafka = sink["kafka_canal_json"]["rows_per_s"]
            out.append(("storage sink: CSV files read + decoded at least as fast as canal-json decoded (Kafka path)",
                        f"{fmt(sink['csv']['rows_per_s'])} vs {fmt(kafka)} row events/s (interleaved rounds)",
                        sink["csv"]["rows_per_s"] >= kafka))
        d0 = codec["case0"]["craft"]["decode"]["min_ns"]
        out.append(("Craft case-0 decode < 15 µs (pure Python, one core)", f"{d0 / 1000:.2f} µs",
                    d0 < CASE0_DECODE_TARGET_NS))
    scale = results.get("scale")
    if scale and "growth" in scale:
        g = scale["growth"]
        out.append((f"MERGE 10k into {g['to']:,} rows <= 2x into {g['from']:,} rows",
                    f"{g['after']:.2f}x (before the fix: {g['before']:.2f}x)", g["after"] <= 2.0))
    features = results.get("features")
    if features and features.get("small"):
        small = features["small"]
        from bench.features import SMALL_TARGET_RATIO

        limit = float(small.get("target_ratio", SMALL_TARGET_RATIO))
        for profile, res in small["profiles"].items():
            if profile != "compatible":
                continue  # the target is the default profile's
            out.append((f"{small['changes']}-row MERGE <= {limit:.0f}x a {small['changes']}-row append ({profile})",
                        f"{res['ratio']:.1f}x ({res['merge_s']:.2f} vs {res['append_s']:.2f} s)",
                        res["ratio"] <= limit))
    for protocol, res in e2e.items():
        peak = res["run"]["driver_peak_rss"]
        full = cfg.events >= 1_000_000
        out.append((f"driver RSS <= 2 GiB for the 1M run ({protocol})",
                    f"{mib(peak)} at {cfg.events:,} events", (peak <= 2 * GIB) if full else None))
    return out
