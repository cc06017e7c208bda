"""The Delta edge: MERGE, DDL operations, type mapping, the warehouse, dead letters, the Spark
session and exploration. Importing this package starts no JVM.

It gives the storage layer below it its Spark session for Hadoop URLs (storage/hadoop.py), made
by the one session factory (spark.py) when such a URL is first used."""

from __future__ import annotations

from typing import Any

from replicator.storage import hadoop as _hadoop


def _spark_session() -> Any:
    from replicator.delta.spark import get_spark

    return get_spark()


_hadoop.use_session_factory(_spark_session)
