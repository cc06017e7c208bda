"""`replicator run` and `replicator replay`: replicate a topic (or archives, or a binlog) into a warehouse."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import TYPE_CHECKING, Any

from replicator.cli.common import add_config, add_storage, print_summary, settings_from, time_zone
from replicator.cli.maintain_settings import add_size_flags
from replicator.cli.settings import ReplayCommand, ReplicatorSettings, RunCommand, defaults
from replicator.delta.features import PROFILES
from replicator.delta.schemachange import SCHEMA_CHANGES, format_size
from replicator.errors import ConfigError
from replicator.filters import TableFilter

if TYPE_CHECKING:
    from replicator.delta.catalog import CatalogConfig
    from replicator.engine.pipeline import RunOptions
    from replicator.sources.kafka import KafkaSource
    from replicator.sources.storage_sink import StorageSinkSource


def add_connection(p: argparse.ArgumentParser) -> None:
    """The layered flags of `run` and `replay` (each also REPLICATOR_<FLAG> and a --config key)."""
    d = defaults(ReplicatorSettings)
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers HOST:PORT[,HOST:PORT]")
    p.add_argument("--topic", action="append", metavar="TOPIC",
                   help="a TiCDC topic; repeatable (a changefeed dispatched topic per table: each table's topic "
                        "and the default topic)")
    p.add_argument("--topic-pattern", metavar="REGEX",
                   help="follow every topic whose whole name matches REGEX, also topics created later (read from "
                        "their earliest offset); instead of --topic")
    p.add_argument("--protocol", choices=["open", "craft", "canal-json", "simple", "csv"],
                   help="TiCDC wire format of the topic (a storage sink: csv or canal-json)")
    p.add_argument("--storage-sink", metavar="URL",
                   help="read TiCDC's storage sink (a directory or s3a://bucket/prefix, the changefeed's sink URI) "
                        "instead of Kafka (docs/storage-sink.md)")
    p.add_argument("--date-separator", choices=["none", "year", "month", "day"],
                   help=f"the storage sink's date-separator (default {d['date_separator']})")
    p.add_argument("--partition-separator", action="store_true", default=None,
                   help="the storage sink was written with enable-partition-separator")
    p.add_argument("--csv-delimiter", help=f"the CSV delimiter, 1-3 characters (default {d['csv_delimiter']!r})")
    p.add_argument("--csv-quote", help=f"the CSV quote character, or '' (default {d['csv_quote']!r})")
    p.add_argument("--csv-null", help=f"the CSV text of NULL (default {d['csv_null']!r})")
    p.add_argument("--csv-binary-encoding", choices=["base64", "hex"],
                   help=f"the CSV binary-encoding-method (default {d['csv_binary_encoding']})")
    add_storage(p)
    p.add_argument("--group-id", help="Kafka consumer group for offset commits (default: replicator-<topic>; "
                                      "with several topics: replicator-<first topic>, with a pattern required)")
    p.add_argument("--security-protocol", help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    p.add_argument("--sasl-mechanism", help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
    p.add_argument("--sasl-username", help="SASL user (the password comes from REPLICATOR_SASL_PASSWORD or --config)")
    p.add_argument("--ssl-cafile", help="CA bundle for SSL")
    p.add_argument("--until-caught-up", action="store_true", default=None,
                   help="read up to the end offsets seen at start, apply, commit, print a summary and exit")
    p.add_argument("--on-error", choices=["stop", "skip"],
                   help=f"undecodable message: dead-letter and stop or skip (default {d['on_error']})")
    p.add_argument("--on-ddl-error", choices=["stop", "skip"],
                   help=f"unmappable DDL: stop or dead-letter and skip (default {d['on_ddl_error']})")
    p.add_argument("--fresh-inserts", choices=["auto", "append", "merge"],
                   help="a table whose step holds only new keys: append its rows (one Spark job) instead of a "
                        "MERGE; auto: when the stream tells inserts from updates (canal-json, Simple; Open "
                        "Protocol and Craft once an update with old values was seen); append: also trust Open "
                        "Protocol / Craft inserts (old values on); merge: never "
                        f"(default {d['fresh_inserts']})")
    p.add_argument("--table-features", choices=PROFILES,
                   help="Delta features of new tables: compatible (readable by deltalake and polars; a DDL that "
                        f"needs more rewrites the table) or fast (everything up front) (default {d['table_features']})")
    p.add_argument("--schema-change", choices=SCHEMA_CHANGES,
                   help="RENAME / DROP COLUMN and type changes of a table without column mapping / type widening: "
                        "rewrite it (every reader reads it), metadata (metadata-only: enable the feature, no data "
                        "copied, no change-feed churn) or auto: metadata-only at or over --rewrite-limit "
                        f"(default {d['schema_change']})")
    p.add_argument("--rewrite-limit", metavar="SIZE",
                   help="with --schema-change auto: tables whose live data files hold at least this much change "
                        "metadata-only; bytes (1048576) or a size (512MiB, 1GiB) "
                        f"(default {format_size(d['rewrite_limit'])})")
    p.add_argument("--timezone", help=f"upstream time zone of TIMESTAMP values (default {d['timezone']})")
    p.add_argument("--legacy", choices=["auto", "legacy", "modern"],
                   help=f"Open Protocol pre-4.0.6 base64 strings (default {d['legacy']})")
    p.add_argument("--zero-dates", choices=["error", "null"],
                   help=f"zero DATE/DATETIME values: error or NULL (default {d['zero_dates']})")
    p.add_argument("--compression", choices=["none", "lz4", "snappy"],
                   help="the changefeed's large-message-handle-compression: TiCDC then compresses every message "
                        f"value, not only the large ones (default {d['compression']})")
    p.add_argument("--claim-check-storage", metavar="URL",
                   help="where the changefeed's claim-check-storage-uri files can be read: a directory or a "
                        "warehouse URL (s3a://bucket/prefix); claim-check references are resolved from it "
                        "(--reader driver)")
    p.add_argument("--max-buffer-rows", type=int,
                   help=f"bound on buffered rows: apply complete windows once reached (default {d['max_buffer_rows']})")
    p.add_argument("--spill-rows", type=int, metavar="N",
                   help="a full buffer moves its complete rows to disk (the warehouse's _replicator/spill/) and "
                        "reads on, until this many wait; a step then applies them all (0: a full buffer applies "
                        f"them at once) (default {d['spill_rows']})")
    p.add_argument("--flush-interval", type=float, metavar="SECONDS",
                   help="a follower applies what is complete at most this often (a sharded one: on a grid of "
                        f"upstream time this long; give every shard the same) (default {d['flush_interval']:g})")
    p.add_argument("--apply-parallelism", type=int, metavar="N",
                   help="MERGEs of one step run at once, each table in its own Spark session "
                        f"(default {d['apply_parallelism']})")
    p.add_argument("--reader", choices=["driver", "spark"],
                   help="where records are read and decoded: in this process (driver) or on Spark executors "
                        f"with Spark's Kafka source (spark) (default {d['reader']})")
    p.add_argument("--kafka-retry-budget", type=float, metavar="SECONDS",
                   help="stop (non-zero, nothing lost) once the broker has been unreachable this long "
                        "(at start: at most 30) "
                        f"(default {d['kafka_retry_budget']:g})")
    p.add_argument("--wait", action="store_true", default=None, help="wait for another run on the warehouse to finish")
    p.add_argument("--lease-seconds", type=float, metavar="SECONDS",
                   help="term of the warehouse's writer lease: a run killed without giving it back is taken over "
                        f"this long after its last renewal (default {d['lease_seconds']:g})")
    p.add_argument("--json-summary", action="store_true", default=None, help="print the summary as JSON")
    p.add_argument("--compaction", action=argparse.BooleanOptionalAction, default=None,
                   help="compact the tables it writes between its steps, within a tenth of its time, by "
                        "--target-file-size and --min-small-files (default: a follower does, a run with "
                        "--until-caught-up does not; `replicator maintain` does it on demand)")
    add_size_flags(p, d, "--compaction: compact")
    p.add_argument("--retention-hours", type=float, metavar="HOURS",
                   help="--compaction: also VACUUM the tables it writes, removing files no version of the last "
                        "HOURS needs (never below a table's own delta.deletedFileRetentionDuration), every seventh "
                        "of HOURS, at most a day apart; snapshots at older watermarks are no longer offered "
                        f"(default {d['retention_hours']:g}: 7 days)")
    p.add_argument("--shard", metavar="I/N",
                   help="run shard I of N (0 <= I < N): replicate only the tables whose identity (the name the "
                        "stream first showed, followed through renames) hashes to I, with this shard's own progress, "
                        "lease and consumer group; run N of them on one warehouse (docs/running.md#shards)")
    p.add_argument("--include", action="append", metavar="RULE",
                   help="replicate only tables matching RULE (schema.table; *, ?, [a-z], `quoted`, /regex/; "
                        "repeatable; default every table)")
    p.add_argument("--exclude", action="append", metavar="RULE",
                   help="skip tables matching RULE (repeatable; exclude wins over include)")
    p.add_argument("--catalog-uri", metavar="URI",
                   help="register each table by name (<schema>.<table>) in the Hive metastore service at URI "
                        "(thrift://HOST:PORT; `make catalog-up` prints the local one's); the warehouse records it, "
                        "so later runs and readers use it too")
    p.add_argument("--catalog-database-prefix", metavar="PREFIX",
                   help="prefix of the catalog's database names: <PREFIX><schema>.<table> (default none)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve Prometheus metrics on this port while running (0: a free port, logged)")
    p.add_argument("--metrics-host", metavar="HOST",
                   help=f"address the metrics endpoint listens on (default {d['metrics_host']})")
    p.add_argument("--metrics-textfile", metavar="PATH",
                   help="write the metrics to PATH (atomically, Prometheus text format) when the run ends: for "
                        "node_exporter's textfile collector (name it *.prom)")
    p.add_argument("--metrics-max-tables", type=int, metavar="N",
                   help="tables with a `table` label of their own; the rest are counted as table=\"_other\" "
                        f"(default {d['metrics_max_tables']})")
    add_config(p)


def register(sub: Any) -> None:
    run_p = sub.add_parser("run", help="replicate a topic (or archives, or a storage sink) into a warehouse")
    add_connection(run_p)
    run_p.add_argument("--archive", nargs="+", metavar="PATH", help="replicate from capture archives instead of Kafka")
    run_p.add_argument("--binlog", nargs="+", metavar="PATH", help="apply a statement binlog instead of Kafka")
    run_p.set_defaults(handler=lambda ns: run(
        RunCommand(settings=settings_from(ns), archive=tuple(ns.archive or ()), binlog=tuple(ns.binlog or ()))))

    replay_p = sub.add_parser("replay", help="re-read a topic from chosen offsets and re-apply")
    add_connection(replay_p)
    start = replay_p.add_mutually_exclusive_group(required=True)
    start.add_argument("--from-earliest", action="store_true", help="from the earliest retained offsets")
    start.add_argument("--from-offsets", metavar="[TOPIC:]P=O[,...]",
                       help="from these offsets (other partitions: stored); the bare P=O form with one topic only")
    start.add_argument("--from-timestamp", metavar="ISO8601", help="from the first offsets at/after this time")
    start.add_argument("--from-ts", type=int, metavar="TSO",
                       help="a storage sink: re-read every file and re-apply the changes from this commit ts on")
    replay_p.set_defaults(handler=lambda ns: replay(ReplayCommand(
        settings=settings_from(ns), from_earliest=ns.from_earliest, from_offsets=ns.from_offsets,
        from_timestamp=ns.from_timestamp, from_ts=ns.from_ts)))


def run_options(s: ReplicatorSettings, *, start: Any = None) -> RunOptions:
    """The engine's options from the resolved settings."""
    from replicator.codec.values import DecodeOptions
    from replicator.engine.pipeline import RunOptions

    if s.reader == "spark" and s.claim_check_storage is not None:
        raise ConfigError("--claim-check-storage needs --reader driver: the Spark reader does not resolve "
                          "claim-check references (TiCDC large messages)")
    if (s.compression != "none" or s.claim_check_storage is not None) and s.protocol == "craft":
        raise ConfigError("--compression and --claim-check-storage are for --protocol open, canal-json and simple: "
                          "TiCDC has no large-message handling for craft")
    return RunOptions(
        warehouse=s.require("warehouse"),
        protocol=s.require("protocol"),
        until_caught_up=s.until_caught_up,
        on_error=s.on_error,
        on_ddl_error=s.on_ddl_error,
        fresh_inserts=s.fresh_inserts,
        table_features=s.table_features,
        schema_change=s.schema_change,
        rewrite_limit=s.rewrite_limit,
        decode=DecodeOptions(timezone=time_zone(s.timezone), legacy=s.legacy, zero_dates=s.zero_dates,
                             compression=s.compression),
        claim_check_storage=s.claim_check_storage,
        start=start,
        max_buffer_rows=s.max_buffer_rows,
        spill_rows=s.spill_rows,
        flush_interval_s=s.flush_interval,
        apply_parallelism=s.apply_parallelism,
        reader=s.reader,
        wait_for_lock=s.wait,
        lease_seconds=s.lease_seconds,
        metrics_port=s.metrics_port,
        metrics_host=s.metrics_host,
        metrics_textfile=s.metrics_textfile,
        metrics_max_tables=s.metrics_max_tables,
        table_filter=TableFilter(s.include, s.exclude),
        catalog=catalog_config(s),
        shard=s.shard,
        compaction=s.compaction,
        target_file_bytes=s.target_file_size,
        min_small_files=s.min_small_files,
        retention_hours=s.retention_hours,
    )


