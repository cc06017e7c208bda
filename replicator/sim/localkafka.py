"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) on 127.0.0.1.

Why: the replicator's Kafka paths (offsets, consumer groups, ``offsets_for_times``) must be tested against
real Kafka, not a fake, and there is no Docker. The broker's jars come from Maven Central through
``tools/kafka-broker/pom.xml`` (``make kafka-jars`` -> ``.cache/kafka-libs``). This one module serves both
``make kafka-up`` / ``make kafka-down`` (detached broker, state in ``state/kafka``) and the pytest session
fixture (:func:`running_broker`, private state dir, free ports, always stopped).

Layout of a state dir: ``server.properties``, ``log4j2.properties``, ``data/`` (``log.dirs``),
``broker.log`` (the JVM's stdout+stderr, appended), ``broker.pid``, ``broker.json`` (ports, cluster id),
``.lock`` (serialises concurrent ``up``/``down`` on the same dir).

Recipe check (``/work/shared/notes/kafka-broker.md``, run here with Kafka 4.1.1, log4j2 2.24.3, Java 17.0.15):

True:
- ``kafka_2.13`` + explicit log4j-api/-core/-slf4j-impl give the full runtime classpath (46 jars); no
  ``kafka-tools`` needed. ``kafka.tools.StorageTool`` and ``kafka.Kafka`` are the main classes.
- The §1.5 properties work verbatim with ``format --standalone -t <id> -c <props>`` and
  ``controller.quorum.bootstrap.servers``. RF=1 internal topics: consumer groups and commits work.
- ``format`` accepts any string as cluster id ("not a uuid!" formats fine); we use Kafka's Uuid form.
- A second ``format`` on a formatted dir fails (exit 1, "Use --ignore-formatted"); with
  ``--ignore-formatted`` it exits 0. We skip the JVM entirely once ``data/meta.properties`` exists.
- The §1.6 log4j2.properties works without the YAML jar; "Kafka Server started" is logged at INFO by
  ``kafka.server.KafkaRaftServer``. SIGTERM runs the shutdown hook: clean exit in 0.3-1.5 s.
- kafka-python 3.0.12 works against it: admin results are dicts, ``NewTopic`` is deprecated (we pass
  ``{name: {num_partitions, replication_factor}}``), ``bootstrap_timeout_ms`` is the new setting name;
  ``offsets_for_times``, ``end_offsets``, ``committed`` behave as on any real Kafka.
- ``-Xms256m -Xmx512m`` with the 2 MB dedupe buffer is enough; RSS right after start is about 230 MB.

False or missing:
- Timing was pessimistic. Measured on a 2-core VM: idle, format takes 0.5-0.7 s and launch-to-ready
  (a topic create+delete succeeds) 1.4-1.8 s; under load average 3-5 from other jobs, format takes
  0.9-1.1 s, launch-to-ready 2.7-3.5 s (about 4 s for a fresh ``start()``, occasionally 7 s). The notes
  said 1-2 s and 3-8 s.
- After a fatal start-up error (e.g. bind failure) the JVM logs "Exiting Kafka due to fatal exception during
  startup" at once, but then lingers about 10 s in shutdown hooks before exiting with code 1. So we watch
  the log and kill it at once instead of waiting for ``poll()``.
- Not in the notes: restarting after an *unclean* stop (SIGKILL, crash, or a failed attempt) waits out the
  dead incarnation's broker session (``broker.session.timeout.ms``, default 9 s): about 11.5 s instead of 2 s.
  The default stays, because a shorter session risks fencing the only broker when Spark starves the
  CPU. A retry on a dir this call formatted re-formats it instead.
- A bind race against a port some other process *listens* on makes a Kafka client hang on that foreign
  listener. So readiness probing waits for this run's "Kafka Server started" line.
- The notes imply the ``--standalone`` voter record pins the controller endpoint. Restarting the same data
  with a different controller port works (a single voter elects itself). We still reuse the last ports.
- The notes' example pom pins log4j2 2.25.3; Kafka 4.1.1 itself uses 2.24.3, which the project pom pins.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicator.errors import ReplicatorError

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
DEFAULT_PORT = 9092
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LIBS = REPO_ROOT / ".cache" / "kafka-libs"
DEFAULT_STATE_DIR = REPO_ROOT / "state" / "kafka"
LIBS_ENV = "REPLICATOR_KAFKA_LIBS"
PORT_ENV = "KAFKA_PORT"

JVM_FLAGS = ("-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
_BIND_FAILURE = re.compile(r"failed to bind to [^\s:]*:(\d+)", re.IGNORECASE)
# After a fatal start-up error the JVM lingers ~10 s in shutdown hooks; these lines let us act at once.
_FATAL = re.compile(r"Exiting Kafka due to fatal exception|Fatal error during (?:broker|controller) startup")
_STARTED = "Kafka Server started"  # logged at INFO by kafka.server.KafkaRaftServer (see _LOG4J2)
_STACK_FRAME = re.compile(r"^\s+(?:at |\.\.\. \d+ more)")
_MAX_ATTEMPTS = 5


class LocalKafkaError(ReplicatorError):
    """The local broker could not be set up, started or stopped."""


@dataclass(frozen=True)
class BrokerHandle:
    """A running broker; ``process`` is set only in the process that launched it."""

    state_dir: Path
    pid: int
    port: int
    controller_port: int
    already_running: bool = False
    format_seconds: float | None = None
    ready_seconds: float | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, compare=False, repr=False)
    sasl_port: int | None = None  # a SASL_PLAINTEXT (PLAIN) listener, when started with sasl_users

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap_servers`` string for clients (the broker advertises 127.0.0.1)."""
        return f"{HOST}:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        """The SASL_PLAINTEXT listener's address (only for a broker started with ``sasl_users``)."""
        if self.sasl_port is None:
            raise LocalKafkaError(f"the broker of {self.state_dir} has no SASL listener (start it with sasl_users)")
        return f"{HOST}:{self.sasl_port}"


class _BindError(LocalKafkaError):
    def __init__(self, port: int | None, message: str) -> None:
        super().__init__(message)
        self.port = port


# ---------------------------------------------------------------------------------------------- paths


def resolve_libs(libs_dir: Path | str | None = None) -> Path:
    """Return the broker classpath dir (arg > $REPLICATOR_KAFKA_LIBS > .cache/kafka-libs); fail if empty."""
    raw = libs_dir if libs_dir is not None else os.environ.get(LIBS_ENV) or DEFAULT_LIBS
    libs = Path(raw).expanduser().resolve()
    if not libs.is_dir() or not any(libs.glob("kafka_2.13-*.jar")) or not any(libs.glob("log4j-core-*.jar")):
        raise LocalKafkaError(
            f"Kafka broker jars not found in {libs} (need kafka_2.13-*.jar and log4j-core-*.jar): "
            f"run `make kafka-jars` (or point ${LIBS_ENV} at a directory holding them)"
        )
    return libs


def _java() -> str:
    """Prefer $JAVA_HOME/bin/java like Kafka's own scripts, else java on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise LocalKafkaError("`java` not found on PATH and $JAVA_HOME is not set: Kafka 4.x needs Java 17+")
    return found


# ---------------------------------------------------------------------------------------------- config


def _jaas_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _sasl_properties(sasl_users: Mapping[str, str]) -> list[str]:
    """PLAIN authentication on the SASL_PLAINTEXT listener for these users (a test fixture's
    broker: the passwords sit in its server.properties like in any PLAIN setup)."""
    users = " ".join(f"user_{name}={_jaas_quote(pw)}" for name, pw in sasl_users.items())
    jaas = f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"
    # A .properties value: backslash is its escape character too.
    return ["sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=" + jaas.replace("\\", "\\\\")]


def _server_properties(
    state_dir: Path, port: int, controller_port: int, sasl_port: int | None = None,
    sasl_users: Mapping[str, str] | None = None,
) -> str:
    """Single-node KRaft config; RF=1 internal topics, else groups/transactions hang."""
    listeners = f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}"
    protocols = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
    if sasl_port is not None:
        listeners += f",SASL_PLAINTEXT://{HOST}:{sasl_port}"
        protocols += ",SASL_PLAINTEXT:SASL_PLAINTEXT"
    return "\n".join(
        [
            "# Written by replicator.sim.localkafka; rewritten on every start.",
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers={HOST}:{controller_port}",
            f"listeners={listeners}",
            f"advertised.listeners={listeners}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            f"listener.security.protocol.map={protocols}",
            *(_sasl_properties(sasl_users or {}) if sasl_port is not None else []),
            f"log.dirs={state_dir / 'data'}",
            "num.partitions=1",
            "auto.create.topics.enable=true",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            # The default 128 MB dedupe buffer is heap, allocated when the cleaner starts.
            "log.cleaner.dedupe.buffer.size=2097152",
            "",
        ]
    )


_LOG4J2 = """\
# Written by replicator.sim.localkafka: WARN to stdout (-> broker.log), plus the "Kafka Server started" line.
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.krs.name = kafka.server.KafkaRaftServer
logger.krs.level = INFO
"""


def _read_meta(state_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((state_dir / "broker.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_meta(state_dir: Path, meta: dict[str, Any]) -> None:
    tmp = state_dir / "broker.json.tmp"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    tmp.replace(state_dir / "broker.json")


def _read_pid(state_dir: Path) -> int | None:
    try:
        return int((state_dir / "broker.pid").read_text().strip())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------- processes


def _reap(pid: int) -> None:
    """Collect our own dead child so it does not linger as a zombie (which os.kill(pid, 0) sees as alive)."""
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


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


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


def _read_from(path: Path, start: int) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _tail(path: Path, start: int = 0, lines: int = 30) -> str:
    """The last log lines of this run, without Java stack frames (the messages and causes are what help)."""
    kept = [line for line in _read_from(path, start).splitlines() if not _STACK_FRAME.match(line)]
    return "\n".join(kept[-lines:]) or "(broker.log is empty)"


def _set_pdeathsig() -> None:
    """In the child: die with SIGTERM when the parent dies, so a killed pytest never leaks a broker."""
    import ctypes

    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # 1 == PR_SET_PDEATHSIG


@contextlib.contextmanager
def _locked(state_dir: Path) -> Iterator[None]:
    """Serialise up/down on one state dir (two `make kafka-up` at once must not launch two JVMs)."""
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
        fresh = _read_from(log_path, log_start)
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


# ---------------------------------------------------------------------------------------------- API


def status(state_dir: Path | str) -> BrokerHandle | None:
    """The broker of this state dir if its process is alive and its port accepts connections, else None."""
    state_dir = Path(state_dir).resolve()
    pid = _read_pid(state_dir)
    meta = _read_meta(state_dir)
    port = meta.get("port")
    if pid is None or not isinstance(port, int) or not _is_our_broker(pid, state_dir):
        return None
    if not _port_accepting(port):
        return None
    sasl_port = meta.get("sasl_port")
    return BrokerHandle(state_dir, pid, port, int(meta.get("controller_port", 0)), already_running=True,
                        sasl_port=sasl_port if isinstance(sasl_port, int) else None)


def new_cluster_id() -> str:
    """A Kafka-style base64 UUID that never starts with '-' (StorageTool would read it as a flag).

    Kafka's own Uuid.randomUuid() re-draws such ids for the same reason.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


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
            preexec_fn=None if detach or sys.platform != "linux" else _set_pdeathsig,
        )


