"""Pytest fixture for a real Hive metastore service (replicator/sim/localcatalog.py): one per test
session, on a free port, with its Derby database in a temp dir, stopped at the end. Only the tests
that ask for ``catalog_uri`` start it (about 10-30 s, once).

Spark chooses its catalog when a session starts, and the suite shares one session without a catalog
(conftest ``spark``): a test that registers or reads tables by name runs the replicator and the
readers in processes of their own, pointed at ``catalog_uri``. Tests share the metastore: give each
its own database names (``--catalog-database-prefix``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from replicator.sim.localcatalog import LocalCatalog

__all__ = ["catalog_uri"]


@pytest.fixture(scope="session")
def catalog_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``thrift://127.0.0.1:PORT`` of a metastore private to this test session."""
    server = LocalCatalog(tmp_path_factory.mktemp("catalog"), detach=False)
    server.start()
    try:
        yield server.uri
    finally:
        server.stop()
