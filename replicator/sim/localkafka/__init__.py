"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) on 127.0.0.1.

Modules: `config` (paths, ports, properties incl. the SASL listener, state files, `BrokerHandle`),
`process` (pids, ports, the broker log, readiness, format and launch), `broker` (`start`, `stop`,
`status`, `running_broker`), `cli` (``python -m replicator.sim.localkafka up|down|status``). This
package re-exports their public names: ``from replicator.sim import localkafka; localkafka.start(...)``.

Why: the replicator's Kafka paths (offsets, consumer groups, ``offsets_for_times``) must be tested against
real Kafka, not a fake, and there is no Docker. The broker's jars come from Maven Central through
``tools/kafka-broker/pom.xml`` (``make kafka-jars`` -> ``.cache/kafka-libs``). This one module serves both
``make kafka-up`` / ``make kafka-down`` (detached broker, state in ``state/kafka``) and the pytest session
fixture (:func:`running_broker`, private state dir, free ports, always stopped).

Layout of a state dir: ``server.properties``, ``log4j2.properties``, ``data/`` (``log.dirs``),
``broker.log`` (the JVM's stdout+stderr, appended), ``broker.pid``, ``broker.json`` (ports, cluster id),
``.lock`` (serialises concurrent ``up``/``down`` on the same dir).

Facts this module relies on (checked with Kafka 4.1.1, log4j2 2.24.3, Java 17.0.15; docs/kafka-broker.md):
- ``kafka_2.13`` + explicit log4j-api/-core/-slf4j-impl give the full runtime classpath (46 jars); no
  ``kafka-tools`` needed. ``kafka.tools.StorageTool`` and ``kafka.Kafka`` are the main classes.
- A single-node KRaft config (docs/kafka-broker.md#configuration) works with ``format --standalone -t <id>
  -c <props>`` and ``controller.quorum.bootstrap.servers``. RF=1 internal topics: consumer groups and commits work.
- ``format`` accepts any string as cluster id; we use Kafka's Uuid form. A second ``format`` on a formatted
  dir fails (exit 1) unless ``--ignore-formatted``; we skip the JVM entirely once ``data/meta.properties`` exists.
- A plain log4j2.properties (no YAML jar) works; "Kafka Server started" is logged at INFO by
  ``kafka.server.KafkaRaftServer``. SIGTERM runs the shutdown hook: clean exit in 0.3-1.5 s.
- kafka-python 3.0.12: admin results are dicts, ``NewTopic`` is deprecated (we pass
  ``{name: {num_partitions, replication_factor}}``), ``bootstrap_timeout_ms`` is the setting name.
- ``-Xms256m -Xmx512m`` with the 2 MB dedupe buffer is enough; RSS right after start is about 230 MB.
- Timing on a 2-core VM: idle, format 0.5-0.7 s and launch-to-ready 1.4-1.8 s; under load 3-5, format
  0.9-1.1 s, launch-to-ready 2.7-3.5 s (about 4 s for a fresh ``start()``, occasionally 7 s).
- After a fatal start-up error (e.g. bind failure) the JVM logs "Exiting Kafka due to fatal exception during
  startup" at once but lingers about 10 s in shutdown hooks: we watch the log and kill it at once.
- Restarting after an *unclean* stop waits out the dead incarnation's broker session
  (``broker.session.timeout.ms``, default 9 s): about 11.5 s instead of 2 s. The default stays, because a
  shorter session risks fencing the only broker when Spark starves the CPU. A retry on a dir this call
  formatted re-formats it instead (docs/kafka-broker.md#timing-and-restarts).
- A bind race against a port another process *listens* on makes a Kafka client hang on that foreign
  listener, so readiness waits for this run's "Kafka Server started" line.
- The ``--standalone`` voter record does not pin the controller endpoint: restarting the same data with a
  different controller port works (a single voter elects itself). We still reuse the last ports.
- Kafka 4.1.1 itself uses log4j2 2.24.3, which tools/kafka-broker/pom.xml pins.
"""


from replicator.sim.localkafka.broker import running_broker, start, status, stop
from replicator.sim.localkafka.cli import main
from replicator.sim.localkafka.config import (
    DEFAULT_LIBS,
    DEFAULT_PORT,
    DEFAULT_STATE_DIR,
    HOST,
    JVM_FLAGS,
    LIBS_ENV,
    PORT_ENV,
    REPO_ROOT,
    BrokerHandle,
    LocalKafkaError,
    new_cluster_id,
    resolve_libs,
)
from replicator.sim.localkafka.process import free_ports, pid_alive

__all__ = [
    "DEFAULT_LIBS",
    "DEFAULT_PORT",
    "DEFAULT_STATE_DIR",
    "HOST",
    "JVM_FLAGS",
    "LIBS_ENV",
    "PORT_ENV",
    "REPO_ROOT",
    "BrokerHandle",
    "LocalKafkaError",
    "free_ports",
    "main",
    "new_cluster_id",
    "pid_alive",
    "resolve_libs",
    "running_broker",
    "start",
    "status",
    "stop",
]
