"""`--reader spark`: Kafka offset ranges read and decoded on Spark executors.

The driver decides each partition's range [from, to) (the restart cursor to the end offset);
Spark's Kafka batch source reads it, one task per partition in offset order, and the executors
decode with the pure codecs (`replicator.sources.executor`). The decoded events stay on the
executors (persisted); only resolved events, DDLs, dead letters and per-table aggregates come to
the driver, which windows them (`replicator.engine.batch`). A step's MERGE source is a
distributed DataFrame: the table's rows of the step's commit-ts span, turned into key changes on
the executors, the last change per key chosen by a window, never collected.
"""

from __future__ import annotations

import json
import logging
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

from replicator.changes import ChangeSummary
from replicator.codec.values import DecodeOptions
from replicator.events import Event, Position, Record, Resolved, RowChange
from replicator.filters import TableFilter
from replicator.runtime.spark import executor_errors
from replicator.sources import executor as ex
from replicator.sources.kafka import KafkaSettings
from replicator.sources.spill_index import ROW_COLUMN, SpanPlan, TypedRows
from replicator.tables import DdlScope, TableName, TableSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger("replicator")

def spark_kafka_options(settings: KafkaSettings) -> dict[str, str]:
    """Spark Kafka source options for the same broker and security settings as the driver's client
    (kafka-python names -> Java client names; PEM files as Kafka's PEM stores). Holds secrets:
    never logged."""
    sec = dict(settings.security or {})
    opts = {"kafka.bootstrap.servers": settings.bootstrap_servers}
    if "security_protocol" in sec:
        opts["kafka.security.protocol"] = str(sec["security_protocol"])
    if "sasl_mechanism" in sec:
        mech = str(sec["sasl_mechanism"])
        opts["kafka.sasl.mechanism"] = mech
        if "sasl_plain_username" in sec:
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mech == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            user = json.dumps(str(sec["sasl_plain_username"]))
            password = json.dumps(str(sec.get("sasl_plain_password", "")))
            opts["kafka.sasl.jaas.config"] = f"{module} required username={user} password={password};"
    if "ssl_cafile" in sec:
        opts["kafka.ssl.truststore.type"] = "PEM"
        opts["kafka.ssl.truststore.location"] = str(sec["ssl_cafile"])
    if "ssl_certfile" in sec and "ssl_keyfile" in sec:
        with open(sec["ssl_certfile"]) as cert, open(sec["ssl_keyfile"]) as key:
            opts["kafka.ssl.keystore.type"] = "PEM"
            opts["kafka.ssl.keystore.certificate.chain"] = cert.read()
            opts["kafka.ssl.keystore.key"] = key.read()
        if "ssl_password" in sec:
            opts["kafka.ssl.key.password"] = str(sec["ssl_password"])
    return opts


@dataclass
class BatchControl:
    """What of a batch comes to the driver: per partition, its resolved and DDL events by record
    (offset order), its dead letters, and the executors' counts."""

    events: dict[int, list[tuple[int, list[Event]]]] = field(default_factory=dict)
    dead: list[tuple[Record, str, str]] = field(default_factory=list)  # record, dead-letter error, stop error
    records: int = 0
    decoded: int = 0
    invalid_text: dict[tuple[str, str, str], int] = field(default_factory=dict)
    filtered: dict[str, int] = field(default_factory=dict)  # rows skipped by the table filter, per reason


@dataclass
class TableAgg:
    rows: int
    min_ts: int
    max_ts: int


