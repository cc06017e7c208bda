"""Dead letters: the messages a run could not decode and the DDLs it skipped, into the dead-letter table."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from replicator.engine.spark_edge import SparkEdge
from replicator.events import DdlEvent, Record
from replicator.metrics import Metrics
from replicator.warehouse import Warehouse


class DeadLetters:
    """Writes dead letters (delta/deadletter.py) and counts them in the run's metrics."""

    def __init__(self, edge: SparkEdge, warehouse: Warehouse, protocol: str, metrics: Metrics,
                 source_name: str, on_ddl_skipped: Callable[[str], None] = lambda _why: None) -> None:
        self.edge = edge
        self.warehouse = warehouse
        self.protocol = protocol
        self.metrics = metrics
        self.source_name = source_name
        self.ddls = 0  # DDLs dead-lettered (--on-ddl-error skip)
        self.on_ddl_skipped = on_ddl_skipped  # told where, once each

    def messages(self, dead: Sequence[tuple[Record, str]]) -> None:
        """Messages the loop could not decode; each reason starts with the error class."""
        self._write(list(dead))
        self.metrics.dead_lettered([reason.split(":", 1)[0] for _rec, reason in dead], decode_errors=len(dead))

    def ddl(self, ddl: DdlEvent, exc: Exception) -> None:
        """A DDL that failed and is skipped: its statement, at its Kafka position."""
        pos = ddl.position
        rec = Record(pos.topic if pos else self.source_name, pos.partition if pos else -1,
                     pos.offset if pos else -1, -1, None, ddl.query.encode())
        self._write([(rec, f"DdlError: {exc}")])
        self.ddls += 1
        self.metrics.dead_lettered(["DdlError"], decode_errors=0)
        self.on_ddl_skipped(f"a DDL was skipped (--on-ddl-error skip) at commit ts {ddl.commit_ts}"
                            + (f", topic {pos.topic!r} partition {pos.partition} offset {pos.offset}" if pos else ""))

    def _write(self, items: list[tuple[Record, str]]) -> None:
        from replicator.delta.deadletter import write_dead_letters

        write_dead_letters(self.edge.delta.spark, self.warehouse, self.protocol, items)
