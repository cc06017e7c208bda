"""A real S3-compatible server on 127.0.0.1: S3Proxy over a local directory (``make s3-up`` /
``make s3-down``; ``python -m replicator.sim.locals3 up|down|status``), for warehouses on object
storage (``s3a://warehouse/<prefix>``) without a cloud account. Its jars come from Maven Central
through ``tools/s3proxy/pom.xml`` (``make s3-jars`` -> ``.cache/s3proxy-libs``).

``up`` prints the endpoint ``http://127.0.0.1:<port>`` (``$S3_PORT``, default 9000) and the
environment to export (fixed test credentials: ``ACCESS_KEY`` / ``SECRET_KEY``, region ``REGION``,
``REPLICATOR_S3_ENDPOINT``), as shell lines: ``eval "$(python -m replicator.sim.locals3 up)"``.
A bucket is a directory under ``<state>/data`` (S3Proxy's ``filesystem`` back-end) and its objects
are plain files; the bucket ``warehouse`` is there from the start.

The server runs in its own session (a closed terminal does not stop it); its pid, port, settings
and log live in the state directory (default ``state/s3``), and ``down`` stops it (SIGTERM, then
SIGKILL). Tests use :class:`LocalS3` (``tests/s3_fixtures.py``): a server on a free port in a
temporary directory, which dies with the test process, and which a test may stop and start again on
the same port and data.

Layout of a state dir: ``s3proxy.conf`` (S3Proxy's properties), ``conf/logback.xml``, ``data/``
(one directory per bucket), ``s3proxy.log`` (the JVM's stdout and stderr, appended),
``s3proxy.pid``, ``s3proxy.json`` (the port), ``.lock`` (serialises ``up``/``down``).

Facts this module relies on (S3Proxy 4.1.0, Java 17):
- S3Proxy's jar has no Main-Class: ``java -cp "conf:libs/*" org.gaul.s3proxy.Main --properties F``.
  Without a ``logback.xml`` on the class path it logs at DEBUG; ours logs warnings, plus Jetty's
  ``Started ServerConnector ... {127.0.0.1:PORT}`` line, which readiness waits for (a listener of
  another process on the port would answer HTTP too). A port in use: ``Failed to bind``, exit 1.
- HTTP answers 1.5-2 s after launch with the quick (C1) compiler only, 3-3.5 s without it; SIGTERM
  stops it in well under a second; about 110 MiB RSS.
- Authorization ``aws-v2-or-v4``: a wrong secret is refused (``SignatureDoesNotMatch``).
  ``If-None-Match: *`` and ``If-Match`` are checked during the write (412 when they fail; 16
  concurrent create-if-absent writers on one key: exactly one wins). S3Proxy 3.x lacked both.
- The filesystem back-end takes a bucket directory that others may read (mode 755) as public-read
  (anonymous listing allowed). Buckets made here are mode 700: private, as CreateBucket's are.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from replicator.errors import ReplicatorError
from replicator.sim.localkafka.config import java_executable
from replicator.sim.localkafka.process import (
    env_port,
    free_ports,
    pid_alive,
    port_free,
    read_from,
    set_pdeathsig,
)
from replicator.sim.service import LocalService, kill_child, tie_to_parent

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STATE_DIR = REPO_ROOT / "state" / "s3"
DEFAULT_LIBS = REPO_ROOT / ".cache" / "s3proxy-libs"
LIBS_ENV = "REPLICATOR_S3PROXY_LIBS"
PORT_ENV = "S3_PORT"
DEFAULT_PORT = 9000
ENDPOINT_ENV = "REPLICATOR_S3_ENDPOINT"
# Fixed credentials of this test server (not secrets: it listens on 127.0.0.1 only).
ACCESS_KEY = "replicator"
SECRET_KEY = "replicator-secret"
REGION = "us-east-1"
DEFAULT_BUCKET = "warehouse"
MAIN_CLASS = "org.gaul.s3proxy.Main"
JVM_FLAGS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")

_MAX_ATTEMPTS = 5  # launches on auto-picked ports that another process took meanwhile
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_BIND_FAILURE = "Failed to bind"
_LOGBACK = """\
<!-- Written by replicator.sim.locals3: warnings only, plus Jetty's "Started ServerConnector" line. -->
<configuration>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36} - %msg%n</pattern></encoder>
  </appender>
  <logger name="org.gaul.shaded.org.eclipse.jetty.server.AbstractConnector" level="INFO"/>
  <root level="WARN"><appender-ref ref="STDOUT"/></root>