def catalog_config(s: ReplicatorSettings) -> CatalogConfig | None:
    """Where tables are registered: --catalog-uri, else the `[spark]` settings of a Hive metastore
    (spark.sql.catalogImplementation = "hive" and spark.hadoop.hive.metastore.uris), else None (the
    warehouse's recorded catalog, if any, then applies)."""
    from replicator.delta.catalog import CatalogConfig, check_uri, uri_from_spark_conf

    uri = check_uri(s.catalog_uri) if s.catalog_uri else uri_from_spark_conf(s.spark)
    if uri is None:
        if s.catalog_database_prefix:
            raise ConfigError("--catalog-database-prefix needs a catalog: give --catalog-uri too")
        return None
    return CatalogConfig(uri, s.catalog_database_prefix)


def kafka_source(s: ReplicatorSettings) -> KafkaSource:
    from replicator.sources.kafka import KafkaSettings, KafkaSource, topic_pattern

    topics, pattern = s.topic or [], s.topic_pattern
    if bool(topics) == (pattern is not None):
        raise ConfigError("give the topics to read: --topic (repeatable; REPLICATOR_TOPIC comma-separated, `topic` "
                          "a list in --config) or --topic-pattern REGEX, not both")
    if pattern is not None:
        pattern = topic_pattern(pattern)
        if s.group_id is None:
            raise ConfigError("--topic-pattern needs --group-id (the consumer group the offsets are committed to)")
    if len(set(topics)) != len(topics):
        raise ConfigError(f"--topic names a topic twice: {', '.join(topics)}")
    return KafkaSource(KafkaSettings(
        bootstrap_servers=s.require("bootstrap_servers"), topic=topics[0] if len(topics) == 1 else "",
        topics=tuple(topics) if len(topics) > 1 else (), topic_pattern=pattern,
        group_id=s.group_id_for(topics[0], shard=s.shard) if topics else s.group_id,
        security=s.kafka_security(), retry_budget_s=s.kafka_retry_budget,
    ))


