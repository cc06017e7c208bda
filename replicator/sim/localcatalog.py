"""A real Hive metastore service on 127.0.0.1 (``make catalog-up`` / ``make catalog-down``;
``python -m replicator.sim.localcatalog up|down|status``): the catalog that several processes (a
follower, a notebook, a BI tool's Spark) share, so tables are found by name. Spark's own embedded
Derby metastore serves one JVM at a time and cannot be shared.

The service is Hive 2.3's Thrift metastore from the jars pyspark ships, plus one jar pyspark lacks
(``com.lmax:disruptor``, Hive's async logging: ``make catalog-jars`` -> ``.cache/metastore-libs``).
Its database is an embedded Derby *inside the service*, in the state directory; every client talks
Thrift to it. ``up`` prints the URI to pass as ``--catalog-uri`` (``thrift://127.0.0.1:<port>``,
``$CATALOG_PORT``, default 9083).

Layout of a state dir (default ``state/catalog``): ``conf/hive-site.xml``, ``metastore_db/``
(Derby), ``warehouse/`` (managed tables; the replicator registers external ones only),
``metastore.log``, ``metastore.pid``, ``metastore.json`` (the port), ``.lock``.

Facts this module relies on (Hive 2.3.10 from pyspark 4.0, Java 17): the server class is
``org.apache.hadoop.hive.metastore.HiveMetaStore`` and ``-p PORT`` sets its port; it creates its
schema on first start (``datanucleus.schema.autoCreateAll``) and answers within ~30 s on 2 busy
cores; SIGTERM stops it. Readiness is a Thrift call (``get_all_databases``) through a short-lived
client, not only an open port: the port opens before the schema is usable.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

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
DEFAULT_STATE_DIR = REPO_ROOT / "state" / "catalog"
DEFAULT_LIBS = REPO_ROOT / ".cache" / "metastore-libs"
LIBS_ENV = "REPLICATOR_METASTORE_LIBS"
PORT_ENV = "CATALOG_PORT"
DEFAULT_PORT = 9083
MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
JVM_FLAGS = ("-Xmx512m", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
_PORT_IN_USE = ("Address already in use", "Could not create ServerSocket")


class LocalCatalogError(ReplicatorError):
    """The local metastore service could not be set up, started or stopped."""


def pyspark_jars() -> Path:
    """pyspark's own jars directory: Hive's metastore, Thrift, DataNucleus and Derby are in it."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def resolve_libs(libs_dir: Path | str | None = None) -> Path:
    """The extra jars (arg > $REPLICATOR_METASTORE_LIBS > .cache/metastore-libs); fail if missing."""
    raw = libs_dir if libs_dir is not None else os.environ.get(LIBS_ENV) or DEFAULT_LIBS
    libs = Path(raw).expanduser().resolve()
    if not libs.is_dir() or not any(libs.glob("disruptor-*.jar")):
        raise LocalCatalogError(f"the metastore's extra jar (com.lmax:disruptor) is not in {libs}: run "
                                f"`make catalog-jars` (or point ${LIBS_ENV} at a directory holding it)")
    return libs


def _hive_site(state_dir: Path) -> str:
    props = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={state_dir / 'metastore_db'};create=true",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "datanucleus.schema.autoCreateAll": "true",
        # HikariCP is the pool pyspark ships: Hive's default (BoneCP) is not there, and its
        # transaction handler opens a pool on the first DROP DATABASE.
        "datanucleus.connectionPoolingType": "HikariCP",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": str(state_dir / "warehouse"),
        "hive.metastore.event.db.notification.api.auth": "false",
    }
    body = "\n".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>"
                     for k, v in props.items())
    return ("<?xml version=\"1.0\"?>\n<!-- Written by replicator.sim.localcatalog; rewritten on every start. -->\n"
            f"<configuration>\n{body}\n</configuration>\n")


def thrift_answers(port: int, timeout: float = 2.0) -> bool:
    """Whether a Hive metastore answers `get_all_databases` on `port` (Thrift binary protocol,
    unframed: what the metastore speaks without SASL). An open port alone is not enough: the
    metastore opens it before its schema is ready, and another process may hold it."""
    name = b"get_all_databases"
    message = struct.pack("!iI", -2147418111, len(name)) + name + struct.pack("!i", 1) + b"\x00"  # call, seq 1, stop
    try:
        with socket.create_connection((HOST, port), timeout=timeout) as sock:
            sock.sendall(message)
            head = sock.recv(4 + 4 + len(name))
    except OSError:
        return False
    # A reply (type 2) to our call: version word 0x80010002, then the method name.
    return len(head) >= 8 and struct.unpack("!I", head[:4])[0] == 0x80010002 and name.startswith(head[8:]) is True


