"""Helpers for integration tests: produce raw records, run the engine, read tables back (waiting, the
CLI, environments and progress files: tests/support)."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

from replicator.codec.values import DecodeOptions
from replicator.delta.writer import delta_ref
from replicator.engine.pipeline import Engine, RunOptions, RunSummary
from replicator.sources.kafka import KafkaSettings, KafkaSource
from replicator.warehouse import Warehouse


def open_frame(keys: Sequence[bytes], values: Sequence[bytes]) -> tuple[bytes, bytes]:
    """Open Protocol batch framing, written by hand (independent of the encoder under test)."""
    key = struct.pack(">Q", 1) + b"".join(struct.pack(">Q", len(k)) + k for k in keys)
    value = b"".join(struct.pack(">Q", len(v)) + v for v in values)
    return key, value


def produce(bootstrap: str, topic: str, records: Iterable[tuple[int, bytes | None, bytes | None]]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    for partition, key, value in records:
        producer.send(topic, key=key, value=value, partition=partition)
    producer.flush()
    producer.close()


def run_engine(bootstrap: str, topic: str, warehouse: Path, spark: Any, protocol: str = "open",
               **kw: Any) -> RunSummary:
    source = KafkaSource(KafkaSettings(bootstrap, topic, group_id=f"test-{topic}"))
    opts = RunOptions(warehouse=str(warehouse), protocol=protocol, until_caught_up=True,  # type: ignore[arg-type]
                      decode=kw.pop("decode", DecodeOptions()), progress=False, **kw)
    return Engine(source, opts, spark=spark).run()


def read_table(spark: Any, warehouse: Path, schema: str, table: str) -> list[dict[str, Any]]:
    state = Warehouse(warehouse).load_state()
    entry = state.live_table(schema, table)
    assert entry is not None, f"no live table {schema}.{table}"
    rows = spark.read.format("delta").load(entry.path).collect()
    return sorted((r.asDict() for r in rows), key=lambda d: tuple(str(d[k]) for k in entry.key))


def encode_partition(
    events: Sequence[Any], protocol: str, max_batch_size: int = 16, partition: int = 0,
) -> list[tuple[bytes | None, bytes]]:
    """Encode one partition's events in order: consecutive rows batched, DDL/resolved alone. A codec
    that does not broadcast DDL (canal-json) gets it on partition 0 only, as TiCDC sends it."""
    from replicator.codec import codec_for
    from replicator.events import DdlEvent

    codec = codec_for(protocol)
    if not codec.broadcasts_ddl and partition != 0:
        events = [ev for ev in events if not isinstance(ev, DdlEvent)]
    return codec.encode(events, max_batch_size=max_batch_size)


def produce_stream(bootstrap: str, topic: str, partitions: Sequence[Sequence[Any]], protocol: str) -> int:
    """Produce a generated stream partition by partition; returns the number of messages."""
    records = [(p, k, v) for p, events in enumerate(partitions)
               for k, v in encode_partition(events, protocol, partition=p)]
    produce(bootstrap, topic, records)
    return len(records)


def table_rows(spark: Any, warehouse: Path, schema: str, table: str) -> dict[Any, dict[str, Any]]:
    """Rows of a replicated table keyed by its (single) key column."""
    state = Warehouse(warehouse).load_state()
    entry = state.live_table(schema, table)
    if entry is None:
        return {}
    key = entry.key[0]
    return {r[key]: r.asDict() for r in spark.read.format("delta").load(entry.path).collect()}


class Background:
    """Engine.run() on a thread of this process (a follower, or a run a fault lands in), keeping
    its result or error for the test thread."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.summary: RunSummary | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.summary = self.engine.run()
        except BaseException as exc:  # handed to the test thread
            self.error = exc

    def join(self, timeout: float) -> None:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the run did not end within {timeout:.0f}s"

    def stop(self, timeout: float = 300) -> RunSummary:
        """Ask a follower to stop; its summary once it has."""
        self.engine.request_stop()
        self.thread.join(timeout=timeout)
        assert self.error is None and self.summary is not None, self.error
        return self.summary


def delta_version(spark: Any, table: str) -> int:
    """The table's version as the session's Delta log sees it after a refresh (a look at its log)."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)
    return int(log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty()).version())


def merge_listing_the_log_once(spark: Any, table: str, settle_s: float = 0.0) -> None:
    """A table made and MERGEd into, the MERGE's second look at its log (Delta lists it at analysis
    and again when the transaction starts) the first listing handed out again (ListingCache.java),
    and the rows right. `settle_s`: a wait before the MERGE (a local directory's time must settle)."""
    cache = spark._jvm.replicator.s3commit.ListingCache
    spark.sql(f"CREATE TABLE {delta_ref(table)} (id INT, v STRING) USING delta")
    spark.sql(f"INSERT INTO {delta_ref(table)} VALUES (1, 'a'), (2, 'b')")
    time.sleep(settle_s)
    hits = cache.hits()
    spark.sql(f"MERGE INTO {delta_ref(table)} t USING (SELECT * FROM VALUES (2, 'B'), (3, 'c') AS s(id, v)) s "
              "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert cache.hits() == hits + 1
    assert sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {delta_ref(table)}").collect()) == [
        (1, "a"), (2, "B"), (3, "c")]
