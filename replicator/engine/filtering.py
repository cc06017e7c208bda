"""Events of tables outside `--include` / `--exclude` are skipped right after decoding, counted
per reason, never dead-lettered (replicator/filters.py has the rule syntax).

RENAME TABLE is the one DDL that crosses the filter's boundary:
- both names replicated: applied as it is; several pairs with some outside: the statement is cut
  to the pairs inside (each pair's names quoted);
- out of the filter (old name in, new out): skipped; the Delta table stays as it was under its old
  name, and the new name's rows are skipped from then on;
- into the filter (old name out, new in): skipped; the table is created from the first row
  events of its new name (their columns and types), so it holds only the rows changed from then
  on: docs/filters.md says what to backfill.

Pure: no Spark or Kafka.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from replicator.engine.ddlseen import SeenDdls, cut_rename, rename_pairs
from replicator.events import DdlEvent, Event, RowChange
from replicator.filters import TableFilter
from replicator.shards import Rename

log = logging.getLogger("replicator")


@dataclass
class FilterCounts:
    """Skipped events by reason: `rows` and `ddl` (excluded, not_included; DDL also
    renamed_into_filter, renamed_out_of_filter; with --shard, other_shard: engine/sharding.py)."""

    rows: Counter[str] = field(default_factory=Counter)
    ddl: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"rows": dict(sorted(self.rows.items())), "ddl": dict(sorted(self.ddl.items()))}


class EventFilter:
    """Drops the events of filtered tables from a decoded message's events."""

    def __init__(self, tables: TableFilter, counts: FilterCounts | None = None) -> None:
        self.tables = tables
        self.counts = counts or FilterCounts()
        self._seen = SeenDdls()  # a DDL is counted and logged once (broadcast copies, replays)

    def apply(self, events: Sequence[Event]) -> list[Event]:
        out: list[Event] = []
        for ev in events:
            if isinstance(ev, RowChange):
                reason = self.tables.reason(ev.schema, ev.table)
                if reason is not None:
                    self.counts.rows[reason] += 1
                    continue
            elif isinstance(ev, DdlEvent):
                kept = self._ddl(ev)
                if kept is None:
                    continue
                ev = kept
            out.append(ev)
        return out

    def _ddl(self, ddl: DdlEvent) -> DdlEvent | None:
        first = self._seen.first(ddl)
        counts = self.counts.ddl if first else Counter()
        pairs = rename_pairs(ddl)
        if pairs is not None:
            return self._rename(ddl, pairs, counts, log_it=first)
        reason = (self.tables.reason(ddl.schema, ddl.table) if ddl.table
                  else self.tables.schema_reason(ddl.schema))
        if reason is not None:
            counts[reason] += 1
            return None
        return ddl

    def _rename(self, ddl: DdlEvent, pairs: list[Rename], counts: Counter[str], *, log_it: bool) -> DdlEvent | None:
        kept: list[Rename] = []
        for old, new in pairs:
            old_reason, new_reason = self.tables.reason(*old), self.tables.reason(*new)
            level = logging.WARNING if log_it else logging.DEBUG
            if old_reason is None and new_reason is None:
                kept.append((old, new))
            elif old_reason is None:
                counts["renamed_out_of_filter"] += 1
                log.log(level, "RENAME %s.%s -> %s.%s (commit ts %d) moves the table out of the table filter: "
                        "skipped; the Delta table stays as it was and the new name is not replicated",
                        *old, *new, ddl.commit_ts, extra={"table": f"{old[0]}.{old[1]}"})
            elif new_reason is None:
                counts["renamed_into_filter"] += 1
                log.log(level, "RENAME %s.%s -> %s.%s (commit ts %d) moves the table into the table filter: the "
                        "table is created from its next row events, which hold only the rows changed from now on; "
                        "backfill the rest (docs/filters.md)", *old, *new, ddl.commit_ts,
                        extra={"table": f"{new[0]}.{new[1]}"})
            else:
                counts[old_reason] += 1
        if not kept:
            return None
        return ddl if len(kept) == len(pairs) else cut_rename(ddl, kept)
