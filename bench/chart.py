"""The bench's chart, ``results.png``: four panels of the main figures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.codecs import GO_DECODE_NS, GO_ENCODE_NS


def render_chart(results: dict[str, Any], path: Path) -> None:
    """Four panels: case-0 ns, workload decode rate, e2e vs baselines, MERGE time vs table size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    codec = results.get("codec")
    ax = axes[0][0]
    if codec:
        c0 = codec["case0"]
        labels = ["decode", "encode"]
        x = range(len(labels))
        for off, (name, vals) in zip((-0.27, 0.0, 0.27), (
                ("Craft (Python)", [c0["craft"][k]["min_ns"] for k in labels]),
                ("Open Protocol (Python)", [c0["open"][k]["min_ns"] for k in labels]),
                ("Craft (seed, Go)", [GO_DECODE_NS, GO_ENCODE_NS])), strict=True):
            bars = ax.bar([i + off for i in x], vals, width=0.27, label=name)
            ax.bar_label(bars, labels=[f"{v / 1000:.1f}" for v in vals], fontsize=8)
        ax.set_xticks(list(x), labels)
        ax.set_ylabel("ns per message (labels: µs)")
        ax.set_title("Case 0: one update, 8+8 columns")
        ax.legend(fontsize=8)
    ax = axes[0][1]
    if codec:
        w = codec["workload"]
        names = ["Craft", "Open Protocol"]
        dec = [w["craft"]["decode_events_per_s"], w["open"]["decode_events_per_s"]]
        enc = [w["craft"]["encode_events_per_s"], w["open"]["encode_events_per_s"]]
        b1 = ax.bar([-0.2, 0.8], dec, width=0.4, label="decode")
        b2 = ax.bar([0.2, 1.2], enc, width=0.4, label="encode")
        ax.bar_label(b1, labels=[f"{v:,.0f}" for v in dec], fontsize=8)
        ax.bar_label(b2, labels=[f"{v:,.0f}" for v in enc], fontsize=8)
        ax.set_xticks([0, 1], names)
        ax.set_ylabel("events/s (one core)")
        ax.set_title(f"Multi-table workload ({w['events']:,} events)")
        ax.legend(fontsize=8)
    ax = axes[1][0]
    e2e = results.get("e2e")
    if e2e:
        protos = list(e2e)
        series = {
            "replicated (run --until-caught-up)": [e2e[p]["run"]["summary"]["rows"] / e2e[p]["run"]["wall_s"]
                                                   for p in protos],
            "plain Delta append of final rows": [e2e[p]["append"]["rows_per_s"] for p in protos],
            "read + decode only": [e2e[p]["decode"]["rows"] / e2e[p]["decode"]["elapsed_s"] for p in protos],
        }
        width = 0.8 / len(series)
        for j, (name, vals) in enumerate(series.items()):
            bars = ax.bar([i - 0.4 + width * (j + 0.5) for i in range(len(protos))], vals, width=width, label=name)
            ax.bar_label(bars, labels=[f"{v:,.0f}" for v in vals], fontsize=8)
        ax.set_xticks(range(len(protos)), protos)
        ax.set_yscale("log")
        ax.set_ylabel("rows/s (log)")
        ax.set_title(f"End to end, {results['config']['events']:,} row changes")
        ax.legend(fontsize=8)
    ax = axes[1][1]
    scale = results.get("scale")
    if scale:
        sizes = [int(s) for s in scale["sizes"]]
        for mode, label in (("before_s", "ON key equality only (before)"),
                            ("after_s", "with key-range pruning (after)")):
            vals = [scale["sizes"][str(s)][mode] for s in sizes]
            ax.plot(sizes, vals, marker="o", label=label)
        ax.set_xscale("log")
        ax.set_xlabel("table rows (log)")
        ax.set_ylabel("MERGE seconds (10,000 changes)")
        ax.set_ylim(bottom=0)
        ax.set_title("MERGE time vs table size")
        ax.legend(fontsize=8)
    fig.suptitle(f"replicator bench — {results['machine']['cores']} cores, {results['machine']['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
