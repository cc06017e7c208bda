"""replicator: TiCDC (Open Protocol / Craft) on Kafka -> Delta Lake, exactly once."""

__version__ = "0.1.0"
