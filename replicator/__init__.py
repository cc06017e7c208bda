"""replicator: TiCDC changefeeds on Kafka (Open Protocol, canal-json, Simple, Craft; one topic or many) -> Delta
Lake tables on a directory or s3a:// with an optional Hive metastore, exactly once."""

__version__ = "0.1.0"
