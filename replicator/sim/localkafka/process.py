"""The broker's JVM processes: pids, ports, the broker log, readiness, and the format/launch steps.

Names with a leading underscore are shared within `replicator.sim.localkafka` only.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from replicator.sim.localkafka.config import (
    _BIND_FAILURE,
    _FATAL,
    _STACK_FRAME,
    _STARTED,
    HOST,
    JVM_FLAGS,
    LocalKafkaError,
    _BindError,
)
from replicator.storage.lease import pid_alive as pid_alive  # re-exported (zombie-aware)

log = logging.getLogger("replicator.sim.localkafka")

# ---------------------------------------------------------------------------------------------- processes

# pid_alive (zombie-aware) lives with the writer lease, which needs it too; re-exported for the local services.


def _is_our_broker(pid: int, state_dir: Path) -> bool:
    """Guard against a recycled pid: the process must be kafka.Kafka running this state dir's props."""
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (not Linux): trust the pid file
    return b"kafka.Kafka" in cmdline and str(state_dir / "server.properties").encode() in cmdline


def _port_accepting(port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def env_port(name: str, default: int) -> int:
    """The port in environment variable `name` (`default` when unset or empty); a ConfigError naming
    the variable when it is not a port number (KAFKA_PORT, SPARK_MASTER_PORT)."""
    from replicator.errors import ConfigError

    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"${name}={raw!r} is not a port number (1-65535)")
    return int(raw)


