"""One lifecycle for the local JVM services of one state dir (the S3 server, the Hive metastore):
the pid and port files, adopting a running or still-starting service, stopping it, the context
manager. Each service supplies how it launches and how it tells it answers.

A state dir holds ``<stem>.pid``, ``<stem>.json`` (the port) and ``<stem>.log``; ``.lock``
serialises ``up``/``down`` on it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Self

from replicator.errors import ReplicatorError
from replicator.sim.localkafka.process import runs_java_main, saved_pid_port, state_dir_lock, terminate


def tie_to_parent() -> bool:
    """Whether a child can die with us: Linux sends PR_SET_PDEATHSIG's signal when the *thread*
    that started the child ends, so only children of the main thread are tied."""
    return sys.platform == "linux" and threading.current_thread() is threading.main_thread()


def kill_child(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL our own child and reap it (a no-op once it is gone)."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


class LocalService:
    """A local JVM service of one state dir and port.

    ``port=None`` picks a free one (the last one of this state dir while it is free). ``detach``
    puts the JVM in its own session so it outlives the caller (``make *-up``); otherwise, started
    from the main thread, it dies with the caller (a test process).
    """

    NAME: ClassVar[str]  # in messages: "S3Proxy", "the Hive metastore"
    STEM: ClassVar[str]  # its files in the state dir: <stem>.pid, <stem>.json, <stem>.log
    MAIN_CLASS: ClassVar[str]
    ERROR: ClassVar[type[ReplicatorError]]
    START_TIMEOUT: ClassVar[float] = 60.0
    STOP_TIMEOUT: ClassVar[float] = 15.0

    def __init__(self, state_dir: Path | str, port: int | None = None, *,
                 libs_dir: Path | str | None = None, detach: bool = True) -> None:
        self.state_dir = Path(state_dir).resolve()
        self.log_path = self.state_dir / f"{self.STEM}.log"
        self.pid_path = self.state_dir / f"{self.STEM}.pid"
        self.libs_dir = libs_dir
        self.detach = detach
        self.pid: int | None = None
        self.already_running = False
        self.ready_seconds: float | None = None
        self._wanted_port = port
        self._port: int | None = port
        self._process: subprocess.Popen[bytes] | None = None

    # -- what a service supplies -----------------------------------------------------------------
    def _marker(self) -> Path:
        """A path on its JVM's command line that only this state dir's service has."""
        raise NotImplementedError

    def _answers(self, port: int) -> bool:
        raise NotImplementedError

    def _await_adopted(self, pid: int, port: int, deadline: float) -> None:
        """Wait for a service that is alive but not answering yet (an `up` interrupted while it
        started it)."""
        raise NotImplementedError

    def _launch_ready(self, last_port: int | None, deadline: float) -> None:
        """Launch the JVM, write the pid and port files, set pid/_port/_process; return once it answers."""
        raise NotImplementedError

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._port is None:
            raise self.ERROR(f"{self.NAME} of {self.state_dir} has no port yet: start() it first")
        return self._port

    def _ours(self, pid: int) -> bool:
        return runs_java_main(pid, self.MAIN_CLASS, self._marker())

    def _saved(self) -> tuple[int | None, int | None]:
        """(pid, port) of this state dir's last start."""
        return saved_pid_port(self.state_dir, self.STEM)

    def running(self) -> bool:
        """Whether this state dir's service runs and answers (adopting its pid and port if so)."""
        pid, port = self._saved()
        if pid is None or port is None or not self._ours(pid) or not self._answers(port):
            return False
        self.pid, self._port = pid, port
        return True

    def start(self, timeout: float | None = None) -> Self:
        """Start the service (a no-op when it runs: ``already_running``); return once it answers."""
        deadline = time.monotonic() + (self.START_TIMEOUT if timeout is None else timeout)
        with state_dir_lock(self.state_dir):
            if self.running():
                self.already_running = True
                return self
            self.already_running = False
            pid, port = self._saved()
            if pid is not None and port is not None and self._ours(pid):
                self._await_adopted(pid, port, deadline)  # alive, still starting: wait, don't relaunch
                self.pid, self._port, self.already_running = pid, port, True
                return self
            self.pid_path.unlink(missing_ok=True)
            self._launch_ready(port, deadline)
            return self

    def stop(self, timeout: float | None = None, *, kill: bool = False) -> bool:
        """Stop the service and wait until its process is gone; False when none was running.
        SIGTERM, then SIGKILL after `timeout`; ``kill`` sends SIGKILL at once (a crash)."""
        with state_dir_lock(self.state_dir):
            pid, _port = self._saved()
            self.pid_path.unlink(missing_ok=True)
            stopped = False
            if pid is not None and self._ours(pid):
                wait = self.STOP_TIMEOUT if timeout is None else timeout
                if not terminate(pid, wait, kill=kill, what=self.NAME):
                    raise self.ERROR(f"{self.NAME} pid {pid} did not exit even after SIGKILL")
                stopped = True
            if self._process is not None:
                kill_child(self._process)
                self._process = None
            self.pid = None
            return stopped

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
