"""Section "peer": the job a Spark user would write instead of the replicator, on the same topic.

Spark Structured Streaming with Spark's own Kafka source (``spark-sql-kafka-0-10``, resolved by
``make spark-jars``), ``Trigger.AvailableNow`` (read what the topic holds, then stop) and a
``foreachBatch`` that decodes each micro-batch with this project's codecs
(``replicator.codec.codec_for``), keeps the last change per key by commit ts and runs one MERGE per
table. Idempotent as Delta documents it for ``foreachBatch``: every MERGE commits with
``txnAppId`` = the streaming query's id (stable across restarts: it lives in the checkpoint) and
``txnVersion`` = the micro-batch id, so a batch re-run after a crash is skipped by tables that have
it. Micro-batches are bounded by ``maxOffsetsPerTrigger`` (Kafka records), which the bench sizes
to about the replicator's ``--max-buffer-rows`` so both hold the same number of rows in memory.

What it does not do, and the bench reports the result of honestly (its tables are compared with
the simulator's expected ones): resolved timestamps are ignored, so a micro-batch ends at
arbitrary offsets and a replayed (at-least-once) older change that arrives in a later batch
overwrites the newer row; DDL other than CREATE TABLE is ignored (no barriers); an update that
changes a row's key leaves the old key behind. It borrows the replicator's decoders, its TiDB ->
Delta type mapping (``replicator.delta.typemap``: a table is created from the stream's CREATE
TABLE, a micro-batch's CREATE TABLEs before its rows, or inferred from its first row) and its
Spark session factory (so both run with the same Spark settings), so the comparison measures the
streaming and apply strategy, not the codecs.

Run alone: ``python -m bench.peer --bootstrap-servers B --topic T --protocol open --out DIR``
prints one JSON line (the bench runs it so, as a subprocess, to time it from a cold JVM like the
replicator's run and sample its memory). ``run_peer`` is the same job in a given session.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import BenchConfig, log
from bench.procs import run_sampled
from replicator.codec import PROTOCOLS
from replicator.codec.state import CodecState

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from replicator.tables import TableSpec

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
CREATE_TABLE = 3  # TiDB DDL type code


@dataclass
class _Table:
    name: str
    path: str
    spec: TableSpec


@dataclass
class PeerJob:
    """The foreachBatch job's state: the tables it created and what it counted."""

    spark: SparkSession
    protocol: str
    out: Path
    tables: dict[tuple[str, str], _Table] = field(default_factory=dict)
    query_id: str = ""
    records: int = 0
    rows: int = 0
    merges: int = 0
    ddl_ignored: int = 0
    resolved_ignored: int = 0
    batches: list[dict[str, Any]] = field(default_factory=list)
    # Simple types its rows by the schemas of earlier BOOTSTRAP / DDL messages: kept across batches,
    # as a user's job would (in memory only: a restarted query re-reads its BOOTSTRAP messages).
    codec_state: CodecState = field(default_factory=CodecState)

    # -- tables -----------------------------------------------------------------------------------
    def _create(self, spec: TableSpec) -> _Table:
        from replicator.delta.features import DEFAULT_PROFILE, create_properties
        from replicator.delta.typemap import quote_string
        from replicator.mysql.tokens import quote_ident

        key = (spec.schema, spec.table)
        if key in self.tables:
            return self.tables[key]
        path = str(self.out / "tables" / spec.schema / spec.table)
        cols = ", ".join(f"{quote_ident(c.name)} {c.spark_type}" + ("" if c.nullable else " NOT NULL")
                         for c in spec.columns)
        # The replicator's table properties (the profile the bench runs it with), so both write the same
        # kind of table.
        profile = os.environ.get("REPLICATOR_TABLE_FEATURES", DEFAULT_PROFILE)
        props = ", ".join(f"{quote_string(k)} = {quote_string(v)}"
                          for k, v in create_properties(profile, (c.name for c in spec.columns)).items())
        self.spark.sql(f"CREATE TABLE IF NOT EXISTS delta.{quote_ident(path)} ({cols}) USING delta "
                       f"TBLPROPERTIES ({props})")
        table = self.tables[key] = _Table(f"{spec.schema}.{spec.table}", path, spec)
        return table

    # -- one micro-batch --------------------------------------------------------------------------
    def process(self, batch: DataFrame, batch_id: int) -> None:
        """foreachBatch: decode, keep the last change per key (by commit ts), one MERGE per table."""
        from replicator.codec import codec_for
        from replicator.codec.values import DecodeOptions
        from replicator.delta.typemap import spec_from_create, spec_from_row
        from replicator.events import DdlEvent, Op, Position, RowChange

        t0 = time.perf_counter()
        if not self.query_id:
            # The query's id, as stored in its checkpoint before the first batch (stable across restarts).
            self.query_id = json.loads((self.out / "checkpoint" / "metadata").read_text())["id"]
        arrow = batch.select("topic", "partition", "offset", "key", "value").toArrow()
        read = time.perf_counter()
        created = 0.0  # seconds spent creating tables (inside the decode loop, as they appear)
        codec, opts = codec_for(self.protocol), DecodeOptions(state=self.codec_state)
        # Per table, per key: (order, is delete, image) of the change with the highest commit ts.
        latest: dict[tuple[str, str], dict[tuple[Any, ...], tuple[tuple[int, int, int, int], bool, dict[str, Any]]]]
        latest = {}
        rows = 0
        cols = [arrow.column(c).to_pylist() for c in ("topic", "partition", "offset", "key", "value")]
        batch_events = [(part, offset, codec.decode(k, v, options=opts, position=Position(topic, part, offset)))
                        for topic, part, offset, k, v in zip(*cols, strict=True)]
        # The batch's CREATE TABLEs first: the micro-batch interleaves partitions in no set order, and a
        # table's DDL may sit on another partition than its first rows (canal-json sends DDL on partition
        # 0 alone); a table inferred from a row instead would lack its ENUM / SET labels and its precision.
        for _, _, events in batch_events:
            for ev in events:
                if isinstance(ev, DdlEvent) and ev.ddl_type == CREATE_TABLE:
                    c0 = time.perf_counter()
                    self._create(spec_from_create(ev.query, ev.schema, ev.table))
                    created += time.perf_counter() - c0
        for partition, offset, events in batch_events:
            for i, ev in enumerate(events):
                if isinstance(ev, RowChange):
                    rows += 1
                    table = (ev.schema, ev.table)
                    if table not in self.tables:
                        c0 = time.perf_counter()
                        self._create(spec_from_row(ev))
                        created += time.perf_counter() - c0
                    image = {c.name: c.value for c in ev.image}
                    key = tuple(image.get(name) for name in self.tables[table].spec.key)
                    order = (ev.commit_ts, partition, offset, i)
                    per_key = latest.setdefault(table, {})
                    seen = per_key.get(key)
                    if seen is None or seen[0] < order:
                        per_key[key] = (order, ev.op is Op.DELETE, image)
                elif isinstance(ev, DdlEvent) and ev.ddl_type != CREATE_TABLE:
                    self.ddl_ignored += 1
                elif not isinstance(ev, DdlEvent):
                    self.resolved_ignored += 1
        decoded = time.perf_counter()
        conf = self.spark.conf
        conf.set(TXN_APP_ID, self.query_id)
        conf.set(TXN_VERSION, str(batch_id))
        try:
            for table, changes in sorted(latest.items()):
                self._merge(self.tables[table], [(delete, image) for _, delete, image in changes.values()])
        finally:
            conf.unset(TXN_APP_ID)
            conf.unset(TXN_VERSION)
        self.records += arrow.num_rows
        self.rows += rows
        self.merges += len(latest)
        self.batches.append({"batch_id": batch_id, "records": arrow.num_rows, "rows": rows, "merges": len(latest),
                             "read_s": read - t0, "decode_s": decoded - read - created, "create_s": created,
                             "merge_s": time.perf_counter() - decoded})
        log.info("peer batch %d: %d records, %d row events, %d MERGEs, %.1f s", batch_id, arrow.num_rows, rows,
                 len(latest), time.perf_counter() - t0)

    def _merge(self, table: _Table, changes: Sequence[tuple[bool, dict[str, Any]]]) -> None:
        """MERGE one table's last changes per key: deletes delete, the rest upsert the whole row."""
        import pyarrow as pa

        from replicator.delta.typemap import converter_for
        from replicator.delta.writer import arrow_type
        from replicator.mysql.tokens import quote_ident

        spec = table.spec
        arrays: dict[str, pa.Array] = {}
        for col in spec.columns:
            conv, name = converter_for(col), col.name
            arrays[name] = pa.array([conv(image.get(name)) for _, image in changes], type=arrow_type(col.spark_type))
        arrays["_op"] = pa.array([1 if delete else 0 for delete, _ in changes], type=pa.int8())
        view = f"peer_src_{uuid.uuid4().hex[:12]}"
        self.spark.createDataFrame(pa.table(arrays)).createOrReplaceTempView(view)
        names = [quote_ident(c.name) for c in spec.columns]
        on = " AND ".join(f"t.{quote_ident(k)} = s.{quote_ident(k)}" for k in spec.key)
        sets = ", ".join(f"t.{n} = s.{n}" for n in names)
        try:
            self.spark.sql(
                f"MERGE INTO delta.{quote_ident(table.path)} t USING {view} s ON {on} "
                "WHEN MATCHED AND s._op = 1 THEN DELETE "
                f"WHEN MATCHED THEN UPDATE SET {sets} "
                f"WHEN NOT MATCHED AND s._op = 0 THEN INSERT ({', '.join(names)}) "
                f"VALUES ({', '.join('s.' + n for n in names)})").collect()
        finally:
            self.spark.catalog.dropTempView(view)