</configuration>
"""


class LocalS3Error(ReplicatorError):
    """The local S3-compatible server could not be set up, started or stopped."""


class _BindError(LocalS3Error):
    pass


def resolve_libs(libs_dir: Path | str | None = None) -> Path:
    """The S3Proxy classpath dir (arg > $REPLICATOR_S3PROXY_LIBS > .cache/s3proxy-libs); fail if empty."""
    raw = libs_dir if libs_dir is not None else os.environ.get(LIBS_ENV) or DEFAULT_LIBS
    libs = Path(raw).expanduser().resolve()
    if not libs.is_dir() or not any(libs.glob("s3proxy-*.jar")):
        raise LocalS3Error(f"S3Proxy jars not found in {libs}: run `make s3-jars` (or point ${LIBS_ENV} at a "
                           "directory holding them)")
    return libs


_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through $http_proxy


def _http_answers(port: int, timeout: float = 1.0) -> bool:
    """Whether an S3 server answers on `port` (anonymous GET /: S3Proxy says 403 AccessDenied)."""
    try:
        with _DIRECT.open(f"http://{HOST}:{port}/", timeout=timeout) as resp:
            return resp.headers.get("x-amz-request-id") is not None
    except urllib.error.HTTPError as exc:
        return exc.headers.get("x-amz-request-id") is not None
    except OSError:
        return False


def _properties(port: int, data_dir: Path) -> str:
    return "\n".join([
        "# Written by replicator.sim.locals3; rewritten on every start.",
        f"s3proxy.endpoint=http://{HOST}:{port}",
        "s3proxy.authorization=aws-v2-or-v4",
        f"s3proxy.identity={ACCESS_KEY}",
        f"s3proxy.credential={SECRET_KEY}",
        "jclouds.provider=filesystem",
        f"jclouds.filesystem.basedir={data_dir}",
        "",
    ])


def _tail(text: str, lines: int = 20) -> str:
    kept = [line for line in text.splitlines() if not re.match(r"^\s+(?:at |\.\.\. \d+ more)", line)]
    return "\n".join(kept[-lines:]) or "(the log is empty)"


class LocalS3(LocalService):
    """One S3Proxy server: its state dir (settings, pid, log), data dir and port.

    ``port=None`` picks one: the last port of this state dir while it is free, else a free one;
    once started, the server keeps its port across ``stop()`` / ``start()``.
    ``detach`` puts the JVM in its own session so it outlives the caller (``make s3-up``);
    otherwise, started from the main thread, it gets SIGTERM when the caller dies (a test process;
    started from another thread it is not tied, since Linux would signal it when that thread ends). ``stop()``
    then ``start()`` runs the same server again on the same port and data.
    """

    NAME = "S3Proxy"
    STEM = "s3proxy"
    MAIN_CLASS = MAIN_CLASS
    ERROR = LocalS3Error

    def __init__(self, state_dir: Path | str = DEFAULT_STATE_DIR, port: int | None = None, *,
                 libs_dir: Path | str | None = None, detach: bool = True,
                 bucket: str | None = DEFAULT_BUCKET) -> None:
        super().__init__(state_dir, port, libs_dir=libs_dir, detach=detach)
        self.data_dir = self.state_dir / "data"
        self.bucket = bucket

    # -- addresses -------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:PORT``: the endpoint URL for S3 clients (path-style addressing)."""
        return f"http://{HOST}:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment that points AWS clients and the replicator at this server."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION,
                ENDPOINT_ENV: self.endpoint}

    def warehouse_url(self, prefix: str, bucket: str | None = None) -> str:
        """``s3a://<bucket>/<prefix>`` (the default bucket unless another is named)."""
        name = bucket or self.bucket or DEFAULT_BUCKET
        return f"s3a://{name}/{prefix.strip('/')}"

    # -- buckets ---------------------------------------------------------------------------------

    def create_bucket(self, name: str) -> str:
        """Create bucket `name` (a no-op when it exists) and return its name; works whether or not
        the server runs. Private (mode 700): the filesystem back-end lets anyone list a bucket
        directory others may read."""
        if not _BUCKET_NAME.fullmatch(name) or ".." in name:
            raise LocalS3Error(f"{name!r} is not a valid bucket name (3-63 of a-z, 0-9, '.', '-')")
        path = self.data_dir / name
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.chmod(0o700)
        return name

    # -- process ---------------------------------------------------------------------------------

    def _marker(self) -> Path:
        return self.state_dir / "s3proxy.conf"

    def _answers(self, port: int) -> bool:
        return _http_answers(port)

    def _await_adopted(self, pid: int, port: int, deadline: float) -> None:
        self._wait(None, pid, port, 0, deadline, await_started_line=False)

    def _launch_ready(self, last_port: int | None, deadline: float) -> None:
        libs, java = resolve_libs(self.libs_dir), java_executable(LocalS3Error, "S3Proxy")
        (self.state_dir / "conf").mkdir(parents=True, exist_ok=True)
        (self.state_dir / "conf" / "logback.xml").write_text(_LOGBACK)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.bucket:
            self.create_bucket(self.bucket)
        explicit = self._wanted_port
        if explicit is not None and not port_free(explicit):
            raise LocalS3Error(f"port {HOST}:{explicit} is already in use by another process")
        want = explicit if explicit is not None else (last_port if last_port and port_free(last_port) else None)
        for _attempt in range(_MAX_ATTEMPTS):
            port = want if want is not None else free_ports(1)[0]
            conf = self.state_dir / "s3proxy.conf"
            conf.write_text(_properties(port, self.data_dir))
            (self.state_dir / "s3proxy.json").write_text(json.dumps({"port": port}) + "\n")
            log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
            cmd = [java, *JVM_FLAGS, "-cp", f"{self.state_dir / 'conf'}:{libs}/*", MAIN_CLASS,
                   "--properties", str(conf)]
            launched = time.monotonic()
            with self.log_path.open("ab") as log:
                proc = subprocess.Popen(cmd, cwd=self.state_dir, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=self.detach,
                                        preexec_fn=None if self.detach or not tie_to_parent() else set_pdeathsig)
            self.pid_path.write_text(f"{proc.pid}\n")
            try:
                self._wait(proc, proc.pid, port, log_start, deadline)
            except _BindError:
                kill_child(proc)
                self.pid_path.unlink(missing_ok=True)
                if explicit is not None:
                    raise
                want = None  # an auto-picked port was taken meanwhile: pick another
                continue
            except BaseException:
                kill_child(proc)
                self.pid_path.unlink(missing_ok=True)
                raise
            self.pid, self._port, self._process = proc.pid, port, proc
            self._wanted_port = port  # a restart of this server uses the same port
            self.ready_seconds = time.monotonic() - launched
            return
        raise LocalS3Error(f"S3Proxy could not bind a free port after {_MAX_ATTEMPTS} attempts")

    def _wait(self, proc: subprocess.Popen[bytes] | None, pid: int, port: int, log_start: int, deadline: float,
              *, await_started_line: bool = True) -> None:
        """Poll until the server answers HTTP; raise as soon as the JVM exits. This run's "Started
        ServerConnector" line must be logged first: a foreign listener on the port answers too."""
        while True:
            fresh = read_from(self.log_path, log_start)
            exited = proc.poll() is not None if proc is not None else not pid_alive(pid)
            if _BIND_FAILURE in fresh:
                raise _BindError(f"S3Proxy could not bind {HOST}:{port}: already in use; {self.log_path}:\n"
                                 f"{_tail(fresh)}")
            if exited:
                code = proc.returncode if proc is not None else "?"
                raise LocalS3Error(f"S3Proxy exited during start-up (exit code {code}); {self.log_path}:\n"
                                   f"{_tail(fresh)}")
            started = not await_started_line or f"{{{HOST}:{port}}}" in fresh
            if started and _http_answers(port):
                return
            if time.monotonic() > deadline:
                raise LocalS3Error(f"S3Proxy on {HOST}:{port} did not answer in time (pid {pid}; `down` stops it); "
                                   f"{self.log_path}:\n{_tail(fresh)}")
            time.sleep(0.1)