def storage_source(s: ReplicatorSettings, *, from_ts: int = 0) -> StorageSinkSource:
    """`--storage-sink URL`: TiCDC's storage sink as the source (csv or canal-json files)."""
    from replicator.codec.csv.common import CsvConfig
    from replicator.sources.storage_sink import StorageSinkSettings, StorageSinkSource

    if s.topic or s.topic_pattern or s.bootstrap_servers:
        raise ConfigError("--storage-sink replaces Kafka: leave out --topic, --topic-pattern and --bootstrap-servers")
    if s.protocol not in ("csv", "canal-json"):
        raise ConfigError(f"--storage-sink needs --protocol csv or canal-json (the changefeed's protocol), not "
                          f"{s.protocol or 'none'}")
    if s.reader == "spark":
        raise ConfigError("--reader spark reads a Kafka topic; a storage sink is read with --reader driver")
    csv = CsvConfig(delimiter=s.csv_delimiter, quote=s.csv_quote, null=s.csv_null,
                    binary_encoding=s.csv_binary_encoding)
    return StorageSinkSource(StorageSinkSettings(
        s.require("storage_sink"), protocol="csv" if s.protocol == "csv" else "canal-json", csv=csv,
        date_separator=s.date_separator, partition_separator=s.partition_separator, from_ts=from_ts))