def run_peer(spark: SparkSession, bootstrap: str, topic: str, protocol: str, out: Path,
             max_offsets_per_trigger: int | None = None) -> dict[str, Any]:
    """The Structured Streaming job, AvailableNow, in `spark`: returns its counts and tables."""
    out.mkdir(parents=True, exist_ok=True)
    job = PeerJob(spark, protocol, out)
    t0 = time.perf_counter()
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest"))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    try:
        source = reader.load()
    except Exception as exc:
        if "kafka" in str(exc).lower() and ("DATA_SOURCE_NOT_FOUND" in str(exc) or "Failed to find" in str(exc)):
            raise RuntimeError("Spark's Kafka source is not among the session's jars: run `make spark-jars` "
                               "(replicator/runtime/jars.py declares it; it lands in .cache/spark-jars)") from exc
        raise
    query = (source.writeStream
             .queryName(f"peer-{topic}")
             .option("checkpointLocation", str(out / "checkpoint"))
             .trigger(availableNow=True)
             .foreachBatch(job.process)
             .start())
    query.awaitTermination()
    return {"query_id": str(query.id), "elapsed_s": time.perf_counter() - t0, "records": job.records,
            "rows": job.rows, "merges": job.merges, "ddl_ignored": job.ddl_ignored,
            "resolved_ignored": job.resolved_ignored, "batches": job.batches,
            "max_offsets_per_trigger": max_offsets_per_trigger,
            "tables": {t.name: {"path": t.path, "key": list(t.spec.key)} for t in job.tables.values()}}


