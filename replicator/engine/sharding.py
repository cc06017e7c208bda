"""`--shard I/N`: the events of tables another shard owns are skipped and counted (`other_shard`),
as the table filters' are (engine/filtering.py); ownership is replicator/shards.py's.

Every shard reads every partition: each RENAME TABLE(S) updates the identities (and the shard's
state.json keeps them), whoever owns the table. A row's owner is its table's identity at the row's
commit ts, which is certain only once every DDL before that ts has been read:
- `partition` (a protocol that broadcasts DDLs, one topic): TiCDC writes a DDL to every partition
  before any later row, so a row's own partition has shown every earlier DDL: decided when decoded;
- `partition0` (canal-json, one topic: DDLs on partition 0 only): decided when decoded for rows of
  partition 0 and rows at or below partition 0's last resolved ts; the others at their step;
- `step` (several topics, a storage sink, archives): decided at the step, where every DDL up to
  the step's watermark has been read.
Where the wire names a row's table before its columns (the Open Protocol's key), a row decided
when decoded is never parsed (`skip_row`, through `DecodeOptions.skip_row`).
DDLs are decided when decoded (they come in order on the partitions that carry them) except in
`step` mode. Database-level DDL (CREATE / DROP DATABASE) is every shard's: each applies it to its
own tables (its state.json's catalog), so a DROP DATABASE drops each table once, by its owner.

Pure: no Spark or Kafka.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Literal

from replicator.engine.ddlseen import SeenDdls, cut_rename, rename_pairs
from replicator.engine.filtering import FilterCounts
from replicator.engine.rows import Rows, on_driver
from replicator.engine.window import Step
from replicator.events import TP, DdlEvent, Event, Position, Resolved, RowChange
from replicator.shards import Identities, Rename, ShardSpec
from replicator.tables import TableName

log = logging.getLogger("replicator")

Mode = Literal["partition", "partition0", "step"]
OTHER_SHARD = "other_shard"


class ShardFilter:
    """Drops other shards' events: at decode where certain (`apply`), else at the step (`step`)."""

    def __init__(self, shard: ShardSpec, identities: Identities, mode: Mode,
                 counts: FilterCounts | None = None) -> None:
        self.shard = shard
        self.identities = identities
        self.mode = mode
        self.counts = counts or FilterCounts()
        self._p0_resolved = 0  # partition0: the last resolved ts read on partition 0 (this run)
        self._seen = SeenDdls()  # DDLs counted once (broadcast copies)
        self._owned: dict[TableName, bool] = {}  # names no rename touches -> owned (cleared by a rename)

    def owns(self, schema: str, table: str, ts: int) -> bool:
        """Whether this shard owns the table named schema.table at commit ts `ts`."""
        key = (schema, table)
        owned = self._owned.get(key)
        if owned is not None:
            return owned
        if self.identities.renamed(schema, table):
            return self.shard.owns(self.identities.identity(schema, table, ts))
        owned = self.shard.owns(key)
        if len(self._owned) < 100_000:
            self._owned[key] = owned
        return owned

    # -- at decode ------------------------------------------------------------------------------
    def apply(self, events: Sequence[Event], partition: TP) -> list[Event]:
        """A decoded message's events minus those certainly another shard's; every rename read."""
        out: list[Event] = []
        for ev in events:
            if isinstance(ev, RowChange):
                if self._certain(partition, ev.commit_ts) and not self.owns(ev.schema, ev.table, ev.commit_ts):
                    self.counts.rows[OTHER_SHARD] += 1
                    continue
            elif isinstance(ev, DdlEvent):
                pairs = rename_pairs(ev)
                if pairs and self.identities.rename(ev.commit_ts, pairs):
                    self._owned.clear()
                if self.mode != "step":
                    kept = self._ddl(ev, pairs)
                    if kept is None:
                        continue
                    ev = kept
            elif isinstance(ev, Resolved) and partition.partition == 0:
                self._p0_resolved = max(self._p0_resolved, ev.ts)
            out.append(ev)
        return out

    def skip_row(self, schema: str, table: str, ts: int, position: Position | None) -> bool:
        """For the codec (`DecodeOptions.skip_row`): True, counted, for a row certainly another
        shard's, which the codec then leaves undecoded where it can."""
        if position is None or not self._certain(TP(position.topic, position.partition), ts):
            return False
        if self.owns(schema, table, ts):
            return False
        self.counts.rows[OTHER_SHARD] += 1
        return True

    def _certain(self, partition: TP, ts: int) -> bool:
        if self.mode == "partition":
            return True
        if self.mode == "partition0":
            return partition.partition == 0 or ts <= self._p0_resolved
        return False

    # -- at the step ----------------------------------------------------------------------------
    def step(self, step: Step) -> Step:
        """The step minus the rest of other shards' rows (and in `step` mode their DDLs)."""
        rows: dict[TableName, Rows] = {}
        changed = False
        for name, table_rows in step.rows.items():
            kept = self._rows(name, table_rows)
            changed = changed or kept is not table_rows
            if kept:
                rows[name] = kept
        ddls = step.ddls
        if self.mode == "step":
            ddls = tuple(d for d in (self._ddl(ev, rename_pairs(ev)) for ev in step.ddls) if d is not None)
        if not changed and ddls == step.ddls:
            return step
        return dataclasses.replace(step, rows=rows, ddls=ddls)

    def _rows(self, name: TableName, table_rows: Rows) -> Rows:
        rows = on_driver(table_rows)
        if rows is None:
            return table_rows  # rows on the executors: --shard needs --reader driver
        if not self.identities.renamed(*name):
            if rows and not self.owns(*name, rows[0].commit_ts):
                self.counts.rows[OTHER_SHARD] += len(rows)
                return []
            return rows
        kept = [r for r in rows if self.owns(r.schema, r.table, r.commit_ts)]
        if len(kept) == len(rows):
            return rows
        self.counts.rows[OTHER_SHARD] += len(rows) - len(kept)
        return kept

    # -- DDLs -----------------------------------------------------------------------------------
    def _ddl(self, ddl: DdlEvent, pairs: list[Rename] | None) -> DdlEvent | None:
        first = self._seen.first(ddl)
        if pairs:
            idents = self.identities.pair_identities(ddl.commit_ts, pairs)
            kept = [pair for pair, ident in zip(pairs, idents, strict=True) if self.shard.owns(ident)]
            if len(kept) == len(pairs):
                return ddl
            if first:
                self.counts.ddl[OTHER_SHARD] += 1
            return cut_rename(ddl, kept) if kept else None
        if not ddl.table:
            return ddl  # database-level: every shard's, applied to its own tables
        if self.owns(ddl.schema, ddl.table, ddl.commit_ts):
            return ddl
        if first:
            self.counts.ddl[OTHER_SHARD] += 1
        return None
