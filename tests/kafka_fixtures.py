"""Pytest fixtures for a real Kafka broker: one per test session, on free ports, in a temp dir.

Use with ``pytest_plugins = ["tests.kafka_fixtures"]`` in the root conftest, ``from tests.kafka_fixtures
import *``, or by importing ``kafka_bootstrap`` into a test module. All of these share one broker per
process: pytest makes a separate fixture definition per place that registers the fixture, so the broker
itself is reference-counted here rather than started once per definition.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient

from replicator.sim.localkafka import running_broker

__all__ = ["kafka_bootstrap", "new_topic"]


class _SharedBroker:
    """A single broker for however many fixture definitions request it; stopped when the last one ends."""

    def __init__(self) -> None:
        self.users = 0
        self.bootstrap: str | None = None
        self.stack = contextlib.ExitStack()

    def acquire(self, tmp_path_factory: pytest.TempPathFactory) -> str:
        if self.bootstrap is None:
            self.bootstrap = self.stack.enter_context(running_broker(tmp_path_factory.mktemp("kafka")))
        self.users += 1
        return self.bootstrap

    def release(self) -> None:
        self.users -= 1
        if self.users == 0:
            self.bootstrap = None
            self.stack.close()


_SHARED = _SharedBroker()


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``"127.0.0.1:PORT"`` of a broker private to this session; tests share it, so use own topics."""
    bootstrap = _SHARED.acquire(tmp_path_factory)
    try:
        yield bootstrap
    finally:
        _SHARED.release()


def new_topic(
    bootstrap: str,
    partitions: int = 1,
    *,
    prefix: str = "test",
    configs: dict[str, str] | None = None,
) -> str:
    """Create a uniquely named topic and return its name once every partition has a leader.

    Explicit creation (not auto-create) avoids first-metadata races in producers, consumers and Spark.
    """
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="tests-new-topic",
        request_timeout_ms=15000,
        bootstrap_timeout_ms=15000,
    )
    try:
        admin.create_topics(
            {name: {"num_partitions": partitions, "replication_factor": 1, "configs": dict(configs or {})}},
            timeout_ms=15000,
        )
        admin.wait_for_topics([name], timeout_ms=15000)
    finally:
        admin.close()
    return name
