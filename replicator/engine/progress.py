"""Replication progress, owned in one place: the applied watermark, each partition's restart
cursor and the DDL ledger.

The windower updates it as steps are applied (`Windower.commit`, `Windower.checkpoint`); the
warehouse's state file persists it (`replicator.delta.warehouse.State.progress`) in the flat
``applied_ts`` / ``partitions`` / ``ddl_ledger`` shape that state.json has always had. Pure: no
Spark, no Kafka.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True, slots=True)
class Cursor:
    """Restart point of one partition: next offset to read and the watermark before it."""

    offset: int
    watermark: int


@dataclass
class Progress:
    """What is durably applied, and where each partition restarts so that re-reading reproduces it.

    `cursors` keeps insertion order (the order partitions became known), which is the order the
    state file lists them in.
    """

    applied_ts: int = 0
    cursors: dict[int, Cursor] = field(default_factory=dict)
    ddl_ledger: set[tuple[int, str]] = field(default_factory=set)

    # -- the state file's shape ------------------------------------------------------------------
    def to_wire(self) -> dict[str, Any]:
        """The state.json fields: ``applied_ts``, ``partitions`` {"<p>": {offset, watermark}}, ``ddl_ledger``."""
        return {
            "applied_ts": self.applied_ts,
            "partitions": {str(p): {"offset": c.offset, "watermark": c.watermark} for p, c in self.cursors.items()},
            "ddl_ledger": [[ts, q] for ts, q in sorted(self.ddl_ledger)],
        }

    @classmethod
    def from_wire(cls, applied_ts: int, partitions: Mapping[str, Mapping[str, int]],
                  ddl_ledger: Iterable[tuple[int, str] | list[Any]]) -> Progress:
        """Inverse of `to_wire` (values already type-checked by the state model)."""
        return cls(
            applied_ts=int(applied_ts),
            cursors={int(p): Cursor(int(c["offset"]), int(c["watermark"])) for p, c in partitions.items()},
            ddl_ledger={(int(ts), str(q)) for ts, q in ddl_ledger},
        )

    # -- where a run starts ----------------------------------------------------------------------
    def starting_at(self, start: Mapping[int, int] | Literal["earliest"] | None) -> Progress:
        """This progress with the restart cursors a run was told to use instead of the stored ones.

        "earliest" forgets every cursor (read each partition from its start); explicit offsets
        replace those partitions' cursors (watermark 0: nothing is known before them).
        """
        if start is None:
            return self
        if start == "earliest":
            cursors: dict[int, Cursor] = {}
        else:
            cursors = {p: Cursor(o, 0) for p, o in start.items()} | {
                p: c for p, c in self.cursors.items() if p not in start
            }
        return Progress(self.applied_ts, cursors, set(self.ddl_ledger))

    def offsets(self) -> dict[int, int]:
        """Restart offset per partition (what the consumer group is told)."""
        return {p: c.offset for p, c in self.cursors.items()}
