"""The Delta write path: the table writer (`writer`, over `session`), DDL operations (`ddl/`), type
mapping, table features, dead letters and catalog projection, the Delta log read without Spark
(`rowcount`). The warehouse's records it writes through (layout, progress, lease, step log) are
`replicator.warehouse`, the part below it. Importing this package starts no JVM.

Importing it also arms the storage layer's Spark session for Hadoop URLs (`replicator.runtime`),
as every part that reads or writes a warehouse imports this package."""

from __future__ import annotations

import replicator.runtime  # noqa: F401  (the Hadoop URL session factory: see replicator/runtime)