# ---------------------------------------------------------------------------------------------- API


def start(state_dir: Path | str = DEFAULT_STATE_DIR, port: int | None = None, timeout: float = 60.0, *,
          libs_dir: Path | str | None = None) -> LocalS3:
    """Start the (detached) server of `state_dir`, or return the running one (``already_running``)."""
    return LocalS3(state_dir, port, libs_dir=libs_dir).start(timeout)


def stop(state_dir: Path | str = DEFAULT_STATE_DIR, timeout: float = 15.0) -> bool:
    """Stop the server of `state_dir`; False when none was running."""
    if not Path(state_dir).is_dir():
        return False
    return LocalS3(state_dir).stop(timeout)


def status(state_dir: Path | str = DEFAULT_STATE_DIR) -> LocalS3 | None:
    """The running server of `state_dir`, or None."""
    if not Path(state_dir).is_dir():
        return None
    server = LocalS3(state_dir)
    if not server.running():
        return None
    server.already_running = True
    return server


def _exports(server: LocalS3) -> str:
    lines = [f"# S3-compatible server (S3Proxy) at {server.endpoint}; bucket {server.bucket or DEFAULT_BUCKET}, "
             f"data in {server.data_dir}",
             f"# a warehouse URL: {server.warehouse_url('<prefix>')}; "
             'set these with: eval "$(python -m replicator.sim.locals3 up)"']
    lines += [f"export {name}={value}" for name, value in server.env().items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replicator.sim.locals3",
                                     description="Run a local S3-compatible server (S3Proxy) on 127.0.0.1.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("up", "start the server (no-op if running); print the endpoint and the environment"),
                            ("down", "stop the server (no-op if not running)"),
                            ("status", "print the endpoint and exit 0 if running, else exit 1")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                         help=f"settings, pid, log and data (default: {DEFAULT_STATE_DIR})")
        if name == "up":
            cmd.add_argument("--port", type=int, default=None, help=f"port (default: ${PORT_ENV} or {DEFAULT_PORT})")
            cmd.add_argument("--libs", type=Path, default=None, help=f"S3Proxy jars (default: ${LIBS_ENV} or "
                                                                     f"{DEFAULT_LIBS})")
            cmd.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default: 60)")
        if name == "down":
            cmd.add_argument("--timeout", type=float, default=15.0, help="seconds before SIGKILL (default: 15)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "up":
            port = args.port if args.port is not None else env_port(PORT_ENV, DEFAULT_PORT)
            server = LocalS3(args.state_dir, port, libs_dir=args.libs)
            if server.running():
                note = "already running"
                if server.port != port:
                    note += f" on port {server.port}, not {port} (run `down` first to change it)"
            else:
                server.start(args.timeout)
                note = ("already running" if server.already_running
                        else f"started pid {server.pid} (ready in {server.ready_seconds or 0.0:.1f}s)")
            print(f"s3: {note}; log {server.log_path}", file=sys.stderr)
            print(_exports(server), flush=True)
            return 0
        if args.command == "down":
            print("s3: stopped" if stop(args.state_dir, args.timeout) else "s3: not running", file=sys.stderr)
            return 0
        running = status(args.state_dir)
        if running is None:
            print("s3: not running", file=sys.stderr)
            return 1
        print(running.endpoint, flush=True)
        print(f"s3: running (pid {running.pid}, data {running.data_dir})", file=sys.stderr)
        return 0
    except ReplicatorError as exc:
        print(f"s3 {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