def free_ports(count: int) -> list[int]:
    """Ports the OS reports free right now (racy by nature: callers retry on bind failure)."""
    socks = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in socks:
            sock.bind((HOST, 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def read_from(path: Path, start: int) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _tail(path: Path, start: int = 0, lines: int = 30) -> str:
    """The last log lines of this run, without Java stack frames (the messages and causes are what help)."""
    kept = [line for line in read_from(path, start).splitlines() if not _STACK_FRAME.match(line)]
    return "\n".join(kept[-lines:]) or "(broker.log is empty)"


def set_pdeathsig() -> None:
    """In the child: die with SIGTERM when the parent dies, so a killed pytest never leaks a broker."""
    import ctypes

    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # 1 == PR_SET_PDEATHSIG


def terminate(pid: int, timeout: float, *, kill: bool = False, what: str = "process") -> bool:
    """SIGTERM (unless `kill`), then SIGKILL, each waited for; True once `pid` is gone, False if it
    outlived SIGKILL. A signal ignored for its wait is logged, naming `what`."""
    signals = ((signal.SIGKILL, 30.0),) if kill else ((signal.SIGTERM, timeout), (signal.SIGKILL, 30.0))
    for sig, wait_s in signals:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        gone_by = time.monotonic() + wait_s
        while pid_alive(pid) and time.monotonic() < gone_by:
            time.sleep(0.05)
        if not pid_alive(pid):
            return True
        log.warning("%s pid %d ignored %s for %.0fs", what, pid, sig.name, wait_s)
    return False


def saved_pid_port(state_dir: Path, stem: str) -> tuple[int | None, int | None]:
    """(pid, port) of a local service's last start, from `<stem>.pid` and `<stem>.json` in its
    state dir (the S3 server's and the metastore's); None for what is missing or unreadable."""
    try:
        pid: int | None = int((state_dir / f"{stem}.pid").read_text().strip())
    except (OSError, ValueError):
        pid = None
    try:
        port = json.loads((state_dir / f"{stem}.json").read_text()).get("port")
    except (OSError, ValueError, AttributeError):
        port = None
    return pid, port if isinstance(port, int) else None


def runs_java_main(pid: int, main_class: str, marker: Path) -> bool:
    """Guard against a recycled pid: the process is alive and its command line names `main_class`
    and `marker` (its state dir's config). Without /proc (not Linux) the pid file is trusted."""
    if not pid_alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return main_class.encode() in cmdline and str(marker).encode() in cmdline


@contextlib.contextmanager
def state_dir_lock(state_dir: Path) -> Iterator[None]:
    """Serialise up/down on one state dir (two `make kafka-up`, or `make cluster-up`, at once must
    not launch two of the same JVMs)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with (state_dir / ".lock").open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------------------------- readiness


def _probe(bootstrap: str, timeout_s: float) -> None:
    """Ready means a client can create (and delete) a topic, not merely that the port accepts."""
    from kafka import KafkaAdminClient

    timeout_ms = max(1000, int(timeout_s * 1000))
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="replicator-localkafka-probe",
        request_timeout_ms=timeout_ms,
        bootstrap_timeout_ms=timeout_ms,
        reconnect_backoff_max_ms=500,
    )
    try:
        name = f"localkafka-probe-{uuid.uuid4().hex[:12]}"
        admin.create_topics(
            {name: {"num_partitions": 1, "replication_factor": 1}},
            timeout_ms=timeout_ms,
            wait_for_metadata=True,
        )
        admin.delete_topics([name], timeout_ms=timeout_ms)
    finally:
        admin.close()


def _wait_ready(
    proc: subprocess.Popen[bytes] | None,
    pid: int,
    port: int,
    log_path: Path,
    log_start: int,
    deadline: float,
    *,
    await_started_line: bool = True,
) -> None:
    """Poll until a topic can be created; raise as soon as the JVM exits or logs a fatal start-up error.

    The probe waits for this run's "Kafka Server started" line: if our port was taken by some other
    listener, a Kafka client would hang on it instead of us noticing the bind failure in the log.
    """
    last_error: BaseException | None = None
    while True:
        exited = proc.poll() is not None if proc is not None else not pid_alive(pid)
        fresh = read_from(log_path, log_start)
        if exited or _FATAL.search(fresh) or "Address already in use" in fresh:
            tail = _tail(log_path, log_start)
            match = _BIND_FAILURE.search(fresh)
            if match or "Address already in use" in fresh:
                raise _BindError(int(match.group(1)) if match else None, tail)
            how = "fatal error logged" if not exited else f"exit code {proc.returncode if proc else '?'}"
            raise LocalKafkaError(f"Kafka broker failed during start-up ({how}); {log_path}:\n{tail}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LocalKafkaError(
                f"Kafka broker on {HOST}:{port} not ready in time (last error: {last_error!r}); "
                f"{log_path}:\n{_tail(log_path, log_start)}"
            )
        started = not await_started_line or _STARTED in fresh
        if started and _port_accepting(port, timeout=min(1.0, remaining)):
            try:
                _probe(f"{HOST}:{port}", timeout_s=min(5.0, max(1.0, remaining)))
                return
            except Exception as exc:  # not ready yet: metadata not loaded, controller not elected...
                last_error = exc
        time.sleep(0.2)


def _format(java: str, libs: Path, state_dir: Path, cluster_id: str) -> float | None:
    """Format log.dirs once; the JVM is skipped when meta.properties shows it is already formatted."""
    if (state_dir / "data" / "meta.properties").exists():
        return None
    started = time.monotonic()
    cmd = [
        java,
        "-XX:TieredStopAtLevel=1",
        f"-Dlog4j2.configurationFile={state_dir / 'log4j2.properties'}",
        "-cp",
        f"{libs}/*",
        "kafka.tools.StorageTool",
        "format",
        "--standalone",
        f"--cluster-id={cluster_id}",
        "-c",
        str(state_dir / "server.properties"),
    ]
    result = subprocess.run(cmd, cwd=state_dir, capture_output=True, text=True, timeout=120, check=False)
    if result.returncode != 0:
        raise LocalKafkaError(
            f"kafka StorageTool format failed (exit {result.returncode}):\n{result.stdout}{result.stderr}"
        )
    return time.monotonic() - started


def _launch(java: str, libs: Path, state_dir: Path, detach: bool) -> subprocess.Popen[bytes]:
    cmd = [
        java,
        *JVM_FLAGS,
        f"-Dlog4j2.configurationFile={state_dir / 'log4j2.properties'}",
        "-cp",
        f"{libs}/*",  # expanded by java itself, must not be globbed
        "kafka.Kafka",
        str(state_dir / "server.properties"),
    ]
    with (state_dir / "broker.log").open("ab") as log_fh:
        return subprocess.Popen(
            cmd,
            cwd=state_dir,
            stdin=subprocess.DEVNULL,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            start_new_session=detach,
            preexec_fn=None if detach or sys.platform != "linux" else set_pdeathsig,
        )


def _kill_and_wait(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)
