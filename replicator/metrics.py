"""Prometheus metrics of one run: served while it runs (`--metrics-port`), written at exit
(`--metrics-textfile`, node_exporter's textfile collector).

Why a registry of its own (not the client library's global one): a process may run several
engines one after another (tests, notebooks), and each run's counters must start at zero.

Who updates what, and from which thread:
- the engine's loop thread: watermarks, Kafka lag per partition, steps (`observe_loop`, `step`);
  the Kafka consumer is never touched from the HTTP server's thread (kafka-python's consumer is
  not thread-safe), so the server only reads values the loop thread set;
- the MERGE workers: rows and commits per table, conflict retries (counters are thread-safe);
- the lag gauges are computed when scraped (now minus the applied watermark's physical time), so
  a follower that stopped advancing shows a rising lag even between its steps.

Cardinality: the `table` label is bounded by `max_tables` (`--metrics-max-tables`, default
`DEFAULT_MAX_TABLES`): the first tables seen get their own label, every later one is counted
under `table="_other"`, so a changefeed of thousands of tables adds at most 6 series per labelled
table. Partition labels are bounded by the topic's partitions, `reason` by the error classes and
`type` by the 36 DDL type codes. A sharded run (`--shard I/N`) adds `shard="I/N"` to every series.

Pure: imports no Spark or Kafka.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    write_to_textfile,
)

from replicator import __version__
from replicator.errors import ConfigError
from replicator.events import TP, tso_physical_ms

log = logging.getLogger("replicator")

# No `<counter>_created` series: a run's start time is in `replicator status`, and each would double
# the series of every counter.
disable_created_metrics()  # type: ignore[no-untyped-call]

DEFAULT_MAX_TABLES: Final = 200
"""Tables labelled individually before the rest are counted as `table="_other"`."""

OTHER_TABLE: Final = "_other"
SHARD_LABEL: Final = "shard"
"""The label every series of a sharded run (`--shard I/N`) carries, valued `I/N`; absent unsharded."""
STEP_BUCKETS: Final = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

METRICS: Final[dict[str, tuple[str, str, str]]] = {
    # name: (type, labels, help) -- docs/monitoring.md's metric list is generated from this (render_markdown)
    "replicator_info": ("gauge", "version, protocol, reader, source",
                        "Always 1; the labels say what runs."),
    "replicator_up": ("gauge", "", "1 while the run is running; 0 in the textfile written at its end."),
    "replicator_run_success": ("gauge", "",
                               "Textfile only: 1 when the run ended without an error, 0 otherwise."),
    "replicator_checkpoint_lag_seconds": ("gauge", "",
                                          "Now minus the physical time of the applied watermark (computed when "
                                          "scraped; NaN until a first watermark is applied); how far the Delta "
                                          "tables trail TiDB."),
    "replicator_checkpoint_timestamp_seconds": ("gauge", "",
                                                "Physical time of the applied watermark, Unix seconds (ms precision; "
                                                "the exact TSO is in `replicator status --json`)."),
    "replicator_resolved_lag_seconds": ("gauge", "",
                                        "How far the applied watermark trails the newest resolved event read."),
    "replicator_resolved_timestamp_seconds": ("gauge", "",
                                              "Physical time of the newest resolved event read, Unix seconds."),
    "replicator_kafka_consumer_lag_messages": ("gauge", "topic, partition",
                                               "End offset minus the next offset to read (as of the last fetch)."),
    "replicator_records_total": ("counter", "", "Kafka records (or archive records) read."),
    "replicator_rows_total": ("counter", "table, op",
                              "Rows of the Delta table inserted / updated / deleted (op), as Delta's MERGE "
                              "reports them."),
    "replicator_steps_total": ("counter", "kind", "Steps applied and committed (kind: window or ddl)."),
    "replicator_step_duration_seconds": ("histogram", "kind", "Time to apply one step (MERGEs and DDLs)."),
    "replicator_delta_commits_total": ("counter", "table, kind",
                                       "Delta commits per table: merge (one per data write that committed: a "
                                       "MERGE, an insert or an append) and ddl (one per DDL applied to the table)."),
    "replicator_delta_appends_total": ("counter", "table",
                                       "Data commits of only fresh inserts, appended instead of merged (one Spark "
                                       "job; also counted in delta_commits kind merge)."),
    "replicator_delta_conflict_retries_total": ("counter", "table",
                                                "Delta statements re-run after a concurrent writer committed first."),
    "replicator_dead_letters_total": ("counter", "reason",
                                      "Messages written to the dead-letter table, by error class."),
    "replicator_decode_errors_total": ("counter", "", "Messages that could not be decoded."),
    "replicator_ddl_applied_total": ("counter", "type, name", "DDL events applied, by TiDB DDL type code."),
    "replicator_ddl_skipped_total": ("counter", "type, name",
                                     "DDL events that failed and were skipped (--on-ddl-error skip)."),
    "replicator_last_step_timestamp_seconds": ("gauge", "", "When the last step was committed, Unix seconds."),
    "replicator_table_small_files": ("gauge", "table",
                                     "A table's small data files (under half --target-file-size) when the "
                                     "follower last looked at it, after compacting it if it did."),
    "replicator_compactions_total": ("counter", "",
                                     "Tables compacted between steps (one OPTIMIZE each, dataChange=false)."),
    "replicator_compacted_files_total": ("counter", "", "Small data files those compactions bin-packed."),
    "replicator_compaction_seconds_total": ("counter", "",
                                            "Time spent between steps looking at, compacting and vacuuming tables "
                                            "(at most a tenth of the run's)."),
    "replicator_vacuums_total": ("counter", "", "Tables vacuumed between steps (VACUUM past --retention-hours)."),
    "replicator_vacuumed_bytes_total": ("counter", "", "Bytes of unreferenced files those VACUUMs removed."),
}
"""Every metric: (type, labels, help). Names follow Prometheus conventions (base units, `_total`)."""


class _ConstantLabels(CollectorRegistry):
    """A registry whose every sample carries the same extra labels (`shard="I/N"` of a sharded run),
    so that N shards' series stay apart however they are scraped; an unsharded run's registry is a
    plain one (no label, names and series as ever)."""

    def __init__(self, labels: Mapping[str, str]) -> None:
        super().__init__(auto_describe=True)
        self._constant = dict(labels)

    def collect(self) -> Iterator[Any]:
        for metric in super().collect():
            metric.samples = [s._replace(labels={**s.labels, **self._constant}) for s in metric.samples]
            yield metric


def _suffix_free(name: str) -> str:
    """The client library adds `_total` to counters itself."""
    return name.removesuffix("_total")


class Metrics:
    """The metrics of one run, in a registry of their own."""

    def __init__(self, *, protocol: str = "", reader: str = "", source: str = "",
                 max_tables: int = DEFAULT_MAX_TABLES, shard: str | None = None) -> None:
        if max_tables < 0:
            raise ConfigError(f"--metrics-max-tables must be 0 or more, not {max_tables}")
        # --shard I/N: `shard="I/N"` on every series (SHARD_LABEL); unsharded, no such label.
        self.registry = (CollectorRegistry(auto_describe=True) if shard is None
                         else _ConstantLabels({SHARD_LABEL: shard}))
        self.max_tables = max_tables
        self._tables: set[str] = set()
        self._tables_lock = threading.Lock()
        self._local = threading.local()
        self._applied_ts = 0
        self._newest_resolved_ts = 0
        self._server: Any = None
        self._server_thread: threading.Thread | None = None
        m = {name: help_ for name, (_kind, _labels, help_) in METRICS.items()}
        r = self.registry
        Gauge("replicator_info", m["replicator_info"], ["version", "protocol", "reader", "source"],
              registry=r).labels(__version__, protocol, reader, source).set(1)
        self.up = Gauge("replicator_up", m["replicator_up"], registry=r)
        self.up.set(1)
        lag = Gauge("replicator_checkpoint_lag_seconds", m["replicator_checkpoint_lag_seconds"], registry=r)
        lag.set_function(self.checkpoint_lag)
        self.checkpoint_ts = Gauge("replicator_checkpoint_timestamp_seconds",
                                   m["replicator_checkpoint_timestamp_seconds"], registry=r)
        self.resolved_lag = Gauge("replicator_resolved_lag_seconds", m["replicator_resolved_lag_seconds"], registry=r)
        self.resolved_ts = Gauge("replicator_resolved_timestamp_seconds",
                                 m["replicator_resolved_timestamp_seconds"], registry=r)
        self.kafka_lag = Gauge("replicator_kafka_consumer_lag_messages", m["replicator_kafka_consumer_lag_messages"],
                               ["topic", "partition"], registry=r)
        self.records = Counter(_suffix_free("replicator_records_total"), m["replicator_records_total"], registry=r)
        self.rows = Counter(_suffix_free("replicator_rows_total"), m["replicator_rows_total"], ["table", "op"],
                            registry=r)
        self.steps = Counter(_suffix_free("replicator_steps_total"), m["replicator_steps_total"], ["kind"],
                             registry=r)
        self.step_seconds = Histogram("replicator_step_duration_seconds", m["replicator_step_duration_seconds"],
                                      ["kind"], buckets=STEP_BUCKETS, registry=r)
        self.commits = Counter(_suffix_free("replicator_delta_commits_total"), m["replicator_delta_commits_total"],
                               ["table", "kind"], registry=r)
        self.appends = Counter(_suffix_free("replicator_delta_appends_total"), m["replicator_delta_appends_total"],
                               ["table"], registry=r)
        self.conflicts = Counter(_suffix_free("replicator_delta_conflict_retries_total"),
                                 m["replicator_delta_conflict_retries_total"], ["table"], registry=r)
        self.dead_letters = Counter(_suffix_free("replicator_dead_letters_total"), m["replicator_dead_letters_total"],
                                    ["reason"], registry=r)
        self.decode_errors = Counter(_suffix_free("replicator_decode_errors_total"),
                                     m["replicator_decode_errors_total"], registry=r)
        self.ddl_applied = Counter(_suffix_free("replicator_ddl_applied_total"), m["replicator_ddl_applied_total"],
                                   ["type", "name"], registry=r)
        self.ddl_skipped = Counter(_suffix_free("replicator_ddl_skipped_total"), m["replicator_ddl_skipped_total"],
                                   ["type", "name"], registry=r)
        self.last_step = Gauge("replicator_last_step_timestamp_seconds", m["replicator_last_step_timestamp_seconds"],
                               registry=r)
        self._success = Gauge("replicator_run_success", m["replicator_run_success"], registry=None)
        self.small_files = Gauge("replicator_table_small_files", m["replicator_table_small_files"], ["table"],
                                 registry=r)
        self.compactions = Counter(_suffix_free("replicator_compactions_total"), m["replicator_compactions_total"],
                                   registry=r)
        self.compacted_files = Counter(_suffix_free("replicator_compacted_files_total"),
                                       m["replicator_compacted_files_total"], registry=r)
        self.compaction_seconds = Counter(_suffix_free("replicator_compaction_seconds_total"),
                                          m["replicator_compaction_seconds_total"], registry=r)
        self.vacuums = Counter(_suffix_free("replicator_vacuums_total"), m["replicator_vacuums_total"], registry=r)
        self.vacuumed_bytes = Counter(_suffix_free("replicator_vacuumed_bytes_total"),
                                      m["replicator_vacuumed_bytes_total"], registry=r)
        self._records_seen = 0

    # -- labels -----------------------------------------------------------------------------------
    def table_label(self, table: str) -> str:
        """`table` itself for the first `max_tables` tables seen, `_other` for the rest."""
        with self._tables_lock:
            if table in self._tables:
                return table
            if len(self._tables) < self.max_tables:
                self._tables.add(table)
                return table
        return OTHER_TABLE

    @contextlib.contextmanager
    def table_context(self, table: str) -> Iterator[None]:
        """Delta conflict retries on this thread (`conflict_retry`) count against `table` meanwhile."""
        old = getattr(self._local, "table", None)
        self._local.table = table
        try:
            yield
        finally:
            self._local.table = old

    # -- updates ----------------------------------------------------------------------------------
    def checkpoint_lag(self) -> float:
        """Seconds; NaN while nothing was applied (not 0: an empty warehouse is not caught up)."""
        ts = self._applied_ts
        return max(0.0, time.time() - tso_physical_ms(ts) / 1000) if ts else math.nan

    def watermarks(self, applied_ts: int, newest_resolved_ts: int) -> None:
        """The applied watermark and the newest resolved ts read (TSOs); from the loop thread."""
        self._applied_ts = applied_ts
        self._newest_resolved_ts = max(self._newest_resolved_ts, newest_resolved_ts)
        if applied_ts:
            self.checkpoint_ts.set(tso_physical_ms(applied_ts) / 1000)
        newest = self._newest_resolved_ts
        if newest:
            self.resolved_ts.set(tso_physical_ms(newest) / 1000)
            if applied_ts:
                self.resolved_lag.set(max(0.0, (tso_physical_ms(newest) - tso_physical_ms(applied_ts)) / 1000))

    def records_read(self, total: int) -> None:
        """The loop's running count of records read (monotonic)."""
        if total > self._records_seen:
            self.records.inc(total - self._records_seen)
            self._records_seen = total

    def kafka_lags(self, lags: Mapping[TP, int]) -> None:
        """Per (topic, partition)."""
        for (topic, partition), lag in lags.items():
            self.kafka_lag.labels(topic, str(partition)).set(lag)

    def merged(self, table: str, *, inserted: int, updated: int, deleted: int, committed: bool,
               appended: bool = False) -> None:
        label = self.table_label(table)
        for op, n in (("insert", inserted), ("update", updated), ("delete", deleted)):
            counter = self.rows.labels(label, op)  # every op present from the first MERGE on
            if n:
                counter.inc(n)
        if committed:
            self.commits.labels(label, "merge").inc()
            if appended:
                self.appends.labels(label).inc()

    def ddl(self, code: int, name: str, tables: list[str], *, applied: bool) -> None:
        (self.ddl_applied if applied else self.ddl_skipped).labels(str(code), name).inc()
        for table in tables:
            self.commits.labels(self.table_label(table), "ddl").inc()

    def conflict_retry(self) -> None:
        """A Delta statement re-run on this thread (see `table_context`)."""
        table = getattr(self._local, "table", None)
        self.conflicts.labels(self.table_label(table) if table else OTHER_TABLE).inc()

    def dead_lettered(self, reasons: list[str], *, decode_errors: int) -> None:
        for reason in reasons:
            self.dead_letters.labels(reason).inc()
        if decode_errors:
            self.decode_errors.inc(decode_errors)

    def looked_at(self, table: str, *, small_files: int, compacted: int, seconds: float) -> None:
        """A follower looked at `table` between steps (engine/compaction.py): it held `small_files`
        small files after compacting `compacted` of them (0: not compacted)."""
        self.small_files.labels(self.table_label(table)).set(small_files)
        if compacted:
            self.compactions.inc()
            self.compacted_files.inc(compacted)
        self.compaction_seconds.inc(seconds)

    def vacuumed(self, done: bool, *, removed_bytes: int, seconds: float) -> None:
        """A follower vacuumed a table between steps (`done`: it succeeded), removing `removed_bytes`."""
        if done:
            self.vacuums.inc()
            self.vacuumed_bytes.inc(removed_bytes)
        self.compaction_seconds.inc(seconds)

    def step(self, kind: str, seconds: float) -> None:
        self.steps.labels(kind).inc()
        self.step_seconds.labels(kind).observe(seconds)
        self.last_step.set(time.time())

    # -- export -----------------------------------------------------------------------------------
    def text(self) -> bytes:
        """The metrics in Prometheus text format (what the endpoint serves)."""
        return generate_latest(self.registry)

    def serve(self, host: str, port: int) -> int:
        """Serve /metrics on host:port in a daemon thread; the port bound (for `port` 0, a free one)."""
        from prometheus_client import start_http_server

        try:
            self._server, self._server_thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {host}:{port}: {exc}; choose another --metrics-port") from None
        bound = int(self._server.server_port)
        log.info("metrics at http://%s:%d/metrics", host, bound, extra={"metrics_port": bound})
        return bound

    def finish(self, *, success: bool, textfile: str | None) -> None:
        """The run ended: stop serving, and write the textfile (atomically) when asked."""
        self.up.set(0)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if textfile:
            self._success.set(1 if success else 0)
            self.registry.register(self._success)
            try:
                write_textfile(textfile, self.registry)
            finally:
                self.registry.unregister(self._success)


def write_textfile(path: str, registry: CollectorRegistry) -> None:
    """Write `registry` to `path` atomically (a temporary file in the same directory, renamed)."""
    target = Path(path)
    if not target.parent.is_dir():
        raise ConfigError(f"--metrics-textfile {path}: directory {target.parent} does not exist")
    write_to_textfile(str(target), registry)


def render_markdown() -> str:
    """The metric table of docs/monitoring.md (kept true by a test)."""
    lines = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for name, (kind, labels, help_) in METRICS.items():
        lines.append(f"| `{name}` | {kind} | {labels or '-'} | {help_} |")
    return "\n".join(lines)
