"""A Spark standalone cluster on 127.0.0.1 from the pyspark installation: one master and two
workers (``make cluster-up`` / ``make cluster-down``; ``python -m replicator.sim.localspark
up|down|status``). Nothing is downloaded: the master and workers are pyspark's own
``bin/spark-class`` launcher with its jars.

``up`` prints the master URL ``spark://127.0.0.1:<port>`` (``$SPARK_MASTER_PORT``, default 7077);
``REPLICATOR_SPARK_MASTER=<that URL>`` then runs the replicator's Spark work on the workers'
executors. Executors run on this machine, so they import the package from the same virtualenv and
write the same local warehouse paths; the session's jars reach them through ``spark.jars``.

The processes run in their own session (a closed terminal does not stop them); their pids, ports
and logs live in the state directory (default ``state/spark``), and ``down`` stops them, workers
first (a worker kills its executors on the way out).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicator.errors import ReplicatorError
from replicator.sim.localkafka.process import env_port, free_ports, pid_alive, state_dir_lock

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STATE_DIR = REPO_ROOT / "state" / "spark"
PORT_ENV = "SPARK_MASTER_PORT"
DEFAULT_PORT = 7077
WORKERS = 2
WORKER_CORES = 1
WORKER_MEMORY = "2g"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class LocalSparkError(ReplicatorError):
    """The local Spark cluster could not be started or stopped."""


@dataclass(frozen=True)
class ClusterHandle:
    master_url: str
    webui_port: int
    master_pid: int
    worker_pids: tuple[int, ...]
    state_dir: Path
    already_running: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"master_url": self.master_url, "webui_port": self.webui_port, "master_pid": self.master_pid,
                "worker_pids": list(self.worker_pids)}


def spark_home() -> Path:
    """The pyspark installation, which is a complete Spark distribution for these purposes."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def master_state(webui_port: int, timeout: float = 2.0) -> dict[str, Any]:
    """The master's own JSON status (status, alive workers, applications)."""
    with urllib.request.urlopen(f"http://{HOST}:{webui_port}/json/", timeout=timeout) as resp:
        return dict(json.loads(resp.read()))


def _ours(pid: int, cls: str) -> bool:
    """Guard against a recycled pid: the process must be a JVM running `cls`."""
    if not pid_alive(pid):
        return False
    try:
        return cls.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc (not Linux): trust the pid file


def _env(state_dir: Path) -> dict[str, str]:
    home = spark_home()
    return {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST, "SPARK_LOG_DIR": str(state_dir),
            "PYSPARK_PYTHON": sys.executable}


