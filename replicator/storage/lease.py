"""One writer per warehouse, across machines: a lease object, fenced.

`<warehouse>/_replicator/lease.json` names its holder (host, pid, a random holder id), since when
it holds the warehouse and until when (`expires_at`, epoch seconds). It is taken with a conditional
create (absent) or a conditional replace (expired or released, unchanged since read), and renewed
every third of its term by a background thread with a conditional replace: if anyone else wrote it
in between, this holder has lost it. Before each commit the holder calls `check()`, which raises
`LeaseLostError` once the lease is lost or closer to its expiry than `margin`: a holder that was
paused or cut off past its term finds out before its next commit and stops without committing
(fencing, not just a lock). A taker waits `grace` past the expiry it read, for clock skew.

A holder on this very machine whose process is gone (killed) holds nothing: its lease is taken
over at once instead of after its term (its pid is checked only when the host and boot match).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicator.errors import LeaseLostError, StateError
from replicator.logformat import event_level
from replicator.storage.fileio import FileIO

log = logging.getLogger("replicator")

DEFAULT_LEASE_SECONDS = 60.0


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return ""


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

    def to_json(self) -> bytes:
        return json.dumps({
            "holder": self.holder, "host": self.host, "pid": self.pid, "boot": self.boot,
            "since": _iso(self.since), "since_epoch": self.since, "expires_at": self.expires_at,
            "expires": _iso(self.expires_at), "released": self.released,
        }, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Holder | None:
        try:
            d: dict[str, Any] = json.loads(data)
            return cls(holder=str(d["holder"]), host=str(d["host"]), pid=int(d["pid"]), boot=str(d.get("boot", "")),
                       since=float(d["since_epoch"]), expires_at=float(d["expires_at"]),
                       released=bool(d.get("released", False)))
        except (ValueError, KeyError, TypeError):
            return None  # unreadable: treated as free (only a replicator writes it)

    def describe(self) -> str:
        return f"host {self.host}, pid {self.pid}, since {_iso(self.since)}"

    def dead_here(self) -> bool:
        """Provably gone: a process of this machine (same host, same boot) that no longer exists."""
        return self.host == socket.gethostname() and bool(self.boot) and self.boot == _boot_id() \
            and not pid_alive(self.pid)


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
        self.me = Holder(holder=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid(), boot=_boot_id(),
                         since=0.0, expires_at=0.0)
        self._etag: str | None = None
        self._expires_at = 0.0
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

    def _record(self, since: float) -> Holder:
        now = time.time()
        return Holder(self.me.holder, self.me.host, self.me.pid, self.me.boot, since, now + self.seconds)

    def _try_take(self) -> Holder | None:
        """None when taken; else the live holder."""
        current = self.io.read_versioned(self.path)
        now = time.time()
        if current is None:
            record = self._record(now)
            etag = self.io.create(self.path, record.to_json())
        else:
            holder = Holder.from_json(current.data)
            if holder is not None and not holder.released and now <= holder.expires_at + self.grace \
                    and not holder.dead_here():
                return holder
            record = self._record(now)
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
        if etag is None or lost is not None:
            return
        record = Holder(self.me.holder, self.me.host, self.me.pid, self.me.boot, self.me.since, time.time(),
                        released=True)
        try:
            self.io.replace(self.path, record.to_json(), etag)
        except Exception as exc:  # the term runs out by itself
            log.warning("could not give back the lease of %s (%s); it expires by itself", self.what, exc,
                        extra={"lease": "not released"})

    # -- keeping it --------------------------------------------------------------------------------
    def _renew_loop(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            self.renew()

    def renew(self) -> None:
        """Extend the term if the lease is still ours, unchanged; else mark it lost."""
        with self._lock:
            etag, lost = self._etag, self._lost
        if etag is None or lost is not None:
            return
        record = self._record(self.me.since)
        started = time.monotonic()
        try:
            new = self.io.replace(self.path, record.to_json(), etag)
        except Exception as exc:  # unreachable store: keep the term we have, try again
            log.warning("could not renew the lease of %s (%s); retrying", self.what, exc,
                        extra={"lease": "renewal failed"})
            return
        finally:
            self.renew_seconds += time.monotonic() - started
        with self._lock:
            if new is None:
                self._lost = "another replicator run took it over"
                log.log(event_level(), "lost the lease of %s: %s", self.what, self._lost, extra={"lease": "lost"})
            else:
                self._etag, self._expires_at = new, record.expires_at
                self.renewals += 1

    def check(self) -> None:
        """Fencing: raise LeaseLostError unless the lease is ours for at least `margin` more."""
        with self._lock:
            lost, expires_at = self._lost, self._expires_at
        if lost is None and time.time() > expires_at - self.margin:
            lost = f"its term ended at {_iso(expires_at)} without a renewal (paused or cut off from the store?)"
            with self._lock:
                self._lost = lost
        if lost is not None:
            raise LeaseLostError(
                f"this run no longer holds {self.what}: {lost}; it stops without committing anything more "
                "(the run that holds it now continues; nothing is lost)")

    @property
    def expires_at(self) -> float:
        return self._expires_at
