"""Test-only fault injection: crash the process at a named instant of a run.

Why: a crash between two durable writes (a table's MERGE and the next one, the data and the
progress file, two statements of one DDL) is the case exactly-once must survive, and random
SIGKILLs hit each of those instants only by luck. `REPLICATOR_FAULT="after_merge:3"` crashes
right after the third MERGE commit of the run, deterministically, so CI covers every instant.

Spec: comma-separated `point:N` (the Nth time the point is reached) or `point:N:SECONDS`
(for `mid_merge` and `mid_compaction`: crash SECONDS after the Nth MERGE or OPTIMIZE started,
while Spark is executing it).
The crash is a SIGKILL of the process group when this process leads it (the Spark JVM, a
child, dies with it, as in a machine crash), else `os._exit(137)`. With
`REPLICATOR_FAULT_ACTION=stop` the process group is stopped instead (SIGSTOP: a long GC pause, a
frozen VM), to be resumed by the test with SIGCONT. Unset (production): every call is a
dictionary lookup that finds nothing.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections import Counter

ENV = "REPLICATOR_FAULT"
ACTION_ENV = "REPLICATOR_FAULT_ACTION"
POINTS = ("after_merge", "after_append", "between_tables", "tables_in_flight", "mid_merge", "before_progress",
          "after_progress", "mid_ddl", "after_dead_letters", "mid_compaction", "after_compaction",
          "before_commit_put")
"""after_merge: a table's write (MERGE or append) committed; after_append: a table's append of
fresh inserts committed (its step's progress not); between_tables: ... and another table of the same step
follows; tables_in_flight: a table's MERGE committed while another table's MERGE of the same step
is still running (--apply-parallelism above 1); mid_merge: during a MERGE; before_progress: a
step's Delta writes done, state.json not yet replaced; after_progress: state.json replaced,
consumer-group offsets not yet committed; mid_ddl: after one Delta statement of a DDL;
after_dead_letters: dead letters written, progress not yet; mid_compaction: during a follower's
OPTIMIZE between steps (with SECONDS, as mid_merge); after_compaction: that OPTIMIZE committed;
before_commit_put: in the driver JVM (runtime/java/s3commit `Faults`, s3a:// only), right before
the PUT of a Delta commit file whose fence and pin checks passed: where a paused holder's late
commit comes from."""


class FaultPlan:
    """A parsed `REPLICATOR_FAULT` spec: which pass through which point crashes (and after how long)."""

    def __init__(self, spec: str) -> None:
        self.plan: dict[str, tuple[int, float]] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            fields = part.split(":")
            if fields[0] not in POINTS or len(fields) not in (2, 3):
                raise ValueError(f"{ENV}: {part!r} is not POINT:N[:SECONDS] with POINT one of {', '.join(POINTS)}")
            self.plan[fields[0]] = (int(fields[1]), float(fields[2]) if len(fields) == 3 else 0.0)
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()  # MERGEs of one step pass their points from several threads

    def reached(self, point: str) -> bool:
        """Count a pass through `point`; True when this pass is the planned one."""
        if point not in self.plan:
            return False
        with self._lock:
            self.hits[point] += 1
            return self.hits[point] == self.plan[point][0]


# This process's plan: None unless REPLICATOR_FAULT is set (a test run has none).
ACTIVE: FaultPlan | None = FaultPlan(os.environ[ENV]) if os.environ.get(ENV) else None


def crash(point: str) -> None:
    """Die now, like a power cut: no finally blocks, no flushing, the JVM killed with us."""
    if os.environ.get(ACTION_ENV) == "stop":
        sys.stderr.write(f"replicator: injected fault {point}: stopping\n")
        sys.stderr.flush()
        os.killpg(os.getpgrp(), signal.SIGSTOP)
        return
    sys.stderr.write(f"replicator: injected fault {point}: crashing\n")
    sys.stderr.flush()
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(137)


def fault_point(point: str) -> None:
    """Crash here if REPLICATOR_FAULT plans it for this pass (no-op otherwise)."""
    if ACTIVE is not None and ACTIVE.reached(point):
        crash(point)


def fault_timer(point: str) -> None:
    """For instants inside a blocking call (a MERGE running in the JVM): if planned for this pass,
    crash the planned seconds from now, whatever the process is doing by then."""
    if ACTIVE is not None and ACTIVE.reached(point):
        timer = threading.Timer(ACTIVE.plan[point][1], crash, args=(point,))
        timer.daemon = True
        timer.start()