class LocalCatalog(LocalService):
    """One Hive metastore service: its state dir (settings, Derby, pid, log) and port.

    ``port=None`` picks a free one (the last one of this state dir while it is free). ``detach``
    puts the JVM in its own session so it outlives the caller (``make catalog-up``); otherwise,
    started from the main thread, it dies with the caller (a test process).
    """

    NAME = "the Hive metastore"
    STEM = "metastore"
    MAIN_CLASS = MAIN_CLASS
    ERROR = LocalCatalogError
    START_TIMEOUT = 180.0
    STOP_TIMEOUT = 20.0

    def __init__(self, state_dir: Path | str = DEFAULT_STATE_DIR, port: int | None = None, *,
                 libs_dir: Path | str | None = None, detach: bool = True) -> None:
        super().__init__(state_dir, port, libs_dir=libs_dir, detach=detach)

    @property
    def uri(self) -> str:
        """``thrift://127.0.0.1:PORT``: what `--catalog-uri` (hive.metastore.uris) takes."""
        return f"thrift://{HOST}:{self.port}"

    def _marker(self) -> Path:
        return self.state_dir / "conf"

    def _answers(self, port: int) -> bool:
        return thrift_answers(port)

    def _await_adopted(self, pid: int, port: int, deadline: float) -> None:
        self._wait(None, pid, port, deadline)

    def _launch_ready(self, last_port: int | None, deadline: float) -> None:
        libs, java = resolve_libs(self.libs_dir), java_executable(LocalCatalogError, "the Hive metastore")
        conf = self.state_dir / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        (conf / "hive-site.xml").write_text(_hive_site(self.state_dir))
        (self.state_dir / "warehouse").mkdir(exist_ok=True)
        explicit = self._wanted_port
        if explicit is not None and not port_free(explicit):
            raise LocalCatalogError(f"port {HOST}:{explicit} is already in use by another process")
        port = explicit if explicit is not None else (last_port if last_port and port_free(last_port)
                                                      else free_ports(1)[0])
        (self.state_dir / "metastore.json").write_text(json.dumps({"port": port}) + "\n")
        log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        cmd = [java, *JVM_FLAGS, "-cp", f"{conf}:{libs}/*:{pyspark_jars()}/*", MAIN_CLASS, "-p", str(port)]
        launched = time.monotonic()
        with self.log_path.open("ab") as log:
            proc = subprocess.Popen(cmd, cwd=self.state_dir, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=self.detach,
                                    preexec_fn=None if self.detach or not tie_to_parent() else set_pdeathsig)
        self.pid_path.write_text(f"{proc.pid}\n")
        try:
            self._wait(proc, proc.pid, port, deadline, log_start)
        except BaseException:
            kill_child(proc)
            self.pid_path.unlink(missing_ok=True)
            raise
        self.pid, self._port, self._process = proc.pid, port, proc
        self._wanted_port = port
        self.ready_seconds = time.monotonic() - launched

    def _wait(self, proc: subprocess.Popen[bytes] | None, pid: int, port: int, deadline: float,
              log_start: int = 0) -> None:
        """Poll until the metastore answers a Thrift call; raise as soon as the JVM exits."""
        while True:
            exited = proc.poll() is not None if proc is not None else not pid_alive(pid)
            if exited:
                fresh = read_from(self.log_path, log_start)
                code = proc.returncode if proc is not None else "?"
                hint = (f"; port {port} is in use by another process" if any(m in fresh for m in _PORT_IN_USE)
                        else "")
                raise LocalCatalogError(f"the Hive metastore exited during start-up (exit code {code}){hint}; "
                                        f"{self.log_path}:\n{_tail(fresh)}")
            if thrift_answers(port):
                return
            if time.monotonic() > deadline:
                raise LocalCatalogError(f"the Hive metastore on {HOST}:{port} did not answer in time (pid {pid}); "
                                        f"{self.log_path}:\n{_tail(read_from(self.log_path, log_start))}")
            time.sleep(0.5)


def _tail(text: str, lines: int = 20) -> str:
    kept = [line for line in text.splitlines() if not line.lstrip().startswith(("at ", "... "))]
    return "\n".join(kept[-lines:]) or "(the log is empty)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m replicator.sim.localcatalog",
                                     description="Run a local Hive metastore service on 127.0.0.1.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("up", "start the service (no-op if running); print the URI for --catalog-uri"),
                            ("down", "stop the service (no-op if not running)"),
                            ("status", "print the URI and exit 0 if running, else exit 1")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                         help=f"settings, Derby database, pid and log (default: {DEFAULT_STATE_DIR})")
        if name == "up":
            cmd.add_argument("--port", type=int, default=None, help=f"port (default: ${PORT_ENV} or {DEFAULT_PORT})")
            cmd.add_argument("--libs", type=Path, default=None,
                             help=f"the extra jar's directory (default: ${LIBS_ENV} or {DEFAULT_LIBS})")
            cmd.add_argument("--timeout", type=float, default=180.0, help="seconds to wait (default: 180)")
    args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        server = LocalCatalog(args.state_dir)
        if args.command == "up":
            port = args.port if args.port is not None else env_port(PORT_ENV, DEFAULT_PORT)
            server = LocalCatalog(args.state_dir, port, libs_dir=args.libs)
            if server.running():
                note = "already running"
                if server.port != port:
                    note += f" on port {server.port}, not {port} (run `down` first to change it)"
            else:
                server.start(args.timeout)
                note = ("already running" if server.already_running
                        else f"started pid {server.pid} (ready in {server.ready_seconds or 0.0:.1f}s)")
            print(f"catalog: {note}; log {server.log_path}; pass --catalog-uri {server.uri}", file=sys.stderr)
            print(server.uri, flush=True)
            return 0
        if args.command == "down":
            stopped = server.stop() if args.state_dir.is_dir() else False
            print("catalog: stopped" if stopped else "catalog: not running", file=sys.stderr)
            return 0
        if not args.state_dir.is_dir() or not server.running():
            print("catalog: not running", file=sys.stderr)
            return 1
        print(server.uri, flush=True)
        print(f"catalog: running (pid {server.pid})", file=sys.stderr)
        return 0
    except ReplicatorError as exc:
        print(f"catalog {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