def run_peer_subprocess(bootstrap: str, topic: str, protocol: str, out: Path, max_offsets_per_trigger: int | None,
                        workdir: Path) -> dict[str, Any]:
    """``python -m bench.peer`` as a subprocess (cold JVM, as the replicator's run), RSS sampled."""
    cmd = [sys.executable, "-m", "bench.peer", "--bootstrap-servers", bootstrap, "--topic", topic,
           "--protocol", protocol, "--out", str(out)]
    if max_offsets_per_trigger:
        cmd += ["--max-offsets-per-trigger", str(max_offsets_per_trigger)]
    log_path = workdir / f"peer-{topic}.log"
    proc, stdout, wall, sampler = run_sampled(cmd, workdir, log_path)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.peer exited {proc.returncode}:\n{log_path.read_text(errors='replace')[-3000:]}")
    summary = json.loads(stdout.decode().strip().splitlines()[-1])
    return {**summary, "wall_s": wall, "driver_peak_rss": sampler.driver_peak, "jvm_peak_rss": sampler.jvm_peak,
            "driver_cpu_s": sampler.driver_cpu, "jvm_cpu_s": sampler.jvm_cpu, "log": str(log_path)}


def max_offsets_for(cfg: BenchConfig, records: int, rows: int) -> int:
    """Kafka records per micro-batch: ``cfg.peer_max_offsets``, else about ``--max-buffer-rows`` row
    events (the replicator's memory bound) at the topic's row events per record."""
    if cfg.peer_max_offsets:
        return cfg.peer_max_offsets
    per_record = max(rows / max(records, 1), 1.0)
    return max(int(cfg.max_buffer_rows / per_record), 1)


