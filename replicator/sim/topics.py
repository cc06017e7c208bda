"""A simulated changefeed dispatched one topic per table, as TiCDC lays it out with
`dispatchers = [{matcher = ["*.*"], topic = "{schema}_{table}"}]` (notes: TiCDC section 3).

The same upstream as `Simulation` (one seed, one expected state), routed to topics:
- a table's rows and its table-level DDL go to the table's topic (a RENAME to the *old* name's
  topic), schema-level DDL (CREATE / DROP DATABASE) to the default topic; each DDL to every
  partition of its topic, canal-json's to partition 0 only (the simulation already drops the
  other copies);
- a resolved event is broadcast to that partition of every *active* topic (the topics of the
  tables live at that moment) and of the default topic: a dropped table's topic goes quiet, and
  a table created (or renamed to) mid-stream gets its topic then.
Every topic has the simulation's partition count; partition p of a topic carries what the
simulation sends to its partition p, so each partition's resolved events keep TiCDC's promise.
Pure (no Kafka): `produce_topics` in sinks.py writes it to a broker.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from replicator.codec import Message
from replicator.errors import DdlError
from replicator.events import DdlCode, DdlEvent, Event, Resolved, RowChange
from replicator.mysql.statements import parse_renames
from replicator.sim.stream import SimMessage, Simulation


def topic_for(prefix: str, schema: str, table: str) -> str:
    """TiCDC's `{schema}_{table}` topic expression: characters outside [A-Za-z0-9._-] become `_`."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", f"{prefix}{schema}_{table}")


class TopicMessage(NamedTuple):
    topic: str
    message: SimMessage


class TopicDispatch:
    """`Simulation` events and records, routed one topic per table plus a default topic."""

    def __init__(self, sim: Simulation, *, prefix: str = "", default_topic: str | None = None) -> None:
        self.sim = sim
        self.prefix = prefix
        self.default_topic = default_topic or f"{prefix}default"
        self.active: dict[str, None] = {}  # topics of live tables, in the order they became active
        self.messages: dict[tuple[str, int], int] = {}  # records per (topic, partition)

    @property
    def partitions(self) -> int:
        return self.sim.config.partitions

    def table_topic(self, schema: str, table: str) -> str:
        return topic_for(self.prefix, schema, table)

    def _ddl_topic(self, ddl: DdlEvent) -> str:
        if ddl.ddl_type in (DdlCode.CREATE_SCHEMA, DdlCode.DROP_SCHEMA) or not ddl.table:
            return self.default_topic
        if ddl.ddl_type == DdlCode.RENAME_TABLE:
            try:
                (old, _new), *_ = parse_renames(ddl.query)
            except (DdlError, ValueError):
                return self.table_topic(ddl.schema, ddl.table)
            return self.table_topic(old[0] or ddl.schema, old[1])
        return self.table_topic(ddl.schema, ddl.table)

    def _track(self, ddl: DdlEvent) -> None:
        """Which topics receive watermarks from now on (TiCDC's active topics)."""
        if ddl.ddl_type in (DdlCode.CREATE_TABLE, DdlCode.RECOVER_TABLE):
            self.active[self.table_topic(ddl.schema, ddl.table)] = None
        elif ddl.ddl_type == DdlCode.DROP_TABLE:
            self.active.pop(self.table_topic(ddl.schema, ddl.table), None)
        elif ddl.ddl_type == DdlCode.RENAME_TABLE:
            self.active.pop(self._ddl_topic(ddl), None)
            self.active[self.table_topic(ddl.schema, ddl.table)] = None
        elif ddl.ddl_type == DdlCode.DROP_SCHEMA:
            gone = [t for t in self.active if t.startswith(topic_for(self.prefix, ddl.schema, ""))]
            for t in gone:
                self.active.pop(t, None)

    def events(self) -> Iterator[tuple[str, int, Event]]:
        """(topic, partition, event) in emission order; per (topic, partition) the Kafka order."""
        seen: set[tuple[int, str]] = set()
        for p, ev in self.sim.events():
            if isinstance(ev, RowChange):
                yield self.table_topic(ev.schema, ev.table), p, ev
            elif isinstance(ev, DdlEvent):
                topic = self._ddl_topic(ev)
                if (ev.commit_ts, ev.query) not in seen:  # the first copy changes what is active
                    seen.add((ev.commit_ts, ev.query))
                    self._track(ev)
                yield topic, p, ev
            else:
                for topic in [*self.active, self.default_topic]:
                    yield topic, p, ev

    def records(self) -> Iterator[TopicMessage]:
        """Encoded Kafka records, rows batched per (topic, partition) as `Simulation.records` does;
        every row pending on a partition is written before that partition's next resolved event."""
        encode_rows, encode_event = self.sim._encoders()
        pending: dict[tuple[str, int], list[RowChange]] = {}
        batch = self.sim.config.max_batch_size
        for topic, p, ev in self.events():
            where = (topic, p)
            if isinstance(ev, RowChange):
                rows = pending.setdefault(where, [])
                rows.append(ev)
                if len(rows) >= batch:
                    yield from self._emit(where, encode_rows(rows))
                    rows.clear()
                continue
            # before a resolved event the partition's rows of every topic, before a DDL its topic's
            yield from self._flush(pending, p, None if isinstance(ev, Resolved) else topic, encode_rows)
            yield from self._emit(where, [encode_event(ev)])
        for p in range(self.partitions):
            yield from self._flush(pending, p, None, encode_rows)

    def _flush(self, pending: dict[tuple[str, int], list[RowChange]], partition: int, topic: str | None,
               encode_rows: Callable[[list[RowChange]], list[Message]]) -> Iterator[TopicMessage]:
        """Write the pending rows of `partition` (of `topic` only, or of every topic)."""
        for where, rows in pending.items():
            if rows and where[1] == partition and (topic is None or where[0] == topic):
                yield from self._emit(where, encode_rows(rows))
                rows.clear()

    def _emit(self, where: tuple[str, int], encoded: list[Message]) -> Iterator[TopicMessage]:
        topic, p = where
        for key, value in encoded:
            self.messages[where] = self.messages.get(where, 0) + 1
            yield TopicMessage(topic, SimMessage(p, key, value, self.sim._ms))

    def topics(self) -> list[str]:
        """Every topic written so far (after `records()`: all of them)."""
        return sorted({t for t, _ in self.messages})
