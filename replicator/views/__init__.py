"""The commands' read-only reports of a warehouse: `replicator tables` (`listing`) and `replicator
status` (`status`). They never take the lease and never write; Spark starts only for a row count the Delta log
cannot give.
The notebooks' API stays at its documented path, `replicator.delta.explore`."""
