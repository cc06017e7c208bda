"""Process figures read from /proc: RSS peaks and CPU time of a process and its JVM descendants."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def checkout_env() -> dict[str, str]:
    """The environment for the bench's Python subprocesses: this checkout first on PYTHONPATH, so a
    ``python -m replicator`` (or ``-m bench.peer``) child imports the code the bench was started
    from, not whatever checkout the virtualenv's editable install points at (worktrees share one)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _proc_status(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    k, v = line.split(":", 1)
                    out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


def rss(pid: int) -> int:
    """Resident set size of a live process now (VmRSS, bytes; 0 once it has exited)."""
    return _proc_status(pid).get("VmRSS", 0)


def _descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command name) of every descendant of `pid` (one scan of /proc/*/stat)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                stat = fh.read()
        except OSError:
            continue
        name = stat[stat.find("(") + 1:stat.rfind(")")]
        ppid = int(stat[stat.rfind(")") + 2:].split()[1])
        children.setdefault(ppid, []).append((int(entry), name))
    out: list[tuple[int, str]] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child[0])
    return out


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime of a live process (/proc/<pid>/stat fields 14 and 15)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssSampler(threading.Thread):
    """Samples VmRSS/VmHWM and CPU time of a process and of its java descendants until stopped.
    VmHWM is the kernel's own peak, so sampling every 0.5 s loses nothing but the last half second
    (CPU time likewise loses at most the last half second)."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.driver_peak = 0
        self.jvm_peak = 0
        self.driver_cpu = 0.0
        self.jvm_cpu = 0.0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            st = _proc_status(self.pid)
            self.driver_peak = max(self.driver_peak, st.get("VmHWM", 0), st.get("VmRSS", 0))
            self.driver_cpu = max(self.driver_cpu, _cpu_seconds(self.pid) or 0.0)
            for pid, name in _descendants(self.pid):
                if name == "java":
                    js = _proc_status(pid)
                    self.jvm_peak = max(self.jvm_peak, js.get("VmHWM", 0), js.get("VmRSS", 0))
                    self.jvm_cpu = max(self.jvm_cpu, _cpu_seconds(pid) or 0.0)
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)


def jvm_cpu() -> float:
    """CPU seconds used so far by this process's JVM (its Spark driver): a MERGE's work, robust
    to other jobs competing for the cores (0 when no JVM child is found)."""
    return sum(_cpu_seconds(pid) or 0.0 for pid, name in _descendants(os.getpid())
               if name == "java" and "org.apache.spark.deploy.SparkSubmit" in _cmdline(pid))


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def run_sampled(cmd: Sequence[str], workdir: Path, log_path: Path, env: Mapping[str, str] | None = None,
                ) -> tuple[subprocess.Popen[bytes], bytes, float, RssSampler]:
    """Run `cmd` from `workdir` (this checkout on PYTHONPATH, `env` on top of this process's environment),
    stderr to `log_path`, sampling its RSS and CPU: (the finished process, its stdout, wall seconds, the
    sampler)."""
    t0 = time.perf_counter()
    with open(log_path, "wb") as err:
        # cwd: an empty dir, so `-m` puts nothing unexpected on sys.path; PYTHONPATH: this checkout.
        proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=err, cwd=workdir,
                                env={**checkout_env(), **(env or {})})
        sampler = RssSampler(proc.pid)
        sampler.start()
        try:
            out, _ = proc.communicate()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            sampler.stop()
    return proc, out, time.perf_counter() - t0, sampler
