"""Smoke test of `make bench`'s code paths at a tiny size (the benchmark itself is never part of
`make test`): every section's measuring code runs, the replicated result is verified, and the
report and chart are written. The replicator runs in-process here (the bench runs it as a
subprocess to sample its memory); the RSS sampler is checked on a small child of its own."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import bench
from bench.features import bench_features
from tests.integration.helpers import run_engine

pytestmark = pytest.mark.integration


def test_rss_sampler_sees_a_child_and_its_peak() -> None:
    code = "import time; x = bytearray(64 << 20); x[::4096] = b'1' * len(x[::4096]); time.sleep(1.5)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    sampler = bench.RssSampler(proc.pid, interval=0.1)
    sampler.start()
    proc.wait(timeout=60)
    sampler.stop()
    assert sampler.driver_peak > 64 << 20
    assert sampler.driver_cpu >= 0.0


def test_bench_sections_at_a_tiny_size(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    cfg = bench.BenchConfig(events=200, tables=2, partitions=2, protocols=("craft",),
                            sections=("codec", "e2e", "scale"), scale_sizes=(2_000, 4_000), scale_repeat=1,
                            scale_changes=500, workload_events=200, out=tmp_path / "out", quick=True)

    def in_process(bootstrap: str, topic: str, protocol: str, warehouse: Path, max_buffer_rows: int,
                   workdir: Path) -> dict[str, Any]:
        t0 = time.perf_counter()
        summary = run_engine(bootstrap, topic, warehouse, spark, protocol=protocol, max_buffer_rows=max_buffer_rows)
        return {"wall_s": time.perf_counter() - t0, "summary": summary.to_json(), "driver_peak_rss": 0,
                "jvm_peak_rss": 0, "driver_cpu_s": 0.0, "jvm_cpu_s": 0.0, "log": ""}

    results: dict[str, Any] = {"machine": bench.machine_info(), "argv": ["(smoke test)"],
                               "config": {"events": cfg.events}, "notes": []}
    results["codec"] = bench.bench_codecs(cfg)
    results["e2e"] = bench.bench_e2e(cfg, kafka_bootstrap, tmp_path, runner=in_process)
    bench.finish_e2e(spark, results["e2e"], tmp_path)
    results["scale"] = bench.bench_scale(spark, cfg, tmp_path)
    results["features"] = bench_features(spark, tmp_path, repeat=1, sizes=())
    results["load_end"], results["elapsed_s"] = [0.0, 0.0, 0.0], 1.0
    bench.write_outputs(results, cfg)

    craft = results["e2e"]["craft"]
    assert craft["verified"], craft["diffs"]
    assert craft["decode"]["rows"] == craft["run"]["summary"]["rows"] > 200  # replays come on top
    assert craft["append"]["rows"] == sum(t["rows"] for t in craft["files"].values()) > 0
    assert craft["steps"]["windows"] >= 1 and craft["steps"]["merges"] >= 2
    assert set(results["scale"]["sizes"]) == {"2000", "4000"}
    assert set(results["features"]["small"]["profiles"]) == {"compatible", "fast"}
    assert results["codec"]["sizes"]["case0"]["open"]["raw"] == 708  # the seed's size table
    md = (cfg.out / "results.md").read_text()
    headings = ("## Targets", "## 1. Codecs", "## 2. End to end", "## 3. Scale", "## Table features",
                "## 4. Resources")
    at = [md.find(heading) for heading in headings]
    assert -1 not in at and at == sorted(at), at  # every block, in the report's order
    assert (cfg.out / "results.png").stat().st_size > 10_000


def test_sections_are_registered_in_one_place() -> None:
    names = [s.name for s in bench.SECTIONS]
    assert names == ["codec", "e2e", "scale", "features", "profile"]
    assert bench.parse_args(["--quick"]).sections == tuple(names)
    assert bench.parse_args(["--sections", "scale,codec"]).sections == ("scale", "codec")
    with pytest.raises(SystemExit):
        bench.parse_args(["--sections", "codec,nonsense"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--protocols", "avro"])
