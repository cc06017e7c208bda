"""Shared fixtures: one Delta-enabled SparkSession, one real Kafka broker, one real S3-compatible server
(S3Proxy) and, for the tests that ask for it, one Hive metastore service per test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

pytest_plugins = ["tests.kafka_fixtures", "tests.s3_fixtures", "tests.catalog_fixtures", "tests.support.env"]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.s3_fixtures import S3Server


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from replicator.runtime.spark import get_spark

    session = get_spark("replicator-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_store(s3_server: S3Server, spark: SparkSession) -> Iterator[S3Server]:
    """The session's S3-compatible server as this process's object store: the storage options, the
    AWS environment (for runs in subprocesses), and the shared Spark session's Hadoop settings and
    credentials (Java system properties, which the AWS SDK's default chain reads: the session's JVM
    may have started before the AWS environment was set)."""
    import os

    from replicator.runtime.spark import use_storage
    from replicator.storage import StorageOptions, configure

    saved = {k: os.environ.get(k) for k in s3_server.env()}
    os.environ.update(s3_server.env())
    configure(StorageOptions(endpoint=s3_server.endpoint, region=s3_server.region))
    system = spark.sparkContext._jvm.java.lang.System  # type: ignore[union-attr]
    system.setProperty("aws.accessKeyId", s3_server.access_key)
    system.setProperty("aws.secretAccessKey", s3_server.secret_key)
    use_storage(spark)
    try:
        yield s3_server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        configure(StorageOptions.from_env())