PeerRunner = Callable[[str, str, str, Path, "int | None", Path], dict[str, Any]]
"""(bootstrap, topic, protocol, out, max offsets per trigger, workdir) -> the run's summary."""


def bench_peer(cfg: BenchConfig, bootstrap: str, e2e: dict[str, Any], scratch: Path,
               runner: PeerRunner = run_peer_subprocess) -> dict[str, Any]:
    """Section "peer" (Spark-free part): the peer job on each end-to-end topic, right after the
    replicator's run on it (same stream, same machine, same bench run)."""
    out: dict[str, Any] = {}
    for protocol, res in e2e.items():
        stream, kind = res["stream"], res.get("stream_kind", "standard")
        name, tag = (protocol, "") if kind == "standard" else (f"{kind} {protocol}", f"-{kind}")
        max_offsets = max_offsets_for(cfg, int(stream["records"]), int(res["run"]["summary"]["rows"]))
        log.info("peer %s: Structured Streaming, AvailableNow, maxOffsetsPerTrigger %d", name, max_offsets)
        run = runner(bootstrap, stream["topic"], protocol, scratch / f"peer{tag}-{protocol}", max_offsets, scratch)
        log.info("peer %s: %.1f s wall, %d batches, %d MERGEs", name, run["wall_s"], len(run["batches"]),
                 run["merges"])
        out[protocol] = {"topic": stream["topic"], "run": run}
    return out


def read_tables(spark: SparkSession, tables: dict[str, Any]) -> dict[str, Any]:
    """The peer's tables as `replicator.sim.simcheck.ActualTable`s (for `compare_tables`)."""
    from replicator.sim.simcheck import read_delta_table

    return {name: read_delta_table(spark, t["path"], t["key"]) for name, t in tables.items()}


def finish_peer(spark: SparkSession, peer: dict[str, Any], expected: dict[str, Any]) -> None:
    """Section "peer" (Spark part): compare the peer's tables with the simulator's expected ones.
    A wrong result is reported (tables and rows that differ), not raised: it is the finding."""
    from replicator.sim.simcheck import compare_tables

    for protocol, res in peer.items():
        exp = expected.get(protocol)
        if exp is None:
            continue
        diffs = compare_tables(exp, read_tables(spark, res["run"]["tables"]), max_diffs=1_000_000)
        tables = sorted({d.split(":", 1)[0] for d in diffs})
        res["verified"] = not diffs
        res["diff_count"] = len(diffs)
        res["wrong_tables"] = tables
        res["diff_kinds"] = _diff_kinds(diffs)
        res["diffs"] = diffs[:10]
        log.info("peer %s: %s", protocol, "equals the expected tables" if not diffs else
                 f"{len(diffs)} differences in {len(tables)} tables")


def _diff_kinds(diffs: Sequence[str]) -> dict[str, int]:
    """How many differences of each kind: missing / unexpected rows, wrong column values, other."""
    kinds = {"missing rows": 0, "unexpected rows": 0, "wrong values": 0, "other": 0}
    for d in diffs:
        text = d.split(":", 1)[1] if ":" in d else d
        if text.startswith(" missing row"):
            kinds["missing rows"] += 1
        elif text.startswith(" unexpected row"):
            kinds["unexpected rows"] += 1
        elif text.startswith(" row "):
            kinds["wrong values"] += 1
        else:
            kinds["other"] += 1
    return kinds


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.peer``: run the peer job once, print its summary as one JSON line."""
    p = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--protocol", choices=PROTOCOLS, required=True)
    p.add_argument("--out", type=Path, required=True, help="tables and the streaming checkpoint go here")
    p.add_argument("--max-offsets-per-trigger", type=int, default=None, help="Kafka records per micro-batch")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s bench %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("kafka").setLevel(logging.ERROR)
    from replicator.runtime.spark import get_spark, stop_spark

    spark = get_spark("replicator-bench-peer")
    try:
        summary = run_peer(spark, a.bootstrap_servers, a.topic, a.protocol, a.out, a.max_offsets_per_trigger)
    finally:
        stop_spark()
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
