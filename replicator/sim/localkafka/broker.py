"""Start, stop and query the broker of a state dir; `running_broker` for test fixtures."""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

from replicator.sim.localkafka.config import (
    _LOG4J2,
    _MAX_ATTEMPTS,
    HOST,
    BrokerHandle,
    LocalKafkaError,
    _BindError,
    _java,
    _read_meta,
    _read_pid,
    _server_properties,
    _write_meta,
    new_cluster_id,
    resolve_libs,
)
from replicator.sim.localkafka.process import (
    _format,
    _is_our_broker,
    _kill_and_wait,
    _launch,
    _port_accepting,
    _wait_ready,
    free_ports,
    port_free,
    state_dir_lock,
    terminate,
)

log = logging.getLogger(__name__)


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
    with state_dir_lock(state_dir):
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
        if want_port is None and isinstance(last_port, int) and last_port != controller_port and port_free(last_port):
            want_port = last_port
        if want_ctl is None and isinstance(last_ctl, int) and last_ctl != want_port and port_free(last_ctl):
            want_ctl = last_ctl
        for name, explicit in (("port", port), ("controller port", controller_port)):
            if explicit is not None and not port_free(explicit):
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
    with state_dir_lock(state_dir):
        pid = _read_pid(state_dir)
        if pid is None or not _is_our_broker(pid, state_dir):
            (state_dir / "broker.pid").unlink(missing_ok=True)
            return False
        if not terminate(pid, timeout, what="Kafka broker"):
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
