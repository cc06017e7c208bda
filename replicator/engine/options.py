"""What a run is asked to do: `RunOptions`, every setting of `replicator run` the engine reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from replicator.codec.values import DecodeOptions
from replicator.delta.features import DEFAULT_PROFILE, Profile
from replicator.delta.schemachange import DEFAULT_REWRITE_LIMIT, DEFAULT_SCHEMA_CHANGE, SchemaChange
from replicator.engine.schedule import DEFAULT_APPLY_PARALLELISM
from replicator.filters import TableFilter
from replicator.maintenance import DEFAULT_MIN_SMALL_FILES, DEFAULT_RETENTION_HOURS, DEFAULT_TARGET_FILE_BYTES
from replicator.metrics import DEFAULT_MAX_TABLES
from replicator.progress import TP
from replicator.shards import ShardSpec
from replicator.storage.lease import DEFAULT_LEASE_SECONDS

if TYPE_CHECKING:
    from replicator.delta.catalog import CatalogConfig

Protocol = Literal["open", "craft", "canal-json", "simple", "csv"]  # csv: storage sinks only
Reader = Literal["driver", "spark"]

DEFAULT_MAX_BUFFER_ROWS = 200_000
"""--max-buffer-rows' default, the one definition (`RunOptions`, `LoopOptions` and the CLI's
settings read it); a constant here, so the CLI's settings need not import the loop."""

DEFAULT_SPILL_ROWS = DEFAULT_MAX_BUFFER_ROWS
"""--spill-rows' default: rows a full buffer may move to disk (sources/spill.py) before they are
applied, as many as the default buffer holds: a catch-up under a small bound steps as the default
buffer's does."""

DEFAULT_FLUSH_INTERVAL_S = 2.0
"""--flush-interval's default: a follower's step every 2 s (plus the step's own time) at most."""


@dataclass
class RunOptions:
    warehouse: str
    protocol: Protocol
    until_caught_up: bool = False
    on_error: Literal["stop", "skip"] = "stop"
    on_ddl_error: Literal["stop", "skip"] = "stop"
    # a table's step of only new keys is appended: when the stream tells inserts apart ("auto"),
    # always ("append"), never ("merge"); engine/merging.py
    fresh_inserts: Literal["auto", "append", "merge"] = "auto"
    decode: DecodeOptions = field(default_factory=DecodeOptions)
    start: Mapping[TP, int] | Literal["earliest"] | None = None  # None: stored state (or earliest)
    max_buffer_rows: int = DEFAULT_MAX_BUFFER_ROWS
    spill_rows: int = DEFAULT_SPILL_ROWS  # a full buffer's complete rows wait on disk (engine/loop.py)
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S
    wait_for_lock: bool = False
    progress: bool | None = None  # None: a live display when stderr is a terminal
    table_features: Profile = DEFAULT_PROFILE  # what new tables get (replicator/delta/features.py)
    apply_parallelism: int = DEFAULT_APPLY_PARALLELISM  # MERGEs of one step run at once (engine/schedule.py)
    reader: Reader = "driver"  # where records are read and decoded (engine/batch.py for "spark")
    lease_seconds: float = DEFAULT_LEASE_SECONDS  # the writer lease's term (storage/lease.py)
    # RENAME / DROP COLUMN and type changes: rewrite or metadata-only, by size (delta/schemachange.py)
    schema_change: SchemaChange = DEFAULT_SCHEMA_CHANGE
    rewrite_limit: int = DEFAULT_REWRITE_LIMIT
    metrics_port: int | None = None  # serve Prometheus metrics here while running (replicator/metrics.py)
    metrics_host: str = "127.0.0.1"
    metrics_textfile: str | None = None  # write them here at exit (node_exporter's textfile collector)
    metrics_max_tables: int = DEFAULT_MAX_TABLES  # tables labelled individually, the rest as `_other`
    table_filter: TableFilter = field(default_factory=TableFilter)  # --include / --exclude (filters.py)
    # where TiCDC's claim-check files are (large messages; sources/claimcheck.py); the compression
    # of message values is `decode.compression`
    claim_check_storage: str | None = None
    # register the tables by name in this metastore (delta/catalog.py); None: the one the warehouse
    # records, if any
    catalog: CatalogConfig | None = None
    # --shard I/N: only the tables whose identity hashes to I (replicator/shards.py), with this
    # shard's own state under _replicator/shards/I-of-N/; None: every table, the usual layout
    shard: ShardSpec | None = None
    # compact the tables it writes between steps, within a tenth of the run's time
    # (engine/compaction.py), by `replicator maintain`'s size rules; None: a follower does, a
    # catch-up run (--until-caught-up) does not (`replicator maintain` after it does)
    compaction: bool | None = None
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    min_small_files: int = DEFAULT_MIN_SMALL_FILES
    # with compaction, also VACUUM the tables it writes past this many hours (never below a
    # table's own retention); the step log keeps its steps as long (older watermarks are gone)
    retention_hours: float = DEFAULT_RETENTION_HOURS
