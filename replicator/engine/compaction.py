"""A follower compacts and vacuums its own tables: between steps, one table at a time, within a
share of the run's time (issue 51; what `replicator maintain` does on demand, maintenance.py).

Each step's record names the tables it wrote. A table is looked at once it has had
`min_small_files` writes since it was last looked at (a small step writes one file per table,
delta/session.py `one_file`), by reading its live files' sizes from its log (no Spark job; on from
where it last looked, so only the commits since, not the whole log since its checkpoint); it is
compacted, one OPTIMIZE commit whose files are all `dataChange=false`, when at least
`min_small_files` of them are small. So a table's small files stay below about twice the
threshold, whatever the number of steps.

The table with the most writes since it was last looked at goes first, and one starts only while
the time spent compacting stays within SHARE of the run's time so far: a compaction delays the
next step by its own time, a tenth of the follower's time at most on average. A kill in the middle
leaves the OPTIMIZE committed or not; nothing is lost (its unreferenced files go at a VACUUM).

When no table is due for compaction, the one vacuumed longest ago is, once `vacuum_every` has
passed since its last VACUUM (a seventh of the retention, at most a day: with the default 7 days,
daily, so a table holds at most about 8 days of replaced files) and it was written since. The
retention is the run's (`--retention-hours`), never below the table's own
`delta.deletedFileRetentionDuration`: a follower takes no `--allow-short-retention`. When each
table was last vacuumed is kept in `state.json` (`vacuumed`, Unix seconds by table uid), so a
restarted follower neither vacuums everything again nor forgets to; a table first seen by this
run counts as vacuumed when it is first seen (a new table has nothing to remove). When each was
last compacted is kept there too (`compacted`), for `replicator tables` and `status` to show.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from replicator.delta.rowcount import LogSnapshot
from replicator.errors import LeaseLostError
from replicator.faults import fault_point, fault_timer
from replicator.maintenance import Maintainer, MaintainOptions, live_file_sizes
from replicator.metrics import Metrics

log = logging.getLogger("replicator")

SHARE = 0.1  # of the run's time, at most, spent compacting and vacuuming
VACUUM_EVERY_MAX_S = 86400.0  # a table is vacuumed at least daily once it is due at all


def vacuum_every(retention_hours: float) -> float:
    """Seconds between two VACUUMs of a table: a seventh of the retention, at most a day."""
    return min(VACUUM_EVERY_MAX_S, max(0.0, retention_hours) * 3600 / 7)


@dataclass
class _Table:
    name: str
    uid: str
    writes: int = 0  # since it was last looked at
    written: bool = False  # since it was last vacuumed


class Compactor:
    """Between a follower's steps: at most one table compacted (see module doc)."""

    def __init__(self, maintainer: Callable[[], Maintainer], options: MaintainOptions, *,
                 vacuumed: Callable[[], dict[str, float]] | None = None,
                 compacted: Callable[[], dict[str, float]] | None = None, metrics: Metrics | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self._maintainer = maintainer  # built on first use: the Spark side may not exist yet
        self.options = options
        # uid -> when last vacuumed (Unix seconds): the run's state.json `vacuumed`; None: never vacuum
        self._vacuumed = vacuumed
        self._compacted = compacted  # uid -> when last compacted (state.json `compacted`); None: not kept
        self.vacuum_every = vacuum_every(options.retention_hours)
        self.metrics = metrics or Metrics()
        self._clock, self._wall = clock, wall
        self._started = clock()
        self._tables: dict[str, _Table] = {}  # by path
        self._logs: dict[str, LogSnapshot] = {}  # each table's live files when last looked at, by path
        self._warned: set[str] = set()  # tables whose own retention is above the run's (said once)
        self.seconds = 0.0  # spent looking, compacting and vacuuming
        self.compacted = 0  # tables compacted
        self.files_compacted = 0  # small files bin-packed
        self.vacuums = 0  # tables vacuumed
        self.vacuumed_bytes = 0  # what those VACUUMs removed

    def wrote(self, tables: Iterable[tuple[str, str, str]]) -> None:
        """A step wrote these tables ((path, schema.table, uid) each)."""
        vacuumed = self._vacuumed() if self._vacuumed is not None else None
        for path, name, uid in tables:
            t = self._tables.setdefault(path, _Table(name, uid))
            t.name = name
            t.writes += 1
            t.written = True
            if vacuumed is not None:
                vacuumed.setdefault(uid, self._wall())  # first seen: nothing older to remove yet

    def due(self) -> str | None:
        """The path of the table to look at now, if any (without looking)."""
        ready = [(t.writes, path) for path, t in self._tables.items() if t.writes >= self.options.min_small_files]
        if not ready or self.seconds > SHARE * (self._clock() - self._started):
            return None
        return max(ready)[1]

    def vacuum_due(self) -> str | None:
        """The path of the table to vacuum now, if any: written since, vacuumed longest ago."""
        if self._vacuumed is None or self.seconds > SHARE * (self._clock() - self._started):
            return None
        vacuumed, now = self._vacuumed(), self._wall()
        ready = [(vacuumed.get(t.uid, now), path) for path, t in self._tables.items()
                 if t.written and now - vacuumed.get(t.uid, now) >= self.vacuum_every]
        return min(ready)[1] if ready else None

    def between_steps(self) -> bool:
        """Look at the table most due and compact it when it holds enough small files, else vacuum
        the table most due; whether a table was compacted. A failure is logged, not raised (the
        step it follows is committed); losing the lease is raised."""
        path = self.due()
        if path is None:
            vacuum = self.vacuum_due()
            if vacuum is not None:
                self._vacuum(vacuum)
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
                fault_timer("mid_compaction")
                maintainer.compact(path, table.name)
                fault_point("after_compaction")
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
            if self._compacted is not None:
                self._compacted()[table.uid] = self._wall()
            self.files_compacted += len(small)
            log.info("compacted %s: %d small files into %d in %.1fs", table.name, len(small), len(left), seconds)
        self.metrics.looked_at(table.name, small_files=len(left) if compacted else len(small),
                               compacted=len(small) if compacted else 0, seconds=seconds)
        return compacted

    def _vacuum(self, path: str) -> None:
        table = self._tables[path]
        started = self._clock()
        removed, done = 0, False
        try:
            maintainer = self._maintainer()
            floor = maintainer.floor_hours(path)
            hours = max(self.options.retention_hours, floor)
            if hours > self.options.retention_hours and path not in self._warned:
                self._warned.add(path)
                log.warning("%s keeps removed files for %g hours (its delta.deletedFileRetentionDuration), more "
                            "than --retention-hours %g: vacuumed with its own; `replicator maintain "
                            "--allow-short-retention` goes below it", table.name, floor, self.options.retention_hours)
            files, sizes = maintainer.vacuum(path, table.name, hours)
            removed, done = sum(sizes.get(f, 0) for f in files), True
            log.info("vacuumed %s (retention %g hours): removed %d files, %d bytes in %.1fs", table.name, hours,
                     len(files), removed, self._clock() - started)
        except LeaseLostError:
            raise
        except Exception as exc:
            log.warning("could not vacuum %s (%s): %s; tried again after %.0f s", table.name, path, exc,
                        self.vacuum_every)
        seconds = self._clock() - started
        self.seconds += seconds
        table.written = False
        if self._vacuumed is not None:
            self._vacuumed()[table.uid] = self._wall()
        self.vacuums += done
        self.vacuumed_bytes += removed
        self.metrics.vacuumed(done, removed_bytes=removed, seconds=seconds)

    def _small(self, maintainer: Maintainer, path: str) -> list[int]:
        return [s for s in live_file_sizes(maintainer.delta, path, self._logs) if s < self.options.small_file_bytes]
