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

import dataclasses
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from replicator.delta.ddlparse.statements import Name, parse_renames
from replicator.errors import DdlError
from replicator.events import DdlCode, DdlEvent, Event, RowChange
from replicator.filters import TableFilter

log = logging.getLogger("replicator")

SEEN_DDLS = 10_000
"""DDLs remembered to count each once (broadcast copies arrive close together)."""


@dataclass
class FilterCounts:
    """Skipped events by reason: `rows` and `ddl` (excluded, not_included; DDL also
    renamed_into_filter, renamed_out_of_filter; with --shard, other_shard: engine/sharding.py)."""

    rows: Counter[str] = field(default_factory=Counter)
    ddl: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"rows": dict(sorted(self.rows.items())), "ddl": dict(sorted(self.ddl.items()))}


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class EventFilter:
    """Drops the events of filtered tables from a decoded message's events."""

    def __init__(self, tables: TableFilter, counts: FilterCounts | None = None) -> None:
        self.tables = tables
        self.counts = counts or FilterCounts()
        # A DDL comes once per partition (broadcast) and again on replays: counted and logged once.
        self._seen: dict[tuple[int, str], None] = {}

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
        key = (ddl.commit_ts, ddl.query)
        first = key not in self._seen
        if first:
            self._seen[key] = None
            if len(self._seen) > SEEN_DDLS:
                del self._seen[next(iter(self._seen))]
        counts = self.counts.ddl if first else Counter()
        pairs = self._renames(ddl)
        if pairs is not None:
            return self._rename(ddl, pairs, counts, log_it=first)
        reason = (self.tables.reason(ddl.schema, ddl.table) if ddl.table
                  else self.tables.schema_reason(ddl.schema))
        if reason is not None:
            counts[reason] += 1
            return None
        return ddl

    @staticmethod
    def _renames(ddl: DdlEvent) -> list[tuple[Name, Name]] | None:
        """A "Rename Table" DDL's pairs, as its applier reads them; None for any other DDL."""
        if ddl.ddl_type != DdlCode.RENAME_TABLE:
            return None
        try:
            return parse_renames(ddl.query)
        except DdlError:
            return None  # not a statement the applier reads either: it reports it

    def _rename(self, ddl: DdlEvent, pairs: list[tuple[Name, Name]], counts: Counter[str], *,
                log_it: bool) -> DdlEvent | None:
        kept: list[tuple[tuple[str, str], tuple[str, str]]] = []
        for (old_schema, old_table), (new_schema, new_table) in pairs:
            old = (old_schema or ddl.schema, old_table)
            new = (new_schema or old_schema or ddl.schema, new_table)
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
        if len(kept) == len(pairs):
            return ddl
        query = "RENAME TABLE " + ", ".join(
            f"{_quote(o[0])}.{_quote(o[1])} TO {_quote(n[0])}.{_quote(n[1])}" for o, n in kept)
        return dataclasses.replace(ddl, query=query, ddl_type=int(DdlCode.RENAME_TABLE))
