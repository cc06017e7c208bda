"""The Spark/JVM runtime every Spark-using part shares: the one SparkSession factory (`spark`),
the one declaration of its jars (`jars`, and the s3a commit store built from `java/s3commit`),
the driver JVM's class archive (`jvm_archive`), the writer lease enforced inside the JVM
(`commitfence`), and the jars and confs a user's own Spark job needs (`writerconf`).
Importing this package starts no JVM; nothing here reads or writes a table. It gives the storage
layer below it its Spark session for Hadoop URLs (storage/hadoop.py), made by the one session
factory when such a URL is first used."""

from __future__ import annotations

from typing import Any

from replicator.storage import hadoop as _hadoop


def _spark_session() -> Any:
    from replicator.runtime.spark import get_spark

    return get_spark()


_hadoop.use_session_factory(_spark_session)
