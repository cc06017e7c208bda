"""The local broker's configuration: paths, ports, the server/log4j2 properties (with the optional
SASL listener), the state dir's metadata files, and the broker handle and errors.

Names with a leading underscore are shared within `replicator.sim.localkafka` only.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicator.errors import ReplicatorError

HOST = "127.0.0.1"
DEFAULT_PORT = 9092
REPO_ROOT = Path(__file__).resolve().parents[3]  # replicator/sim/localkafka/config.py -> the checkout
DEFAULT_LIBS = REPO_ROOT / ".cache" / "kafka-libs"
DEFAULT_STATE_DIR = REPO_ROOT / "state" / "kafka"
LIBS_ENV = "REPLICATOR_KAFKA_LIBS"
PORT_ENV = "KAFKA_PORT"

JVM_FLAGS = ("-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
# Log lines of the JVM that readiness and failure detection look for (see process.py).
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


def java_executable(error: type[ReplicatorError] = ReplicatorError, needed_by: str = "Kafka 4.x") -> str:
    """Prefer $JAVA_HOME/bin/java like Kafka's own scripts, else java on PATH; `error` names the
    service that needs it (the local broker, the local S3 server)."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise error(f"`java` not found on PATH and $JAVA_HOME is not set: {needed_by} needs Java 17+")
    return found


def _java() -> str:
    return java_executable(LocalKafkaError)


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


def new_cluster_id() -> str:
    """A Kafka-style base64 UUID that never starts with '-' (StorageTool would read it as a flag).

    Kafka's own Uuid.randomUuid() re-draws such ids for the same reason.
    """
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid
