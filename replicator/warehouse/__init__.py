"""The warehouse's records: its layout, the progress file (`state.json`), the writer lease, the
step log (`store`), and `run --binlog`'s `binlog.json` (`binlog_state`).

They are not Delta: they say what the Delta tables hold and who may write them, so they sit below
the Delta write path (`replicator.delta`) and every part that reads or writes a warehouse, over
the storage layer, the runtime's jar declarations (an s3a warehouse needs the S3 jars), the shard
map and the shared model (a table's `TableSpec` is `replicator.tables`). Importing this package
starts no JVM.
"""

from __future__ import annotations

from replicator.warehouse.store import State, TableEntry, Warehouse, table_uid

__all__ = ["State", "TableEntry", "Warehouse", "table_uid"]
