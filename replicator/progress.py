"""Replication progress, owned in one place: the applied watermark, each (topic, partition)'s
restart cursor, the topics gone quiet, the storage-sink table versions read and applied to their
end, and the DDL ledger.

The windower updates it as steps are applied (`Windower.commit`, `Windower.checkpoint`); the
warehouse's state file persists it (`replicator.warehouse.State.progress`) in flat fields:
``applied_ts``, ``positions`` (topic -> partition -> cursor), ``quiet_topics`` (only when some
are), ``ended_versions`` (only when some are) and ``ddl_ledger``. A state written before several
topics were followed kept one topic's cursors as ``partitions``; `from_wire` reads them as that
topic's. Pure: no Spark, no Kafka.

It lives at the bottom of the package, beside the events, because both the engine (which moves it)
and the warehouse (which persists it) use it, and the warehouse sits below the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from replicator.events import TP, TopicPartition

__all__ = ["TP", "Cursor", "Progress", "TopicPartition"]

@dataclass(frozen=True, slots=True)
class Cursor:
    """Restart point of one partition: next offset to read and the watermark before it."""

    offset: int
    watermark: int


@dataclass
class Progress:
    """What is durably applied, and where each partition restarts so that re-reading reproduces it.

    `cursors` keeps insertion order (the order partitions became known), which is the order the
    state file lists them in. `quiet_topics`: topics whose tables were all dropped (or renamed
    away), with the commit ts of that DDL: TiCDC sends them no more watermarks, so they do not
    hold the window back until rows or DDLs arrive on them again (engine/window.py).
    `ended_versions`: a storage-sink changefeed's tables ("schema/table"), each with the newest
    table version up to which every version's streams were read and applied to their end and
    forgotten (their cursors gone; sources/storage_sink.py): a restart does not list them again.
    """

    applied_ts: int = 0
    cursors: dict[TP, Cursor] = field(default_factory=dict)
    ddl_ledger: set[tuple[int, str]] = field(default_factory=set)
    quiet_topics: dict[str, int] = field(default_factory=dict)
    ended_versions: dict[str, int] = field(default_factory=dict)

    # -- the state file's shape ------------------------------------------------------------------
    def to_wire(self) -> dict[str, Any]:
        """The state.json fields: ``applied_ts``, ``positions`` {"<topic>": {"<p>": {offset, watermark}}},
        ``quiet_topics`` {"<topic>": ts} (only when some are), ``ddl_ledger``."""
        positions: dict[str, dict[str, dict[str, int]]] = {}
        for tp, c in self.cursors.items():
            positions.setdefault(tp.topic, {})[str(tp.partition)] = {"offset": c.offset, "watermark": c.watermark}
        out: dict[str, Any] = {"applied_ts": self.applied_ts, "positions": positions}
        if self.quiet_topics:
            out["quiet_topics"] = dict(sorted(self.quiet_topics.items()))
        if self.ended_versions:
            out["ended_versions"] = dict(sorted(self.ended_versions.items()))
        out["ddl_ledger"] = [[ts, q] for ts, q in sorted(self.ddl_ledger)]
        return out

    @classmethod
    def from_wire(cls, applied_ts: int, positions: Mapping[str, Mapping[str, Mapping[str, int]]],
                  ddl_ledger: Iterable[tuple[int, str] | list[Any]], *,
                  quiet_topics: Mapping[str, int] | None = None,
                  ended_versions: Mapping[str, int] | None = None) -> Progress:
        """Inverse of `to_wire` (values already type-checked by the state model)."""
        return cls(
            applied_ts=int(applied_ts),
            cursors={TP(t, int(p)): Cursor(int(c["offset"]), int(c["watermark"]))
                     for t, parts in positions.items() for p, c in parts.items()},
            ddl_ledger={(int(ts), str(q)) for ts, q in ddl_ledger},
            quiet_topics={str(t): int(ts) for t, ts in (quiet_topics or {}).items()},
            ended_versions={str(t): int(v) for t, v in (ended_versions or {}).items()},
        )

    # -- where a run starts ----------------------------------------------------------------------
    def starting_at(self, start: Mapping[TP, int] | Literal["earliest"] | None) -> Progress:
        """This progress with the restart cursors a run was told to use instead of the stored ones.

        "earliest" forgets every cursor (read each partition from its start); explicit offsets
        replace those partitions' cursors (watermark 0: nothing is known before them). Either way
        the ended storage-sink versions are listed and read again (a replay may need their rows).
        """
        if start is None:
            return self
        if start == "earliest":
            cursors: dict[TP, Cursor] = {}
        else:
            cursors = {p: Cursor(o, 0) for p, o in start.items()} | {
                p: c for p, c in self.cursors.items() if p not in start
            }
        # Quiet topics stay quiet: only rows or DDLs after their last table went away wake them.
        return Progress(self.applied_ts, cursors, set(self.ddl_ledger), dict(self.quiet_topics))

    def offsets(self) -> dict[TP, int]:
        """Restart offset per partition (what the consumer group is told)."""
        return {p: c.offset for p, c in self.cursors.items()}
