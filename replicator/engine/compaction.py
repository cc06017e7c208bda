"""A follower compacts its own tables: between steps, one table at a time, within a share of the
run's time (issue 51; what `replicator maintain` does on demand, delta/maintenance.py).

Each step's record names the tables it wrote. A table is looked at once it has had
`min_small_files` writes since it was last looked at (a small step writes one file per table,
delta/edge.py `one_file`), by reading its live files' sizes from its log (no Spark job); it is
compacted, one OPTIMIZE commit whose files are all `dataChange=false`, when at least
`min_small_files` of them are small. So a table's small files stay below about twice the
threshold, whatever the number of steps.

The table with the most writes since it was last looked at goes first, and one starts only while
the time spent compacting stays within SHARE of the run's time so far: a compaction delays the
next step by its own time, a tenth of the follower's time at most on average. A kill in the middle
leaves the OPTIMIZE committed or not; nothing is lost (its unreferenced files go at a VACUUM).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from replicator.delta.maintenance import Maintainer, MaintainOptions, live_file_sizes
from replicator.errors import LeaseLostError
from replicator.metrics import Metrics

log = logging.getLogger("replicator")

SHARE = 0.1  # of the run's time, at most, spent compacting


@dataclass
class _Table:
    name: str
    writes: int = 0  # since it was last looked at


class Compactor:
    """Between a follower's steps: at most one table compacted (see module doc)."""

    def __init__(self, maintainer: Callable[[], Maintainer], options: MaintainOptions, *,
                 metrics: Metrics | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._maintainer = maintainer  # built on first use: the Spark side may not exist yet
        self.options = options
        self.metrics = metrics or Metrics()
        self._clock = clock
        self._started = clock()
        self._tables: dict[str, _Table] = {}  # by path
        self.seconds = 0.0  # spent looking and compacting
        self.compacted = 0  # tables compacted
        self.files_compacted = 0  # small files bin-packed

    def wrote(self, tables: Iterable[tuple[str, str]]) -> None:
        """A step wrote these tables ((path, schema.table) each)."""
        for path, name in tables:
            t = self._tables.setdefault(path, _Table(name))
            t.name = name
            t.writes += 1

    def due(self) -> str | None:
        """The path of the table to look at now, if any (without looking)."""
        ready = [(t.writes, path) for path, t in self._tables.items() if t.writes >= self.options.min_small_files]
        if not ready or self.seconds > SHARE * (self._clock() - self._started):
            return None
        return max(ready)[1]

    def between_steps(self) -> bool:
        """Look at the table most due and compact it when it holds enough small files; whether it
        was compacted. A failure is logged, not raised (the step it follows is committed); losing
        the lease is raised."""
        path = self.due()
        if path is None:
            return False
        table = self._tables[path]
        table.writes = 0
        started = self._clock()
        small: list[int] = []
        left: list[int] = []
        compacted = False
        try:
            maintainer = self._maintainer()
            small = self._small(maintainer, path)
            if len(small) >= self.options.min_small_files:
                maintainer.compact(path, table.name)
                compacted = True
                left = self._small(maintainer, path)
        except LeaseLostError:
            raise
        except Exception as exc:
            log.warning("could not compact %s (%s): %s; tried again after %d more writes", table.name, path, exc,
                        self.options.min_small_files)
            compacted = False
        seconds = self._clock() - started
        self.seconds += seconds
        if compacted:
            self.compacted += 1
            self.files_compacted += len(small)
            log.info("compacted %s: %d small files into %d in %.1fs", table.name, len(small), len(left), seconds)
        self.metrics.looked_at(table.name, small_files=len(left) if compacted else len(small),
                               compacted=len(small) if compacted else 0, seconds=seconds)
        return compacted

    def _small(self, maintainer: Maintainer, path: str) -> list[int]:
        return [s for s in live_file_sizes(maintainer.edge, path) if s < self.options.small_file_bytes]
