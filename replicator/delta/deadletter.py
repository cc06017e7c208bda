"""The dead-letter Delta table: every undecodable or refused message, with its position and error.

Written before progress moves past the message, deduplicated on (topic, partition, offset) so a
re-run after a crash does not record the same message twice. Both statements go through the
Delta session, so a concurrent commit (a user's OPTIMIZE of the table) is retried like any other write.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from replicator.delta.session import DeltaSession, one_file
from replicator.delta.writer import clear_unborn_table, delta_ref
from replicator.events import Record
from replicator.warehouse import Warehouse

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEAD_LETTER_DDL = (
    "topic STRING, `partition` INT, `offset` BIGINT, `timestamp` BIGINT, key BINARY, value BINARY, "
    "protocol STRING, error STRING, recorded_at TIMESTAMP"
)


def write_dead_letters(
    spark: SparkSession, warehouse: Warehouse, protocol: str, items: Sequence[tuple[Record, str]],
) -> None:
    """Record `items` (message, error) in the dead-letter table, once per (topic, partition, offset)."""
    delta = DeltaSession(spark)
    delta.fence = warehouse.fence
    delta.epoch = warehouse.epoch
    path = str(warehouse.dead_letters_path)
    ref = delta_ref(path)
    clear_unborn_table(path, delta.fence)  # a crash inside this CREATE must not leave a table that never exists
    delta.sql_retrying(f"CREATE TABLE IF NOT EXISTS {ref} ({DEAD_LETTER_DDL}) USING delta", f"CREATE {path}")
    now = dt.datetime.now(dt.UTC)
    rows = [(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value, protocol, err, now) for r, err in items]
    df = one_file(spark.createDataFrame(rows, schema=DEAD_LETTER_DDL.replace("`", "")), len(rows))
    view = "replicator_dead_letters_src"
    df.createOrReplaceTempView(view)
    try:
        delta.sql_retrying(
            f"MERGE INTO {ref} AS t USING {view} AS s ON t.topic = s.topic AND t.`partition` = s.`partition` "
            "AND t.`offset` = s.`offset` WHEN NOT MATCHED THEN INSERT *", f"MERGE into {path}"
        )
    finally:
        spark.catalog.dropTempView(view)


def read_dead_letters(spark: SparkSession, warehouse: Warehouse) -> list[dict[str, object]]:
    path = warehouse.dead_letters_path
    if not (path / "_delta_log").exists():
        return []
    return [r.asDict() for r in spark.read.format("delta").load(str(path)).orderBy("partition", "offset").collect()]