def _launch(state_dir: Path, name: str, cls: str, *args: str) -> int:
    cmd = [str(spark_home() / "bin" / "spark-class"), cls, *args]
    with (state_dir / f"{name}.log").open("ab") as log:
        proc = subprocess.Popen(cmd, cwd=state_dir, env=_env(state_dir), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    return proc.pid


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _saved(state_dir: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads((state_dir / "cluster.json").read_text()))
    except (OSError, ValueError):
        return None


def status(state_dir: Path = DEFAULT_STATE_DIR) -> ClusterHandle | None:
    """The running cluster of `state_dir`, or None (no pid file, or its master is gone)."""
    saved = _saved(state_dir)
    if saved is None or not _ours(int(saved["master_pid"]), MASTER_CLASS):
        return None
    return ClusterHandle(saved["master_url"], int(saved["webui_port"]), int(saved["master_pid"]),
                         tuple(int(p) for p in saved["worker_pids"]), state_dir, already_running=True)


def _wait(what: str, cond: Any, deadline: float, log: Path, pids: Sequence[tuple[int, str]]) -> None:
    last: BaseException | None = None
    while time.monotonic() < deadline:
        for pid, cls in pids:
            if not pid_alive(pid):
                raise LocalSparkError(f"{cls.rsplit('.', 1)[-1]} (pid {pid}) exited while waiting for {what}; "
                                      f"{log}:\n{_tail(log)}")
        try:
            if cond():
                return
        except OSError as exc:  # not listening yet
            last = exc
        time.sleep(0.3)
    raise LocalSparkError(f"timed out waiting for {what} (last error: {last!r}); {log}:\n{_tail(log)}")


def start(state_dir: Path = DEFAULT_STATE_DIR, port: int = DEFAULT_PORT, workers: int = WORKERS,
          timeout: float = 120.0) -> ClusterHandle:
    """Start a master on `port` and `workers` workers (1 core, 2 GiB each) and wait until every worker
    has registered; a no-op returning the running cluster when there is one."""
    with state_dir_lock(state_dir):
        running = status(state_dir)
        if running is not None:
            return running
        webui = free_ports(1)[0]
        deadline = time.monotonic() + timeout
        master = _launch(state_dir, "master", MASTER_CLASS, "--host", HOST, "--port", str(port),
                         "--webui-port", str(webui))
        started: list[tuple[int, str]] = [(master, MASTER_CLASS)]
        try:
            _wait("the master", lambda: master_state(webui).get("status") == "ALIVE", deadline,
                  state_dir / "master.log", started)
            url = f"spark://{HOST}:{port}"
            for i in range(workers):
                pid = _launch(state_dir, f"worker-{i}", WORKER_CLASS, "--host", HOST, "--cores", str(WORKER_CORES),
                              "--memory", WORKER_MEMORY, "--webui-port", "0", "--work-dir",
                              str(state_dir / f"work-{i}"), url)
                started.append((pid, WORKER_CLASS))
            _wait(f"{workers} workers to register", lambda: int(master_state(webui).get("aliveworkers", 0)) >= workers,
                  deadline, state_dir / "worker-0.log", started)
            url = str(master_state(webui).get("url") or url)  # the port it bound, as the master says
        except BaseException:
            _stop_pids([p for p, _ in reversed(started)], 10.0)
            raise
        handle = ClusterHandle(url, webui, master, tuple(p for p, _ in started[1:]), state_dir)
        (state_dir / "cluster.json").write_text(json.dumps(handle.to_json(), indent=1) + "\n")
        return handle


def _stop_pids(pids: Sequence[int], timeout: float) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def stop(state_dir: Path = DEFAULT_STATE_DIR, timeout: float = 30.0) -> bool:
    """Stop the cluster of `state_dir` (workers, then the master); False when none of it was running.
    Workers whose master died first are stopped too (they would retry it forever). The workers'
    scratch space goes with them: each application's directory holds its jars, files and unpacked
    `--archives` (a packed Python environment is hundreds of MB per executor)."""
    with state_dir_lock(state_dir):
        saved = _saved(state_dir)
        (state_dir / "cluster.json").unlink(missing_ok=True)
        stopped = False
        if saved is not None:
            workers = [int(p) for p in saved["worker_pids"] if _ours(int(p), WORKER_CLASS)]
            master = [int(saved["master_pid"])] if _ours(int(saved["master_pid"]), MASTER_CLASS) else []
            _stop_pids(workers, timeout)
            _stop_pids(master, timeout)
            stopped = bool(workers or master)
        for work in state_dir.glob("work-*"):
            shutil.rmtree(work, ignore_errors=True)
        return stopped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replicator.sim.localspark",
                                     description="Run a Spark standalone cluster (1 master, 2 workers) on 127.0.0.1.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("up", "start the cluster (no-op if running); print the master URL"),
                            ("down", "stop the cluster (no-op if not running)"),
                            ("status", "print the master URL and exit 0 if running, else exit 1")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                         help=f"pids and logs (default: {DEFAULT_STATE_DIR})")
        if name == "up":
            cmd.add_argument("--port", type=int, default=None, help=f"master port (default: ${PORT_ENV} or "
                                                                    f"{DEFAULT_PORT})")
            cmd.add_argument("--workers", type=int, default=WORKERS, help=f"workers (default: {WORKERS})")
            cmd.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default: 120)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "up":
            port = args.port if args.port is not None else env_port(PORT_ENV, DEFAULT_PORT)
            handle = start(args.state_dir, port, args.workers, args.timeout)
            note = "already running" if handle.already_running else f"started ({len(handle.worker_pids)} workers)"
            print(f"spark: {note}; master UI http://{HOST}:{handle.webui_port}, logs {handle.state_dir}",
                  file=sys.stderr)
            print(handle.master_url, flush=True)
            return 0
        if args.command == "down":
            print("spark: stopped" if stop(args.state_dir) else "spark: not running", file=sys.stderr)
            return 0
        handle_or_none = status(args.state_dir)
        if handle_or_none is None:
            print("spark: not running", file=sys.stderr)
            return 1
        print(handle_or_none.master_url, flush=True)
        return 0
    except ReplicatorError as exc:
        print(f"spark {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
