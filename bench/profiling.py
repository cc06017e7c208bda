"""Section 5, profile: cProfile of the engine in-process on a smaller stream, costs grouped by stage."""

from __future__ import annotations

import cProfile
import pstats
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import BenchConfig, log
from bench.e2e import produce_stream

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# (label, source file suffix, function names): cumulative time of those functions.
STAGES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("Spark / Delta (JVM, waited on via py4j)", "py4j/clientserver.py", ("send_command",)),
    ("decode", "replicator/engine/pipeline.py", ("_decode_record",)),
    ("Kafka fetch (kafka-python)", "replicator/sources/kafka.py", ("poll",)),
    ("Arrow source build (writer.source_table)", "replicator/delta/writer.py", ("source_table",)),
    ("collapse to last change per key", "replicator/changes.py", ("collapse",)),
    ("windowing (offer, next_step, commit)", "replicator/engine/window.py", ("offer", "next_step", "commit")),
    ("restart cursors", "replicator/engine/window.py", ("restart_cursors",)),
    ("column check", "replicator/engine/merging.py", ("check_columns",)),
)


def _stage_times(stats: pstats.Stats) -> dict[str, float]:
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    return {label: sum(v[3] for (f, _, fn), v in raw.items() if f.endswith(suffix) and fn in funcs)
            for label, suffix, funcs in STAGES}


def profile_engine(spark: SparkSession, cfg: BenchConfig, bootstrap: str, scratch: Path) -> dict[str, Any]:
    """cProfile of one in-process `run --until-caught-up` per protocol on a smaller stream."""
    from replicator.engine.pipeline import Engine, RunOptions
    from replicator.sources.kafka import KafkaSettings, KafkaSource

    out: dict[str, Any] = {"events": cfg.profile_events}
    for i, protocol in enumerate(cfg.protocols):
        stream = produce_stream(cfg, bootstrap, protocol, cfg.profile_events, cfg.seed + 50 + i)
        source = KafkaSource(KafkaSettings(bootstrap, stream["topic"], group_id=f"bench-{uuid.uuid4().hex[:8]}"))
        opts = RunOptions(warehouse=str(scratch / f"prof-{protocol}"), protocol=protocol,  # type: ignore[arg-type]
                          until_caught_up=True, progress=False, max_buffer_rows=cfg.max_buffer_rows)
        engine = Engine(source, opts, spark=spark)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        prof.enable()
        summary = engine.run()
        prof.disable()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        stats = pstats.Stats(prof)
        top = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:12]  # type: ignore[attr-defined]
        out[protocol] = {
            "wall_s": wall, "python_cpu_s": cpu, "rows": summary.rows, "steps": summary.steps,
            "rows_per_s": summary.rows / wall,
            "stages": _stage_times(stats),
            "top_tottime": [{"function": f"{Path(f).name}:{ln}({fn})", "tottime_s": tt, "calls": nc}
                            for (f, ln, fn), (_, nc, tt, _, _) in top],
        }
        log.info("profile %s: %.1f s wall, %.1f s Python CPU", protocol, wall, cpu)
    return out
