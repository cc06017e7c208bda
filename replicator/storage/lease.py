"""One writer per warehouse, across machines: a lease object, fenced.

`<warehouse>/_replicator/lease.json` names its holder (host, pid, a random holder id), since when
it holds the warehouse and until when (`expires_at`, epoch seconds). It is taken with a conditional
create (absent) or a conditional replace (expired or released, unchanged since read), and renewed
every third of its term by a background thread with a conditional replace: if anyone else wrote it
in between, this holder has lost it. Before each commit the holder calls `check()`, which raises
`LeaseLostError` once the lease is lost or closer to its expiry than `margin`: a holder that was
paused or cut off past its term finds out before its next commit and stops without committing
(fencing, not just a lock). A taker waits `grace` past the holder's term. Where the store dates
its answers (S3), how long ago the record was written is read off the store's own clock (its
answer's Date less the record's Last-Modified, `Versioned.age`) and compared with the term the
record states: no machine's wall clock is in it, so a taker whose clock runs ahead does not take
a live lease. Elsewhere (a local directory, whose writers share one machine's clock; an older
record without its term) the taker compares its wall clock with `expires_at`.

The holder keeps its own deadline on the monotonic clock (`time.monotonic()`, which runs on while
the process is stopped): the start of its last successful renewal plus the term, less `margin`.
Past it, it is lost whatever the wall clock says; the renewal thread wakes at the deadline and
tells the listeners (`on_change`), so the run's Spark work stops and the driver JVM refuses any
further Delta commit (runtime/java/s3commit) before any taker may start, `margin` + `grace` later.

A holder on this very machine whose process is gone (killed) holds nothing: its lease is taken
over at once instead of after its term. "This machine" means the same host name, boot and pid
namespace (containers with host networking share the first two), and "gone" means no process with
that pid, or one started at another time (a reused pid).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicator.errors import LeaseLostError, StateError
from replicator.logformat import event_level
from replicator.storage.fileio import FileIO

log = logging.getLogger("replicator")

DEFAULT_LEASE_SECONDS = 60.0


def boot_id() -> str:
    """This machine's boot (the kernel's random boot id); "" unknown. With the host name and the
    pid namespace it tells whether a holder's record is of this machine (`Holder.dead_here`)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


