"""Compatibility re-export: the documented `from replicator.explore import open_warehouse`."""

from replicator.delta.explore import *  # noqa: F403
from replicator.delta.explore import Explorer, open_warehouse

__all__ = ["Explorer", "open_warehouse"]
