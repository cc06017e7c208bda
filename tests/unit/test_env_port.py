"""`make kafka-up` / `make cluster-up` read their port from the environment the same way."""

from __future__ import annotations

import pytest

from replicator.errors import ConfigError
from replicator.sim.localkafka.process import env_port


def test_env_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_MASTER_PORT", raising=False)
    assert env_port("SPARK_MASTER_PORT", 7077) == 7077
    monkeypatch.setenv("SPARK_MASTER_PORT", " ")
    assert env_port("SPARK_MASTER_PORT", 7077) == 7077
    monkeypatch.setenv("SPARK_MASTER_PORT", "17077")
    assert env_port("SPARK_MASTER_PORT", 7077) == 17077
    for bad in ("x", "0", "70000", "-1"):
        monkeypatch.setenv("SPARK_MASTER_PORT", bad)
        with pytest.raises(ConfigError, match=r"\$SPARK_MASTER_PORT="):
            env_port("SPARK_MASTER_PORT", 7077)