class SparkBatch:
    """One batch of the Spark reader: the decoded events of some offset ranges, persisted on the
    executors until `close`. Implements the windower's `RowIndex` (engine/batch.py) over them."""

    def __init__(self, spark: SparkSession, topic: str, events: DataFrame | None, *,
                 load: Callable[[], DataFrame] | None = None, vouched: bool = False,
                 typed: TypedRows | None = None) -> None:
        self.spark, self.topic = spark, topic
        # A spill's events (`load`) are planned only when a span reads them: its typed rows do not.
        self._events, self._load = events, load
        self.vouched = vouched  # rows the driver read and spilled (sources/spill.py), engine/rows.py
        self.typed = typed  # the same rows, already decoded (the spill's)
        self._plans: dict[tuple[int, int], SpanPlan | None] = {}  # a span's, from the typed rows' index
        self.cut: dict[int, int] = {}  # partition -> first offset not taken (a dead letter under --on-error stop)
        self.tables: dict[TableName, TableAgg] = {}
        self.drops: dict[int, int] = {}  # drop kind -> rows

    @property
    def events(self) -> DataFrame:
        if self._events is None:
            assert self._load is not None
            self._events = self._load()
        return self._events

    # -- to the driver ---------------------------------------------------------------------------
    def control(self) -> BatchControl:
        """Collect the few non-row events (this first action decodes the batch and persists it)."""
        from pyspark.sql import functions as F

        with executor_errors("decoding"):
            rows = (self.events.filter(F.col("kind") != ex.ROW)
                    .select("partition", "offset", "idx", "kind", "ts", "payload").collect())
        out = BatchControl()
        grouped: dict[int, dict[int, list[tuple[int, Event]]]] = {}
        for r in sorted(rows, key=lambda r: (r["partition"], r["offset"], r["idx"])):
            kind, p, o = r["kind"], r["partition"], r["offset"]
            if kind == ex.STATS:
                stats = pickle.loads(r["payload"])
                out.records += stats["records"]
                out.decoded += stats["events"]
                for key, n in stats["invalid"].items():
                    out.invalid_text[key] = out.invalid_text.get(key, 0) + n
                for reason, n in stats["filtered"].items():
                    out.filtered[reason] = out.filtered.get(reason, 0) + n
            elif kind == ex.DEAD:
                millis, key, value, reason, failure = pickle.loads(r["payload"])
                out.dead.append((Record(self.topic, p, o, millis, key, value), reason, failure))
            elif kind == ex.RESOLVED:
                event: Event = Resolved(r["ts"], Position(self.topic, p, o))
                grouped.setdefault(p, {}).setdefault(o, []).append((r["idx"], event))
            elif kind == ex.DDL:
                grouped.setdefault(p, {}).setdefault(o, []).append((r["idx"], pickle.loads(r["payload"])))
        out.events = {p: [(o, [ev for _, ev in sorted(evs, key=lambda e: e[0])]) for o, evs in sorted(offs.items())]
                      for p, offs in grouped.items()}
        return out

    def _rows(self) -> DataFrame:
        """Row changes, without those at or past a partition's cut."""
        from pyspark.sql import functions as F

        cond = F.col("kind") == ex.ROW
        for p, off in self.cut.items():
            cond = cond & ~((F.col("partition") == p) & (F.col("offset") >= off))
        return self.events.filter(cond)

    def _live(self) -> DataFrame:
        """The rows buffered on arrival (neither replays nor already applied)."""
        from pyspark.sql import functions as F

        return self._rows().filter(F.col("drop") == ex.KEEP)

    def aggregate(self) -> None:
        """Per table: buffered rows and their commit-ts range; per fate on arrival: rows (one job)."""
        from pyspark.sql import functions as F

        with executor_errors("aggregating the batch"):
            rows = (self._rows().groupBy("drop", "schema", "table")
                    .agg(F.count(F.lit(1)).alias("n"), F.min("ts").alias("lo"), F.max("ts").alias("hi")).collect())
        self.tables = {}
        self.drops = {}
        for r in rows:
            self.drops[r["drop"]] = self.drops.get(r["drop"], 0) + r["n"]
            if r["drop"] == ex.KEEP:
                self.tables[(r["schema"], r["table"])] = TableAgg(r["n"], r["lo"], r["hi"])

    # -- RowIndex --------------------------------------------------------------------------------
    def first_after(self, scope: DdlScope, ts: int, hi: int) -> int | None:
        covered = [t for t, a in self.tables.items() if scope.covers(t) and a.max_ts > ts and a.min_ts <= hi]
        if not covered:
            return None
        from pyspark.sql import functions as F

        df = self._live().filter(_tables(covered) & (F.col("ts") > ts) & (F.col("ts") <= hi))
        with executor_errors("windowing"):
            found = df.agg(F.min("ts")).collect()[0][0]
        return None if found is None else int(found)

    def tables_in(self, lo: int, hi: int) -> list[TableName]:
        return sorted(t for t, a in self.tables.items() if a.max_ts > lo and a.min_ts <= hi)

    def restart_points(self, above: int) -> list[tuple[int, int, int]]:
        if not any(a.max_ts > above for a in self.tables.values()):
            return []
        from pyspark.sql import functions as F

        with executor_errors("restart cursors"):
            rows = (self._live().filter(F.col("ts") > above).groupBy("partition")
                    .agg(F.min(F.struct("offset", "wm_before")).alias("m")).collect())
        return [(r["partition"], r["m"]["offset"], r["m"]["wm_before"]) for r in rows]

    # -- a segment's rows ------------------------------------------------------------------------
    def _span(self, table: TableName, lo: int, hi: int) -> DataFrame:
        from pyspark.sql import functions as F

        return self._live().filter(_tables([table]) & (F.col("ts") > lo) & (F.col("ts") <= hi))

    def sample(self, table: TableName, lo: int, hi: int, n: int = 20) -> list[RowChange]:
        """The first `n` rows of a table's span, for what the catalog is inferred or keyed from."""
        with executor_errors("sampling rows"):
            rows = (self._span(table, lo, hi).orderBy("ts", "partition", "offset", "idx")
                    .select("ts", "partition", "offset", "payload").limit(n).collect())
        return [ex.row_from_payload(r["payload"], commit_ts=r["ts"], schema=table[0], table=table[1],
                                    position=Position(self.topic, r["partition"], r["offset"])) for r in rows]

    def changes(self, spec: TableSpec, table: TableName, lo: int, hi: int) -> DataFrame:
        """The span's net change per key as the positional MERGE source (`_c<i>`, `_op`), with
        `_fresh` (the key's first change was an INSERT) and `_pre` (one of its changes was an
        UPDATE with a pre-image: the stream tells inserts from updates), as `collapse` marks them."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        topic = self.topic
        schema = ex.change_schema(spec)
        ddl = ", ".join(f"`{f.name}` {_spark_type(spec, f.name)}" for f in schema)

        def to_changes(batches: Iterable[Any]) -> Iterator[Any]:
            return ex.change_batches(batches, topic=topic, spec=spec)

        cols = [f"_c{i}" for i in range(len(spec.columns))] + ["_op", "_fresh", "_pre"]
        typed = self._typed(spec)
        if typed is not None:  # decoded as they were spilled, under a spec of this shape
            plan = self._plan(typed, lo, hi)
            if plan is not None:
                with typed.read_back(plan, lo, hi, cols[:-2]) as small:
                    if small is not None:  # read on the driver, sent as the rows a step keeps in memory are
                        return self.spark.createDataFrame(small)
            keyed = self.spark.read.schema(f"{ddl}, `{ROW_COLUMN}` BIGINT").parquet(*typed.files).filter(
                (F.col("_ts") > lo) & (F.col("_ts") <= hi))
            if plan is not None and plan.superseded is not None:  # each key's last change, by row number
                if plan.superseded:
                    keyed = keyed.filter(~F.col(ROW_COLUMN).isin(plan.superseded))
                return keyed.select(*cols[:-2])  # the summary tells fresh inserts and pre-images
        else:
            keyed = (self._span(table, lo, hi).select("ts", "partition", "offset", "idx", "payload")
                     .mapInArrow(to_changes, ddl))
        idx = {c.name: i for i, c in enumerate(spec.columns)}
        window = Window.partitionBy(*[F.col(f"_c{idx[k]}") for k in spec.key]).orderBy(
            *[F.col(c).desc() for c in ex.ORDER_COLUMNS])
        whole = window.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
        return (keyed.withColumn("_rn", F.row_number().over(window))
                .withColumn("_fresh", F.last("_ins").over(whole))  # newest first: the last is the first change
                .withColumn("_pre", F.max("_pre").over(whole))
                .filter(F.col("_rn") == 1).select(*cols))

    def summary(self, spec: TableSpec, table: TableName, lo: int, hi: int) -> ChangeSummary | None:
        """What `changes` holds, as the driver knows it without a Spark job (a typed spill's
        index, sources/spill_index.py); None when only counting it can tell."""
        typed = self._typed(spec)
        plan = None if typed is None else self._plan(typed, lo, hi)
        return None if plan is None else plan.summary

    def _typed(self, spec: TableSpec) -> TypedRows | None:
        return self.typed if self.typed is not None and self.typed.shape == ex.change_shape(spec) else None

    def _plan(self, typed: TypedRows, lo: int, hi: int) -> SpanPlan | None:
        if (lo, hi) not in self._plans:
            self._plans[(lo, hi)] = typed.index.plan(lo, hi)
        return self._plans[(lo, hi)]

    def close(self) -> None:
        if self._events is not None:
            self._events.unpersist()


def _tables(tables: Sequence[TableName]) -> Column:
    from pyspark.sql import functions as F

    return reduce(lambda a, b: a | b, [(F.col("schema") == F.lit(s)) & (F.col("table") == F.lit(t))
                                       for s, t in tables])


def _spark_type(spec: TableSpec, name: str) -> str:
    if name.startswith("_c"):
        return spec.columns[int(name[2:])].spark_type
    return {"_op": "TINYINT", "_ts": "BIGINT", "_p": "INT", "_o": "BIGINT", "_i": "INT", "_sub": "TINYINT",
            "_ins": "TINYINT", "_pre": "TINYINT"}[name]


def read_batch(spark: SparkSession, settings: KafkaSettings, ranges: Mapping[int, tuple[int, int]], *,
               protocol: str, options: DecodeOptions, watermarks: Mapping[int, int],
               applied_ts: int, table_filter: TableFilter | None = None) -> SparkBatch:
    """The batch of `ranges` (partition -> [from, to)), decoded on the executors and persisted.

    Lazy: nothing is read before `SparkBatch.control()`. Spark's Kafka source makes one task per
    partition and reads it in offset order, which the windowing on the executors relies on (each
    row's partition watermark on arrival); so decoding runs on as many cores as the topic has
    partitions with something to read.
    """
    from pyspark import StorageLevel

    topic = settings.topic
    parts = sorted(ranges)
    reader = spark.read.format("kafka")
    for k, v in spark_kafka_options(settings).items():
        reader = reader.option(k, v)
    df = (reader.option("assign", json.dumps({topic: parts}))
          .option("startingOffsets", json.dumps({topic: {str(p): ranges[p][0] for p in parts}}))
          .option("endingOffsets", json.dumps({topic: {str(p): ranges[p][1] for p in parts}}))
          .load()
          .select("topic", "partition", "offset", "timestamp", "key", "value"))
    opts = DecodeOptions(timezone=options.timezone, legacy=options.legacy, zero_dates=options.zero_dates,
                          compression=options.compression)
    wms = {p: watermarks.get(p, 0) for p in parts}

    def decode(batches: Iterable[Any]) -> Iterator[Any]:
        return ex.decode_batches(batches, protocol=protocol, options=opts, watermarks=wms, applied_ts=applied_ts,
                                 table_filter=table_filter)

    events = df.mapInArrow(decode, ex.EVENTS_DDL).persist(StorageLevel.MEMORY_AND_DISK)
    return SparkBatch(spark, topic, events)