def pid_namespace() -> str:
    """This process's pid namespace (containers on one host have their own); "" unknown."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def process_start(pid: int) -> int:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22); 0 unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def _reap(pid: int) -> None:
    """Collect a dead child of ours so it does not linger as a zombie (which os.kill(pid, 0) sees as alive)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a container's PID 1 may never reap orphans)."""
    _reap(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie whose parent is not us still answers kill(0)
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Holder:
    """What lease.json says."""

    holder: str
    host: str
    pid: int
    boot: str
    since: float
    expires_at: float
    released: bool = False
    pidns: str = ""
    start: int = 0
    # The fencing token: each take of the lease writes one more than the record it replaced, so a
    # later holder's writes always carry a higher epoch than an earlier one's (storage/fenced.py).
    epoch: int = 0
    term: float = 0.0  # seconds the record holds from when it was written (0: an older record)

    def to_json(self) -> bytes:
        return json.dumps({
            "holder": self.holder, "host": self.host, "pid": self.pid, "boot": self.boot,
            "pidns": self.pidns, "start": self.start, "epoch": self.epoch,
            "since": _iso(self.since), "since_epoch": self.since, "expires_at": self.expires_at,
            "expires": _iso(self.expires_at), "released": self.released, "term_s": self.term,
        }, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Holder | None:
        try:
            d: dict[str, Any] = json.loads(data)
            return cls(holder=str(d["holder"]), host=str(d["host"]), pid=int(d["pid"]), boot=str(d.get("boot", "")),
                       since=float(d["since_epoch"]), expires_at=float(d["expires_at"]),
                       released=bool(d.get("released", False)), pidns=str(d.get("pidns", "")),
                       start=int(d.get("start", 0)), epoch=int(d.get("epoch", 0)),
                       term=float(d.get("term_s", 0.0) or 0.0))
        except (ValueError, KeyError, TypeError):
            return None  # unreadable: treated as free (only a replicator writes it)

    def describe(self) -> str:
        return f"host {self.host}, pid {self.pid}, since {_iso(self.since)}"

    def live(self, now: float, age: float | None, grace: float) -> bool:
        """Whether this record still holds the lease, read `age` seconds after it was written by
        the store's clock (None: unknown, then by the reader's wall clock `now`), `grace` past it."""
        if self.released:
            return False
        if age is not None and self.term > 0:
            return age <= self.term + grace
        return now <= self.expires_at + grace

    def dead_here(self) -> bool:
        """Provably gone: a process of this machine (same host, boot and pid namespace) that no
        longer exists, or whose pid now belongs to a process started at another time. A record
        without its pid namespace or start time (an older replicator) is never provably gone."""
        if not (self.host == socket.gethostname() and self.boot and self.boot == boot_id()
                and self.pidns and self.pidns == pid_namespace() and self.start):
            return False
        return not pid_alive(self.pid) or process_start(self.pid) != self.start


class Lease:
    """The writer lease of one warehouse (`path`: its lease.json) for this process."""

    def __init__(self, io: FileIO, path: str, *, seconds: float = DEFAULT_LEASE_SECONDS, what: str = "warehouse",
                 grace: float | None = None) -> None:
        if seconds <= 0:
            raise StateError(f"--lease-seconds must be positive, got {seconds:g}")
        self.io = io
        self.path = path
        self.seconds = seconds
        self.what = what
        self.grace = grace if grace is not None else min(5.0, seconds / 6)
        self.margin = min(5.0, seconds / 6)
        self.me = Holder(holder=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid(), boot=boot_id(),
                         since=0.0, expires_at=0.0, pidns=pid_namespace(), start=process_start(os.getpid()))
        self._etag: str | None = None
        self._expires_at = 0.0
        self._deadline = 0.0  # monotonic: past it the lease is lost (module doc)
        # Told (deadline or None when lost) after taking, every renewal and the loss (`on_change`).
        self._listeners: list[Callable[[float | None], None]] = []
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.renewals = 0
        self.renew_seconds = 0.0

    # -- taking and giving back ---------------------------------------------------------------------
    def acquire(self, *, wait: bool = False, timeout: float | None = None) -> None:
        """Take the lease; a live holder makes this fail at once naming it, or (`wait`) wait for it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        announced = False
        while True:
            holder = self._try_take()
            if holder is None:
                break
            if not wait or (deadline is not None and time.monotonic() > deadline):
                raise StateError(
                    f"{self.what} is in use by another replicator run ({holder.describe()}; its lease runs "
                    f"until {_iso(holder.expires_at)}); wait for it to finish, or pass --wait to queue behind it")
            if not announced:
                log.warning("%s is in use by another replicator run (%s); waiting", self.what, holder.describe(),
                            extra={"lease": "waiting", "holder": holder.describe()})
                announced = True
            time.sleep(min(1.0, self.seconds / 4))
        log.log(event_level(), "took the lease of %s until %s", self.what, _iso(self._expires_at),
                extra={"lease": "taken", "holder": self.me.describe()})
        self._thread = threading.Thread(target=self._renew_loop, name="lease-renewal", daemon=True)
        self._thread.start()

    def _record(self, since: float, epoch: int | None = None) -> Holder:
        now = time.time()
        return dataclasses.replace(self.me, since=since, expires_at=now + self.seconds, released=False,
                                   epoch=self.me.epoch if epoch is None else epoch, term=self.seconds)

    @property
    def epoch(self) -> int:
        """This holder's fencing token (0 before it took the lease)."""
        return self.me.epoch

    def on_change(self, listener: Callable[[float | None], None]) -> None:
        """Call `listener(deadline)` now and after every renewal (the monotonic instant past which
        this process must not commit), `listener(None)` once the lease is lost, and
        `listener(math.inf)` when it is given back (nothing of this lease to fence any more)."""
        with self._lock:
            self._listeners.append(listener)
            state = None if self._lost is not None else self._deadline
        listener(state)

    def _tell(self, deadline: float | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(deadline)
            except Exception as exc:  # a listener's failure must not stop the renewals
                log.warning("lease listener failed: %s", exc)

    def _lose(self, why: str) -> None:
        with self._lock:
            if self._lost is not None:
                return
            self._lost = why
        log.log(event_level(), "lost the lease of %s: %s", self.what, why, extra={"lease": "lost"})
        self._tell(None)

    def _try_take(self) -> Holder | None:
        """None when taken; else the live holder."""
        started = time.monotonic()
        current = self.io.read_versioned(self.path)
        now = time.time()
        if current is None:
            record = self._record(now, epoch=1)
            etag = self.io.create(self.path, record.to_json())
        else:
            holder = Holder.from_json(current.data)
            if holder is not None and holder.live(now, current.age, self.grace) and not holder.dead_here():
                return holder
            # an unreadable record counts as epoch 0; only a replicator writes the file
            record = self._record(now, epoch=(holder.epoch if holder is not None else 0) + 1)
            etag = self.io.replace(self.path, record.to_json(), current.etag)
            if etag is not None and holder is not None and not holder.released:
                log.warning("took over %s from a replicator run that stopped without giving it back (%s)",
                            self.what, holder.describe(), extra={"lease": "taken over", "holder": holder.describe()})
        if etag is None:  # someone else wrote it in between: look again
            again = self.io.read_versioned(self.path)
            holder = Holder.from_json(again.data) if again is not None else None
            return holder if holder is not None else self._try_take()
        with self._lock:
            self._etag, self._expires_at, self._lost = etag, record.expires_at, None
            self._deadline = started + self.seconds - self.margin
            self.me = record
        return None

    def release(self) -> None:
        """Give the lease back (only if still ours): the next run need not wait for its term."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            etag, lost = self._etag, self._lost
            self._etag = None
        self._tell(math.inf)
        self._listeners.clear()
        if etag is None or lost is not None:
            return
        record = dataclasses.replace(self.me, expires_at=time.time(), released=True)
        try:
            self.io.replace(self.path, record.to_json(), etag)
        except Exception as exc:  # the term runs out by itself
            log.warning("could not give back the lease of %s (%s); it expires by itself", self.what, exc,
                        extra={"lease": "not released"})

    # -- keeping it --------------------------------------------------------------------------------
    def _renew_loop(self) -> None:
        """Renew every third of the term; between renewals, wake at the deadline too: a lease not
        renewed by then is lost, and the listeners hear it at once."""
        next_renewal = time.monotonic() + self.seconds / 3
        while True:
            with self._lock:
                deadline, lost = self._deadline, self._lost
            now = time.monotonic()
            if lost is None and now >= deadline:
                self._lose(f"not renewed by its deadline ({now - deadline + self.margin:.0f}s before its term "
                           "ends; paused or cut off from the store?)")
            wake = next_renewal if lost is not None else min(next_renewal, deadline)
            if self._stop.wait(max(0.0, wake - time.monotonic())):
                return
            if time.monotonic() >= next_renewal:
                self.renew()
                next_renewal = time.monotonic() + self.seconds / 3

    def renew(self) -> None:
        """Extend the term if the lease is still ours, unchanged; else mark it lost."""
        with self._lock:
            etag, lost = self._etag, self._lost
        if etag is None or lost is not None:
            return
        record = self._record(self.me.since)
        data = record.to_json()
        started = time.monotonic()
        try:
            new = self.io.replace(self.path, data, etag)
            if new is None:
                new = self._still_mine()
        except Exception as exc:  # unreachable store: keep the term we have, try again
            log.warning("could not renew the lease of %s (%s); retrying", self.what, exc,
                        extra={"lease": "renewal failed"})
            return
        finally:
            self.renew_seconds += time.monotonic() - started
        if new is None:
            self._lose("another replicator run took it over")
            return
        with self._lock:
            if self._lost is not None:  # the deadline passed while the request was out
                return
            self._etag, self._expires_at = new, record.expires_at
            self._deadline = started + self.seconds - self.margin
            self.renewals += 1
            deadline = self._deadline
        self._tell(deadline)

    def _still_mine(self) -> str | None:
        """The lease file's tag when its record is still this holder's, same take (holder id and
        epoch): a renewal whose answer was lost landed, and the client's retry was refused (the
        tag had moved). None: someone else's, or released."""
        current = self.io.read_versioned(self.path)
        record = Holder.from_json(current.data) if current is not None else None
        if current is None or record is None or record.released:
            return None
        return current.etag if (record.holder, record.epoch) == (self.me.holder, self.me.epoch) else None

    def holds_record(self) -> bool:
        """Whether the lease file still holds this holder's take (a read of the store): what a
        stamp of a newer epoch elsewhere is checked against (delta/catalog.py)."""
        return self._still_mine() is not None

    def is_lost(self) -> bool:
        """Lost, or past its monotonic deadline (without raising: for a failure's explanation)."""
        with self._lock:
            return self._lost is not None or (self._etag is not None and time.monotonic() >= self._deadline)

    def check(self) -> None:
        """Fencing: raise LeaseLostError unless the lease is ours until the monotonic deadline."""
        with self._lock:
            lost, deadline = self._lost, self._deadline
        if lost is None and time.monotonic() >= deadline:
            self._lose(f"its term ended at {_iso(self._expires_at)} without a renewal "
                       "(paused or cut off from the store?)")
            with self._lock:
                lost = self._lost
        if lost is not None:
            raise LeaseLostError(
                f"this run no longer holds {self.what}: {lost}; it stops without committing anything more "
                "(the run that holds it now continues; nothing is lost)")

    @property
    def expires_at(self) -> float:
        return self._expires_at
