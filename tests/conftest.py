"""Shared fixtures: one Delta-enabled SparkSession and one real Kafka broker per test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

pytest_plugins = ["tests.kafka_fixtures"]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from replicator.delta.spark import get_spark

    session = get_spark("replicator-tests")
    yield session
    session.stop()
