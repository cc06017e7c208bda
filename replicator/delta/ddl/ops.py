"""The Delta helpers a DDL handler runs through (`DdlOps`): statements retried past concurrent
commits, the live schema, table features and properties, commit metadata. The handlers (tables.py,
alter.py) take it; `DdlApplier` (applier.py) is it plus the dispatch over the rules."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from replicator.delta import features
from replicator.delta.ddl.widening import norm_type
from replicator.delta.typemap import quote_string
from replicator.delta.writer import TableWriter, delta_ref
from replicator.events import DdlEvent
from replicator.faults import fault_point
from replicator.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql.types import StructField


class DdlOps:
    """What a DDL handler does to Delta, and the applier's state it reads (`step`, `created`)."""

    def __init__(self, applier: TableWriter, warehouse: Warehouse) -> None:
        self.delta = applier
        self.warehouse = warehouse
        self.step = 0  # the step log number of the DDL being applied (feature upgrades' userMetadata)
        self.created: set[str] = set()  # table paths created ahead of their CREATE TABLE (`planned_table`)

    def sql(self, statement: str) -> None:
        """One Delta statement of a DDL, re-run when a concurrent writer's commit rejected it (it did
        not commit, so re-running is safe)."""
        self.delta.sql_retrying(statement, statement[:120])
        fault_point("mid_ddl")

    def fields(self, path: str) -> dict[str, StructField]:
        """The live Delta schema by column name (read before every change: check-before-alter)."""
        schema = self.delta.spark.read.format("delta").load(path).schema
        return {f.name: f for f in schema.fields}

    def has_feature(self, path: str, feature: str) -> bool:
        """Whether the table's protocol lists a (writer) table feature, e.g. allowColumnDefaults."""
        return bool(self.delta.snapshot(path).protocol().writerFeatureNames().contains(feature))

    def description(self, path: str) -> str | None:
        """The table comment (Delta metadata description)."""
        desc = self.delta.snapshot(path).metadata().description()
        return None if desc is None else str(desc)

    def ensure_feature(self, path: str, feature: str) -> None:
        """Enable a Delta table feature once (setting it again would add an empty commit)."""
        if not self.has_feature(path, feature):
            self.sql(f"ALTER TABLE {delta_ref(path)} SET TBLPROPERTIES ({quote_string('delta.feature.' + feature)} "
                     "= 'supported')")

    def table_property(self, path: str, key: str) -> str | None:
        """A table property of the latest snapshot (None when unset)."""
        opt = self.delta.snapshot(path).metadata().configuration().get(key)
        return str(opt.get()) if opt.isDefined() else None

    def enable_feature(self, path: str, feature: str, ddl: DdlEvent, why: str | None = None) -> bool:
        """Enable a reader feature (features.FEATURE_PROPERTY) once; True when this call did.

        Check-before-alter: a re-run after a kill finds the property set and changes nothing. The
        commit carries the step's userMetadata (kind "feature") like a MERGE's, so the table's
        history says which step upgraded it; the DDL's step log record names it too.
        """
        key, value = features.FEATURE_PROPERTY[feature]
        current = self.table_property(path, key)
        if features.enabled({} if current is None else {key: current}, feature):
            return False
        meta: dict[str, Any] = {"replicator": {"step": self.step, "applied_ts": ddl.commit_ts, "kind": "feature",
                                               "feature": feature}}
        if why:
            meta["replicator"]["why"] = why
        with self.user_metadata(meta):
            self.sql(f"ALTER TABLE {delta_ref(path)} SET TBLPROPERTIES ({quote_string(key)} = {quote_string(value)})")
        return True

    @contextlib.contextmanager
    def user_metadata(self, meta: dict[str, Any]) -> Iterator[None]:
        """Session conf: the commits made inside carry `meta` as their userMetadata."""
        with self.delta.user_metadata(json.dumps(meta, sort_keys=True)):
            yield

    def ensure_types(self, path: str, types: Iterable[str]) -> None:
        """TIMESTAMP_NTZ columns added after CREATE need the `timestampNtz` feature first."""
        if any(norm_type(t) == "TIMESTAMP_NTZ" for t in types):
            self.ensure_feature(path, "timestampNtz")