def run(cmd: RunCommand) -> int:
    from replicator.engine.pipeline import Engine

    s = cmd.settings
    if s.storage_sink:
        if cmd.archive or cmd.binlog:
            raise ConfigError("--storage-sink, --archive and --binlog are different sources: give one")
        print_summary(Engine(storage_source(s), run_options(s)).run(), s)
        return 0
    if s.protocol == "csv":
        raise ConfigError("--protocol csv is TiCDC's storage sink: give --storage-sink URL")
    if cmd.archive and cmd.binlog:
        raise ConfigError("--archive and --binlog are different sources: give one")
    if cmd.binlog:
        if s.shard is not None:
            raise ConfigError("--shard shards a changefeed's tables; a statement binlog (--binlog) is applied whole")
        return run_binlog(cmd.binlog, s)
    if cmd.archive:
        from replicator.sources.archive import ArchiveSource

        if s.reader == "spark":
            raise ConfigError("--reader spark reads a Kafka topic; archives are read with --reader driver")
        archive = ArchiveSource(list(cmd.archive))  # checks every frame first: corruption stops before anything applies
        if s.protocol is not None and s.protocol != archive.protocol:
            raise ConfigError(f"--protocol {s.protocol}, but the archive holds {archive.protocol} records")
        # An archive is finite: read it to the end, apply, exit.
        options = run_options(s.model_copy(update={"protocol": archive.protocol, "until_caught_up": True}))
        print_summary(Engine(archive, options).run(), s)
        return 0
    print_summary(Engine(kafka_source(s), run_options(s)).run(), s)
    return 0


