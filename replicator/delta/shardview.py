"""A sharded warehouse read as one (`--shard I/N`): every shard's tables as of one upstream commit
point, for `open_warehouse`, `replicator tables`, `status` and `check` (read-only, no Spark).

Each shard has its own applied watermark and step log (`_replicator/shards/I-of-N/`). A point W
is one the whole warehouse can be read at when every shard has applied it (W <= the smallest of
the shards' applied watermarks) and each shard's tables, read at the Delta versions its step log
says they had at W (the last step with applied_ts <= W, as unsharded), held exactly W: the shard's
next step after W starts above W. A sharded run's step record says where its changes start
(`lo`, the smallest commit ts it applied); a step that changed nothing holds every point it
spans. So W is consistent for a shard when it is one of its step watermarks, or lies in a stretch
where the shard applied nothing. The smallest applied watermark is always one when the shards
have caught up to the same resolved ts (runs with `--until-caught-up` on one stream end there);
sharded followers end their interval steps on a common grid of upstream time (engine/loop.py,
`ControlLoop.step_end`), so their step watermarks coincide while they keep up.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from replicator.storage.steplog import ROLLUP
from replicator.warehouse import State, TableEntry, Warehouse


def step_ts(record: dict[str, Any]) -> int:
    return int(record.get("applied_ts", record["hi"]))


def earliest_readable(records: list[dict[str, Any]]) -> int | None:
    """Once the step log was rolled (storage/steplog.py `roll`), the first watermark it still
    holds steps from: earlier ones are not offered (their Delta versions may have been vacuumed).
    None when nothing was rolled. `records` in watermark order."""
    if not records or records[0].get("kind") != ROLLUP:
        return None
    kept = [step_ts(r) for r in records if r.get("kind") != ROLLUP]
    return kept[0] if kept else step_ts(records[-1])


def readable_steps(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps whose watermarks can be read at (every step but a rollup)."""
    return [r for r in records if r.get("kind") != ROLLUP]


@dataclass
class Shard:
    """One shard's state, and its step log read once when first needed."""

    warehouse: Warehouse
    state: State
    _records: list[dict[str, Any]] | None = field(default=None, repr=False)

    @classmethod
    def read(cls, wh: Warehouse) -> Shard:
        return cls(wh, wh.load_state() if wh.state_path.exists() else State())

    @property
    def records(self) -> list[dict[str, Any]]:
        """The shard's step log in watermark order."""
        if self._records is None:
            self._records = sorted(self.warehouse.windows(), key=step_ts) if self.state.steps else []
        return self._records

    @property
    def label(self) -> str:
        return str(self.warehouse.shard) if self.warehouse.shard is not None else ""

    @property
    def applied_ts(self) -> int:
        return self.state.applied_ts

    def held(self, watermark: int) -> bool:
        """Whether this shard's tables at their versions of the last step <= W held exactly W."""
        if watermark > self.applied_ts:
            return False
        earliest = earliest_readable(self.records)
        if earliest is not None and watermark < earliest:
            return False  # rolled up (storage/steplog.py)
        ts = [step_ts(r) for r in self.records]
        i = bisect.bisect_left(ts, watermark)
        if i == len(ts) or ts[i] == watermark:
            return True  # a step ended at W, or nothing was applied after the last step (<= W)
        nxt = self.records[i]
        if not nxt.get("tables") and not nxt.get("ddls") and not nxt.get("ddl"):
            return True  # the next step changed nothing
        lo = nxt.get("lo")
        if lo is None:  # a record without `lo`: its changes may start right after the step before it
            lo = ts[i - 1] + 1 if i else 0
        return watermark < int(lo)

    def version_at(self, uid: str, watermark: int) -> int | None:
        version = None
        for r in self.records:
            if step_ts(r) > watermark:
                break
            t = r.get("tables", {}).get(uid)
            if t is not None:
                version = int(t["version"])
        return version


@dataclass
class ShardedView:
    """Every shard of a sharded warehouse, read once (`read`)."""

    root: str
    shards: list[Shard]

    @classmethod
    def read(cls, wh: Warehouse) -> ShardedView | None:
        """The shards of `wh`, or None when it is not sharded."""
        parts = wh.shard_warehouses()
        if not parts:
            return None
        return cls(wh.root, [Shard.read(p) for p in parts])

    @property
    def started(self) -> bool:
        """Whether any shard has written its progress."""
        return any(s.warehouse.state_path.exists() for s in self.shards)

    @property
    def applied_ts(self) -> int:
        """The consistent view's watermark bound: the smallest of the shards' applied watermarks
        (0 while a shard has applied nothing)."""
        return min(s.applied_ts for s in self.shards)

    def watermarks(self) -> list[int]:
        """The points every shard's tables can be read at together (ascending)."""
        bound = self.applied_ts
        candidates = {step_ts(r) for s in self.shards for r in readable_steps(s.records) if step_ts(r) <= bound}
        if bound:
            candidates.add(bound)
        return sorted(w for w in candidates if all(s.held(w) for s in self.shards))

    def latest(self) -> int | None:
        points = self.watermarks()
        return points[-1] if points else None

    def check_point(self, watermark: int) -> None:
        """ValueError unless every shard's tables can be read at `watermark` together."""
        behind = [s.label for s in self.shards if s.applied_ts < watermark]
        if behind:
            raise ValueError(f"watermark {watermark} is not applied by shard(s) {', '.join(behind)} yet "
                             f"(the shards have all applied up to {self.applied_ts})")
        inside = [s.label for s in self.shards if not s.held(watermark)]
        if inside:
            points = self.watermarks()
            below = [w for w in points if w <= watermark]
            near = f"; the nearest consistent point below is {below[-1]}" if below else ""
            raise ValueError(f"watermark {watermark} falls inside a step of shard(s) {', '.join(inside)}: their "
                             f"tables were never at exactly that point (see watermarks(){near})")

    def tables(self) -> list[tuple[Shard, TableEntry]]:
        """Every shard's live tables, sorted by schema and table."""
        out = [(s, e) for s in self.shards for e in s.state.live_tables()]
        return sorted(out, key=lambda se: (se[1].schema_name, se[1].table))

    def all_tables(self) -> list[tuple[Shard, TableEntry]]:
        """Every table any shard has had (dropped ones too)."""
        return [(s, e) for s in self.shards for e in s.state.tables.values()]

    def catalog(self) -> dict[str, str] | None:
        """The catalog the shards record (each registers its own tables there)."""
        return next((s.state.catalog for s in self.shards if s.state.catalog), None)

    def shard_of(self, uid: str) -> Shard | None:
        return next((s for s in self.shards if uid in s.state.tables), None)


def table_versions_at(view: ShardedView, watermark: int) -> list[tuple[TableEntry, int]]:
    """(table, Delta version) of every table live at `watermark`, across shards (ValueError when it
    is not a consistent point)."""
    view.check_point(watermark)
    out: list[tuple[TableEntry, int]] = []
    for shard, e in view.all_tables():
        if e.created_ts > watermark or (e.dropped_ts is not None and e.dropped_ts <= watermark):
            continue
        version = shard.version_at(e.uid, watermark)
        if version is not None:
            out.append((e, version))
    return out