def _kill_and_wait(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def start(
    state_dir: Path | str,
    port: int | None = None,
    controller_port: int | None = None,
    timeout: float = 90.0,
    *,
    libs_dir: Path | str | None = None,
    detach: bool = True,
    sasl_users: Mapping[str, str] | None = None,
) -> BrokerHandle:
    """Start the broker for ``state_dir`` (no-op if it already runs) and return once a topic can be created.

    ``sasl_users`` (name -> password) adds a SASL_PLAINTEXT listener with PLAIN authentication on
    a free port (``BrokerHandle.sasl_bootstrap``), for testing clients' SASL settings.

    ``port``/``controller_port`` of None mean "pick": the controller port is reused from the last start of
    this state dir when still free. Auto-picked ports are re-picked if the JVM fails to bind them; an
    explicit port that is taken is an error. ``detach`` puts the JVM in its own session so it outlives
    the caller (``make kafka-up``); otherwise the JVM dies with the caller.
    """
    state_dir = Path(state_dir).resolve()
    deadline = time.monotonic() + timeout
    with _locked(state_dir):
        running = status(state_dir)
        if running is not None:
            return running
        old_pid = _read_pid(state_dir)
        meta = _read_meta(state_dir)
        if old_pid is not None and _is_our_broker(old_pid, state_dir) and isinstance(meta.get("port"), int):
            # Alive but not yet accepting (e.g. another `up` is mid-start or a restart): wait, don't relaunch.
            log_path = state_dir / "broker.log"
            log_start = log_path.stat().st_size if log_path.exists() else 0
            try:
                _wait_ready(None, old_pid, meta["port"], log_path, log_start, deadline, await_started_line=False)
            except LocalKafkaError as exc:
                raise LocalKafkaError(f"{exc}\n(broker pid {old_pid} is not answering; `down` stops it)") from None
            return BrokerHandle(
                state_dir, old_pid, meta["port"], int(meta.get("controller_port", 0)), already_running=True,
                sasl_port=meta["sasl_port"] if isinstance(meta.get("sasl_port"), int) else None,
            )
        (state_dir / "broker.pid").unlink(missing_ok=True)

        libs = resolve_libs(libs_dir)
        java = _java()
        cluster_id = str(meta.get("cluster_id") or "")
        if not cluster_id:
            cluster_id = new_cluster_id()
        (state_dir / "log4j2.properties").write_text(_LOG4J2)

        # Unset ports default to the last ones of this state dir (stable addresses across restarts), but
        # stay "auto": if they are taken, other free ones are picked.
        want_port, want_ctl = port, controller_port
        last_port, last_ctl = meta.get("port"), meta.get("controller_port")
        if want_port is None and isinstance(last_port, int) and last_port != controller_port and _port_free(last_port):
            want_port = last_port
        if want_ctl is None and isinstance(last_ctl, int) and last_ctl != want_port and _port_free(last_ctl):
            want_ctl = last_ctl
        for name, explicit in (("port", port), ("controller port", controller_port)):
            if explicit is not None and not _port_free(explicit):
                raise LocalKafkaError(f"{name} {HOST}:{explicit} is already in use by another process")

        format_seconds: float | None = None
        # A failed attempt counts as an unclean stop: restarting on its data would wait out the dead
        # incarnation's broker session (broker.session.timeout.ms, 9 s). A dir we formatted ourselves holds
        # nothing yet, so a retry re-formats it instead.
        fresh = not (state_dir / "data" / "meta.properties").exists()
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            picked = free_ports(3)
            use_port = want_port if want_port is not None else picked[0]
            use_ctl = want_ctl if want_ctl is not None else next(p for p in picked if p != use_port)
            use_sasl = next(p for p in picked if p not in (use_port, use_ctl)) if sasl_users else None
            (state_dir / "server.properties").write_text(
                _server_properties(state_dir, use_port, use_ctl, use_sasl, sasl_users))
            fmt = _format(java, libs, state_dir, cluster_id)
            format_seconds = fmt if fmt is not None else format_seconds
            _write_meta(state_dir, {"port": use_port, "controller_port": use_ctl, "cluster_id": cluster_id,
                                    "sasl_port": use_sasl})

            log_path = state_dir / "broker.log"
            log_start = log_path.stat().st_size if log_path.exists() else 0
            launched = time.monotonic()
            proc = _launch(java, libs, state_dir, detach)
            (state_dir / "broker.pid").write_text(f"{proc.pid}\n")
            try:
                _wait_ready(proc, proc.pid, use_port, log_path, log_start, deadline)
            except _BindError as exc:
                _kill_and_wait(proc)
                (state_dir / "broker.pid").unlink(missing_ok=True)
                fixed = {p for p in (port, controller_port) if p is not None}
                if exc.port in fixed or (exc.port is None and fixed):
                    raise LocalKafkaError(
                        f"Kafka could not bind {HOST}:{exc.port}: already in use; {log_path}:\n{exc}"
                    ) from None
                if exc.port is None or exc.port == want_port:
                    want_port = port  # a remembered port was taken meanwhile: pick another
                if exc.port is None or exc.port == want_ctl:
                    want_ctl = controller_port
                if fresh:
                    shutil.rmtree(state_dir / "data", ignore_errors=True)
                log.warning("Kafka could not bind port %s (attempt %d): retrying on new ports", exc.port, attempt)
                continue
            except BaseException:
                _kill_and_wait(proc)
                (state_dir / "broker.pid").unlink(missing_ok=True)
                raise
            return BrokerHandle(
                state_dir,
                proc.pid,
                use_port,
                use_ctl,
                format_seconds=format_seconds,
                ready_seconds=time.monotonic() - launched,
                process=proc,
                sasl_port=use_sasl,
            )
        raise LocalKafkaError(f"Kafka could not bind free ports after {_MAX_ATTEMPTS} attempts")


def stop(state_dir: Path | str, timeout: float = 30.0) -> bool:
    """Stop the broker of ``state_dir`` and wait until its process is gone; False if none was running.

    SIGTERM first (Kafka's shutdown hook flushes and closes the logs cleanly), SIGKILL after ``timeout``.
    """
    state_dir = Path(state_dir).resolve()
    if not state_dir.is_dir():
        return False
    with _locked(state_dir):
        pid = _read_pid(state_dir)
        if pid is None or not _is_our_broker(pid, state_dir):
            (state_dir / "broker.pid").unlink(missing_ok=True)
            return False
        for sig, wait_s in ((signal.SIGTERM, timeout), (signal.SIGKILL, 30.0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            gone_by = time.monotonic() + wait_s
            while pid_alive(pid) and time.monotonic() < gone_by:
                time.sleep(0.05)
            if not pid_alive(pid):
                break
            log.warning("Kafka broker pid %d ignored %s for %.0fs", pid, sig.name, wait_s)
        else:
            raise LocalKafkaError(f"Kafka broker pid {pid} did not exit even after SIGKILL")
        (state_dir / "broker.pid").unlink(missing_ok=True)
        return True


@contextlib.contextmanager
def running_broker(base_dir: Path | str, timeout: float = 90.0, *, libs_dir: Path | str | None = None) -> Iterator[str]:
    """Yield the bootstrap address of a fresh broker on free ports under ``base_dir``; always stop it.

    The JVM is a non-detached child that also gets SIGTERM if this process dies, so a crashed or killed
    test run does not leak brokers. On exit the data dir is removed; broker.log stays for post-mortems.
    """
    state_dir = Path(base_dir).resolve() / f"kafka-{uuid.uuid4().hex[:8]}"
    handle = start(state_dir, timeout=timeout, libs_dir=libs_dir, detach=False)
    try:
        yield handle.bootstrap
    finally:
        try:
            stop(state_dir)
        finally:
            if handle.process is not None:
                _kill_and_wait(handle.process)  # no-op when stop() succeeded; reaps the Popen
            shutil.rmtree(state_dir / "data", ignore_errors=True)


# ---------------------------------------------------------------------------------------------- CLI


def _default_port() -> int:
    raw = os.environ.get(PORT_ENV, "").strip()
    if not raw:
        return DEFAULT_PORT
    try:
        value = int(raw)
    except ValueError:
        raise LocalKafkaError(f"${PORT_ENV}={raw!r} is not a port number") from None
    if not 0 < value < 65536:
        raise LocalKafkaError(f"${PORT_ENV}={value} is out of range")
    return value


def main(argv: list[str] | None = None) -> int:
    """``python -m replicator.sim.localkafka up|down|status``: used by ``make kafka-up`` / ``make kafka-down``."""
    parser = argparse.ArgumentParser(
        prog="python -m replicator.sim.localkafka",
        description="Run a local single-node Apache Kafka broker (KRaft) on 127.0.0.1.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    state_help = f"broker state directory (default: {DEFAULT_STATE_DIR})"
    up = sub.add_parser("up", help="start the broker (no-op if running); print the bootstrap address")
    up.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help=state_help)
    port_help = f"client port (default: ${PORT_ENV} or {DEFAULT_PORT})"
    up.add_argument("--port", type=int, default=None, help=port_help)
    up.add_argument("--controller-port", type=int, default=None, help="KRaft controller port (default: pick)")
    libs_help = f"broker jars (default: ${LIBS_ENV} or {DEFAULT_LIBS})"
    up.add_argument("--libs", type=Path, default=None, help=libs_help)
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for readiness (default: 90)")
    down = sub.add_parser("down", help="stop the broker and wait until it is gone (no-op if not running)")
    down.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help=state_help)
    down.add_argument("--timeout", type=float, default=30.0, help="seconds before SIGKILL (default: 30)")
    st = sub.add_parser("status", help="print the bootstrap address and exit 0 if running, else exit 1")
    st.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR, help=state_help)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="localkafka: %(message)s")

    try:
        if args.command == "up":
            port = args.port if args.port is not None else _default_port()
            handle = start(args.state_dir, port, args.controller_port, args.timeout, libs_dir=args.libs)
            if handle.already_running:
                note = "already running"
                if handle.port != port:
                    note += f" on port {handle.port}, not {port} (run `down` first to change it)"
                print(f"kafka: {note} (pid {handle.pid}, state {handle.state_dir})", file=sys.stderr)
            else:
                secs = handle.format_seconds
                fmt = f"formatted in {secs:.1f}s, " if secs is not None else ""
                ready = handle.ready_seconds or 0.0
                print(
                    f"kafka: started pid {handle.pid} ({fmt}ready in {ready:.1f}s); "
                    f"log {handle.state_dir / 'broker.log'}",
                    file=sys.stderr,
                )
            print(handle.bootstrap, flush=True)
            return 0
        if args.command == "down":
            stopped = stop(args.state_dir, args.timeout)
            print("kafka: stopped" if stopped else "kafka: not running", file=sys.stderr)
            return 0
        handle_or_none = status(args.state_dir)
        if handle_or_none is None:
            print("kafka: not running", file=sys.stderr)
            return 1
        print(handle_or_none.bootstrap, flush=True)
        print(f"kafka: running (pid {handle_or_none.pid}, state {handle_or_none.state_dir})", file=sys.stderr)
        return 0
    except ReplicatorError as exc:
        print(f"kafka {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