def run_binlog(paths: Any, s: ReplicatorSettings) -> int:
    """`run --binlog PATH...`: apply, then print the summary (also after a failure: what was applied)."""
    from replicator.binlog_apply import BinlogApplier

    applier = BinlogApplier(s.require("warehouse"), lease_seconds=s.lease_seconds)
    try:
        applier.run(list(paths), wait=s.wait)
    finally:
        print_summary(applier.summary, s)
    return 0


def replay(cmd: ReplayCommand) -> int:
    from replicator.engine.pipeline import Engine
    from replicator.sources.kafka import parse_offsets

    s = cmd.settings
    start: Any
    if s.storage_sink:
        if cmd.from_offsets:
            raise ConfigError("--from-offsets names Kafka offsets; a storage sink replays with --from-ts TSO, "
                              "--from-timestamp or --from-earliest")
        from_ts = cmd.from_ts or 0
        if cmd.from_timestamp:
            from replicator.events import tso_from_datetime

            from_ts = tso_from_datetime(_timestamp(cmd.from_timestamp))
        # every stream from its first file; what the warehouse holds is skipped by its watermark
        print_summary(Engine(storage_source(s, from_ts=from_ts), run_options(s, start="earliest")).run(), s)
        return 0
    if cmd.from_ts is not None:
        raise ConfigError("--from-ts is for a storage sink (--storage-sink); a topic replays with --from-timestamp")
    source = kafka_source(s)
    if cmd.from_earliest:
        start = "earliest"
    elif cmd.from_offsets:
        start = parse_offsets(cmd.from_offsets, source.settings.named_topics, source.partitions())
    else:
        when = _timestamp(cmd.from_timestamp or "")
        start = {p: o for p, o in source.offsets_for_timestamp(when).items() if o is not None}
    print_summary(Engine(source, run_options(s, start=start)).run(), s)
    return 0


def _timestamp(stamp: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(stamp)
    except ValueError:
        raise ConfigError(f"--from-timestamp expects ISO 8601, got {stamp!r}") from None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when
