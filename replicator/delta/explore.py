"""Exploring a warehouse from Python / Jupyter: tables, history, change feed, consistent snapshots.

Plain Delta has no multi-table consistency: each table has its own versions. The replicator logs,
for every applied step (a window batch or a DDL), the Delta version each table reached
(`_replicator/windows.jsonl`). So for any applied global watermark W, every table "as of W" is the
table at the last version some step with applied_ts <= W left it at — one upstream commit point
across all tables.

A sharded warehouse (`--shard I/N`) is read as one: its tables are every shard's, and its
watermarks the points every shard's tables held together (delta/shardview.py): at most the
smallest of the shards' applied watermarks.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicator.delta.catalog import CatalogConfig
from replicator.delta.shardview import Shard, ShardedView, earliest_readable, readable_steps, table_versions_at
from replicator.events import tso_physical_ms, tso_to_datetime
from replicator.runtime.spark import IMPLEMENTATION_CONF, URIS_CONF
from replicator.storage import is_url
from replicator.warehouse import TableEntry, Warehouse

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession


def default_warehouse() -> str | Path:
    """$REPLICATOR_WAREHOUSE (a directory or an object-store URL), else ./warehouse (or
    ../warehouse when run from notebooks/)."""
    env = os.environ.get("REPLICATOR_WAREHOUSE")
    if env:
        return env if is_url(env) else Path(env)
    for candidate in (Path("warehouse"), Path("..") / "warehouse"):
        if (candidate / "_replicator" / "state.json").exists() or (candidate / "_replicator" / "shards.json").exists():
            return candidate
    return Path("warehouse")


@dataclass
class Explorer:
    warehouse: Warehouse
    spark: SparkSession
    sharded: bool = False  # read every shard's state and step log (`shards()`) for each call

    def shards(self) -> ShardedView:
        view = ShardedView.read(self.warehouse)
        if view is None:
            raise FileNotFoundError(f"{self.warehouse.root} is no longer sharded")
        return view

    def _parts(self) -> list[Shard]:
        """The warehouse's parts, each a state with its step log: one when unsharded."""
        if self.sharded:
            return self.shards().shards
        return [Shard(self.warehouse, self.warehouse.load_state())]

    def _records(self, uid: str) -> list[dict[str, Any]]:
        """The step log of the shard holding table `uid` (the warehouse's own when unsharded)."""
        if not self.sharded:
            return self.warehouse.windows()
        shard = self.shards().shard_of(uid)
        return shard.records if shard is not None else []

    # -- catalog ------------------------------------------------------------------------------
    @property
    def catalog(self) -> CatalogConfig | None:
        """The metastore the warehouse's tables are registered in (`--catalog-uri`), or None."""
        recorded = self.shards().catalog() if self.sharded else self.warehouse.load_state().catalog
        return CatalogConfig.from_json(recorded) if recorded else None

    @property
    def uses_catalog(self) -> bool:
        """Whether this session reads the warehouse's catalog: then `spark.table(catalog_name(t))` works."""
        catalog = self.catalog
        if catalog is None or self.spark.conf.get(IMPLEMENTATION_CONF, "in-memory") != "hive":
            return False
        uris = self.spark.conf.get(URIS_CONF, None) or \
            self.spark.sparkContext._jsc.hadoopConfiguration().get("hive.metastore.uris")
        return (uris or "").strip() == catalog.uri

    def catalog_name(self, name: str) -> str:
        """The catalog name (`database.table`) of a live table (`schema.table`)."""
        entry = self._entry(name)
        catalog = self.catalog
        registered = catalog.name_of(entry.schema_name, entry.table) if catalog is not None else None
        if registered is None:
            raise KeyError(f"{name} is not registered in a catalog (read it with table({name!r}))")
        return registered

    def _entry(self, name: str) -> TableEntry:
        schema, _, table = name.partition(".")
        parts = self._parts()
        entry = next((e for p in parts if (e := p.state.live_table(schema, table)) is not None), None)
        if entry is None:
            known = ", ".join(sorted(f"{e.schema_name}.{e.table}" for p in parts for e in p.state.live_tables()))
            raise KeyError(f"no live table {name!r} in {self.warehouse.root} (tables: {known})")
        return entry

    def tables(self) -> pd.DataFrame:
        """One row per live table: schema, table, key, rows, applied watermark (TSO + time), lag."""
        import pandas as pd

        now_ms = dt.datetime.now(dt.UTC).timestamp() * 1000
        rows = []
        live = sorted(((p, e) for p in self._parts() for e in p.state.live_tables()),
                      key=lambda pe: (pe[1].schema_name, pe[1].table))
        for part, e in live:
            count = self.spark.read.format("delta").load(e.path).count()
            ts = part.applied_ts
            rows.append({**({"shard": part.label} if self.sharded else {}),
                "schema": e.schema_name, "table": e.table, "key": ", ".join(e.key), "rows": count,
                "applied_ts": ts, "applied_at": tso_to_datetime(ts) if ts else None,
                "lag_s": round((now_ms - tso_physical_ms(ts)) / 1000, 1) if ts else None,
                "path": e.path,
            })
        return pd.DataFrame(rows)

    def table(self, name: str, *, as_of_watermark: int | None = None, version: int | None = None) -> DataFrame:
        """A table as a Spark DataFrame: now, at a Delta version, or as of an applied watermark."""
        entry = self._entry(name)
        reader = self.spark.read.format("delta")
        if as_of_watermark is not None:
            version = self.version_at(entry.uid, as_of_watermark)
            if version is None:
                raise KeyError(f"{name} did not exist yet at watermark {as_of_watermark}")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(entry.path)

    # -- windows ------------------------------------------------------------------------------
    def windows(self) -> pd.DataFrame:
        """Every applied step: kind (window/ddl), applied watermark, time, rows changed, lag (sharded:
        every shard's steps, with a `shard` column, in watermark order)."""
        import pandas as pd

        recs = []
        if self.sharded:
            steps = sorted(((p.label, w) for p in self._parts() for w in p.records),
                           key=lambda lw: (int(lw[1].get("applied_ts", lw[1]["hi"])), lw[0]))
        else:
            steps = [("", w) for w in self.warehouse.windows()]
        for label, w in steps:
            tables = w.get("tables", {})
            recorded = dt.datetime.fromisoformat(w["recorded_at"])
            applied = int(w.get("applied_ts", w["hi"]))
            recs.append({**({"shard": label} if self.sharded else {}),
                "step": w["step"], "kind": w["kind"], "applied_ts": applied,
                "watermark_time": tso_to_datetime(applied), "recorded_at": recorded,
                "rows_changed": sum(t.get("upserts", 0) + t.get("deletes", 0) for t in tables.values()),
                "tables": len(tables),
                "lag_s": (recorded - tso_to_datetime(applied)).total_seconds(),
                "ddl": "; ".join(d["query"] for d in _ddls(w)) or None,
            })
        return pd.DataFrame(recs)

    def watermarks(self) -> list[int]:
        """Applied global watermarks at which a consistent snapshot can be taken (sharded: the points
        every shard's tables held together, at most the smallest of the shards' watermarks)."""
        if self.sharded:
            return self.shards().watermarks()
        return sorted({int(w.get("applied_ts", w["hi"])) for w in readable_steps(self.warehouse.windows())})

    def version_at(self, uid: str, watermark: int) -> int | None:
        """The Delta version table `uid` had when the replicator's applied watermark was `watermark`."""
        version = None
        records = self._records(uid)
        earliest = earliest_readable(records)
        if earliest is not None and watermark < earliest:
            raise ValueError(f"watermark {watermark} is older than the step log keeps (its steps before "
                             f"{earliest} were rolled up after their retention, and their Delta files may "
                             f"be vacuumed): the earliest readable watermark is {earliest} (see watermarks())")
        for w in records:
            if int(w.get("applied_ts", w["hi"])) > watermark:
                break
            t = w.get("tables", {}).get(uid)
            if t is not None:
                version = int(t["version"])
        return version

    def snapshot(self, watermark: int) -> dict[str, DataFrame]:
        """Every table as of the same upstream commit point W (an applied watermark; sharded: one of
        `watermarks()`, ValueError otherwise)."""
        out: dict[str, DataFrame] = {}
        if self.sharded:
            for e, at in table_versions_at(self.shards(), watermark):
                out[f"{e.schema_name}.{e.table}"] = (
                    self.spark.read.format("delta").option("versionAsOf", at).load(e.path))
            return dict(sorted(out.items()))
        state = self.warehouse.load_state()
        for e in state.tables.values():
            if e.created_ts > watermark or (e.dropped_ts is not None and e.dropped_ts <= watermark):
                continue
            version = self.version_at(e.uid, watermark)
            if version is None:
                continue
            out[f"{e.schema_name}.{e.table}"] = (
                self.spark.read.format("delta").option("versionAsOf", version).load(e.path)
            )
        return dict(sorted(out.items()))

    # -- history and changes ------------------------------------------------------------------
    def history(self, name: str) -> pd.DataFrame:
        """Delta history of a table, each version annotated with the replicator step it applied."""
        import pandas as pd

        entry = self._entry(name)
        from delta.tables import DeltaTable

        hist = DeltaTable.forPath(self.spark, entry.path).history().select(
            "version", "timestamp", "operation", "operationMetrics", "userMetadata").toPandas()
        # A step's record holds the version the table reached at its end; the versions it made on the
        # way (CREATE TABLE, a DDL's statements, a MERGE before a DDL) belong to it too.
        reached: list[tuple[int, dict[str, Any]]] = []
        for w in self._records(entry.uid):
            t = w.get("tables", {}).get(entry.uid)
            if t is not None:
                reached.append((int(t["version"]), w))
        reached.sort(key=lambda vw: vw[0])
        versions = [v for v, _ in reached]
        steps, kinds, applied, ddl = [], [], [], []
        for _, row in hist.iterrows():
            meta = json.loads(row["userMetadata"]).get("replicator", {}) if row["userMetadata"] else {}
            # the first step whose reached version is at or past this one (binary search)
            at = bisect.bisect_left(versions, int(row["version"]))
            w = reached[at][1] if at < len(reached) else {}
            steps.append(meta.get("step") or w.get("step"))
            kinds.append(meta.get("kind") or w.get("kind"))
            applied.append(meta.get("applied_ts") or w.get("applied_ts"))
            ddl.append("; ".join(d["query"] for d in _ddls(w)) or None)
        hist["step"], hist["kind"], hist["applied_ts"], hist["ddl"] = steps, kinds, applied, ddl
        return pd.DataFrame(hist)

    def changes(self, name: str, from_watermark: int, to_watermark: int) -> DataFrame:
        """Delta change data feed of a table between two applied watermarks (exclusive, inclusive]."""
        entry = self._entry(name)
        start = self.version_at(entry.uid, from_watermark)
        end = self.version_at(entry.uid, to_watermark)
        if end is None:
            raise KeyError(f"{name} did not exist at watermark {to_watermark}")
        starting = 0 if start is None else start + 1
        if starting > end:
            return self.spark.read.format("delta").load(entry.path).limit(0)
        return (self.spark.read.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", starting).option("endingVersion", end).load(entry.path))


def _ddls(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The DDLs of a step log record: `ddls`, or the one `ddl` of records written before steps held several."""
    return list(record.get("ddls") or ([record["ddl"]] if record.get("ddl") else []))


def open_warehouse(path: str | os.PathLike[str] | None = None, spark: SparkSession | None = None) -> Explorer:
    """Open a warehouse for exploration (default: $REPLICATOR_WAREHOUSE or ./warehouse). When its
    tables are registered in a catalog, a session started here uses it: `ex.spark.table("shop.orders")`."""
    wh = Warehouse(path if path is not None else default_warehouse())
    view = None if wh.state_path.exists() else ShardedView.read(wh)
    if view is None and not wh.state_path.exists():
        raise FileNotFoundError(f"{wh.root} is not a replicator warehouse (run `make run` first)")
    from replicator.runtime.spark import get_spark, use_catalog, use_storage

    if spark is None:
        recorded = view.catalog() if view is not None else wh.load_state().catalog
        if recorded:  # takes effect unless this process's session has started already
            use_catalog(CatalogConfig.from_json(recorded).uri)
        spark = get_spark("replicator-explore")
    if is_url(wh.root):
        use_storage(spark)  # a session started elsewhere (a notebook's) reaches the same store
    return Explorer(wh, spark, sharded=view is not None)
