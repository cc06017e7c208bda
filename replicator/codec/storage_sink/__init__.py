"""TiCDC's storage sink as files: the layout (`layout`: data, index and metadata files, dates,
positions), the schema files (`schema`: a table version's columns and its DDL) and the CSV rows
(`replicator.codec.csv`). Pure: no Spark, no Kafka, no store; the reader is
`replicator.sources.storage_sink`, the writer of simulated changefeeds `replicator.sim.storage_sink`.
"""
