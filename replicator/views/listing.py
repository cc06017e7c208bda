"""The replicated tables of a warehouse, whichever source wrote them (`replicator tables`).

A warehouse holds tables applied from Kafka (catalog in `_replicator/state.json`), from a
statement binlog (catalog in `_replicator/binlog.json`, `replicator.binlog_apply`), or both.
Both catalogs are read here, so the listing does not depend on which source ran first.

Row counts (`list_tables(..., count=True)`) come from each table's `_delta_log`
(`replicator.delta.rowcount`: the live files' `numRecords` minus deletion vectors; exact, no Spark),
and from a Spark `count()` only for a table whose log cannot say exactly.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from typing import Any, Literal

from replicator.delta.catalog import CatalogConfig
from replicator.delta.features import reader_features, readers_of
from replicator.errors import ConfigError
from replicator.storage import is_url, normalise_root
from replicator.warehouse import State, TableEntry, Warehouse

log = logging.getLogger("replicator.views.listing")

Source = Literal["kafka", "binlog"]


@dataclass(frozen=True)
class ListedTable:
    """One live table. `applied_ts` is the Kafka run's applied TiDB watermark (a TSO); a binlog
    has none (None), its progress is the last applied commit number, `applied_seq`."""

    schema: str
    table: str
    path: str
    key: tuple[str, ...]
    source: Source
    applied_ts: int | None = None
    applied_seq: int | None = None
    reader_features: tuple[str, ...] = ()
    rows: int | None = None  # None: not counted (`list_tables(count=False)`) or no Delta table at `path`
    reader_changes: tuple[dict[str, Any], ...] = ()  # from the catalog (TableEntry.reader_changes)
    catalog: str | None = None  # its name in the metastore (`database.table`, --catalog-uri); None: by path only
    shard: str | None = None  # a sharded warehouse's: the shard ("I/N") that replicates it (applied_ts: its own)
    # live data files and the small ones among them (under half compaction's default target), when
    # counted; shown on a terminal only: the JSON and tab-separated forms keep their shape
    files: int | None = None
    small_files: int | None = None
    # when a follower or `replicator maintain` last compacted / vacuumed it (Unix seconds, from
    # state.json; None: not since state.json kept it); a terminal's too
    compacted_at: float | None = None
    vacuumed_at: float | None = None

    @property
    def readers(self) -> list[str]:
        """The common readers that read this table (features.READERS)."""
        return readers_of(list(self.reader_features))

    def to_json(self) -> dict[str, Any]:
        """The `replicator tables --json` object (keys as before, plus `source`, `reader_features`,
        `readers`, `reader_changes`, `catalog` and, when counted, `rows`)."""
        out: dict[str, Any] = {"schema": self.schema, "table": self.table, "path": self.path,
                               "key": list(self.key), "applied_ts": self.applied_ts, "source": self.source,
                               "reader_features": list(self.reader_features), "readers": self.readers,
                               "reader_changes": list(self.reader_changes), "catalog": self.catalog}
        if self.rows is not None:
            out["rows"] = self.rows
        if self.shard is not None:
            out["shard"] = self.shard
        return out

    def applied_text(self) -> str:
        """The readable "applied watermark" cell."""
        if self.source == "binlog":
            return f"commit #{self.applied_seq}" if self.applied_seq else "-"
        from replicator.events import tso_to_datetime

        ts = int(self.applied_ts or 0)
        return f"{ts} ({tso_to_datetime(ts).isoformat() if ts else '-'})"


def table_rows(path: str) -> int | None:
    """Exact row count of the Delta table at `path`: from its log (cheap, no Spark), else a Spark
    `count()` (a log without per-file record counts); None when `path` holds no Delta table."""
    from replicator.delta.rowcount import Inexact, count_rows

    try:
        return count_rows(path)
    except Inexact as exc:
        log.info("counting the rows of %s with Spark: %s", path, exc)
    from replicator.runtime.spark import get_spark, use_storage

    spark = get_spark()
    if is_url(path):
        use_storage(spark)
    return int(spark.read.format("delta").load(path).count())


def _kafka_tables(state: State, entries: list[TableEntry], shard: str | None) -> list[ListedTable]:
    catalog = CatalogConfig.from_json(state.catalog) if state.catalog else None
    return [ListedTable(e.schema_name, e.table, normalise_root(e.path), tuple(e.key), "kafka", state.applied_ts,
                        reader_features=tuple(reader_features(e.path)), reader_changes=tuple(e.reader_changes),
                        catalog=catalog.name_of(e.schema_name, e.table) if catalog is not None else None,
                        shard=shard, compacted_at=state.compacted.get(e.uid), vacuumed_at=state.vacuumed.get(e.uid))
            for e in entries]


def list_tables(root: str | os.PathLike[str], *, count: bool = False) -> tuple[str, list[ListedTable]]:
    """(warehouse root, live tables sorted by source, schema, table); ConfigError when `root` holds
    neither catalog. `count`: with each table's row count (`table_rows`)."""
    from replicator.delta.rowcount import file_counts
    from replicator.delta.shardview import ShardedView
    from replicator.warehouse.binlog_state import STATE_FILE, load_state

    wh = Warehouse(root)
    binlog_state = wh.meta / STATE_FILE
    has_state, has_binlog = wh.state_path.exists(), binlog_state.exists()
    view = None if has_state or has_binlog else ShardedView.read(wh)
    if not has_state and not has_binlog and view is None:
        raise ConfigError(
            f"{wh.root} is not a replicator warehouse (no _replicator/state.json or _replicator/binlog.json): "
            "give the --warehouse of a `replicator run`"
        )
    rows: list[ListedTable] = []
    if has_state:
        state = wh.load_state()
        rows += _kafka_tables(state, state.live_tables(), None)
    if view is not None:  # every shard's tables, each with its shard's applied watermark
        for shard in view.shards:
            rows += _kafka_tables(shard.state, shard.state.live_tables(), shard.label)
        rows.sort(key=lambda r: (r.schema, r.table))
    if has_binlog:
        bstate = load_state(binlog_state)
        seq = bstate.applied.seq if bstate.applied is not None else 0
        rows += sorted(
            (ListedTable(t.db, t.table, normalise_root(t.path), tuple(t.key), "binlog", None, seq,
                         reader_features=tuple(reader_features(t.path)))
             for t in bstate.tables if t.status == "live"),
            key=lambda r: (r.schema, r.table),
        )
    if count:
        counted = []
        for r in rows:
            files, small = file_counts(r.path)
            counted.append(replace(r, rows=table_rows(r.path), files=files, small_files=small))
        rows = counted
    return wh.root, rows
