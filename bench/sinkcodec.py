"""Part of section 1, codecs: the storage sink's read + decode rate (issue: CSV files read and
decoded at least as fast as canal-json messages are decoded on the Kafka path).

The simulator writes the same kind of multi-table stream as the codec workload as TiCDC's storage
sink lays it out (CSV, and canal-json files for comparison) into a scratch directory; the source
(`StorageSinkSource`, what `run --storage-sink` reads with) then lists, reads and decodes all of
it, timed in process CPU time, best of N. The Kafka path's figure beside it is the codec
workload's canal-json decode alone (messages already in memory), so the comparison favours Kafka.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import BenchConfig, log
from replicator.events import RowChange


def _read_all(root: str, protocol: str) -> int:
    from replicator.sources.storage_sink import StorageSinkSettings, StorageSinkSource

    source = StorageSinkSource(StorageSinkSettings(root, protocol=protocol, poll_interval_s=0))  # type: ignore[arg-type]
    source.start({p: None for p in source.partitions()})
    rows = 0
    while True:
        records = source.poll()
        for rec in records:
            rows += sum(1 for ev in source.decode(rec) if isinstance(ev, RowChange))
        if not records and source.caught_up():
            return rows


def bench_storage_sink(cfg: BenchConfig, rounds: int, kafka_decode: Callable[[], object], kafka_rows: int,
                       ) -> dict[str, Any]:
    """Row events/s of listing + reading + decoding a storage-sink changefeed, per file protocol,
    in rounds interleaved with `kafka_decode` (canal-json messages of `kafka_rows` row events
    decoded), so that both see the same load."""
    from replicator.sim.simulate import SimConfig, Simulation
    from replicator.sim.storage_sink import StorageLayout, write_storage_sink

    out: dict[str, Any] = {"events": cfg.workload_events, "tables": cfg.tables}
    protocols = ("csv", "canal-json")
    with tempfile.TemporaryDirectory(prefix="bench-sink-") as tmp:
        roots, files = {}, {}
        for protocol in protocols:
            sim = Simulation(SimConfig(protocol="open", seed=cfg.seed + 100, events=cfg.workload_events,
                                       partitions=cfg.partitions, tables=cfg.tables, ddl="none"))
            roots[protocol] = str(Path(tmp) / protocol)
            report = write_storage_sink(sim, roots[protocol], StorageLayout(protocol=protocol))  # type: ignore[arg-type]
            files[protocol] = sum(report.records.values())
        best = dict.fromkeys((*protocols, "kafka"), float("inf"))
        rows = dict.fromkeys(protocols, 0)
        for _ in range(rounds):
            for protocol in protocols:
                started = time.process_time()
                rows[protocol] = _read_all(roots[protocol], protocol)
                best[protocol] = min(best[protocol], time.process_time() - started)
            started = time.process_time()
            kafka_decode()
            best["kafka"] = min(best["kafka"], time.process_time() - started)
        for protocol in protocols:
            nbytes = sum(p.stat().st_size for p in Path(roots[protocol]).rglob("*") if p.is_file())
            out[protocol] = {"rows": rows[protocol], "files": files[protocol], "bytes": nbytes,
                             "read_decode_s": best[protocol], "rows_per_s": rows[protocol] / best[protocol]}
            log.info("codec storage sink %s: %d row events read + decoded, %.0f rows/s", protocol, rows[protocol],
                     out[protocol]["rows_per_s"])
        out["kafka_canal_json"] = {"rows": kafka_rows, "decode_s": best["kafka"],
                                   "rows_per_s": kafka_rows / best["kafka"]}
    return out
