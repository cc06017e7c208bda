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
