"""Which Spark master the replicator asks for: REPLICATOR_SPARK_MASTER, else spark-submit's own
(a process spark-submit started gets a JVM gateway), else local[*]."""

from __future__ import annotations

import pytest

from replicator.runtime.spark import spark_master


def test_local_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLICATOR_SPARK_MASTER", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert spark_master() == "local[*]"
    monkeypatch.setenv("REPLICATOR_SPARK_MASTER", "spark://127.0.0.1:7077")
    assert spark_master() == "spark://127.0.0.1:7077"


def test_spark_submit_keeps_its_master(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPLICATOR_SPARK_MASTER", raising=False)
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "41234")
    assert spark_master() is None
    monkeypatch.setenv("REPLICATOR_SPARK_MASTER", "yarn")
    assert spark_master() == "yarn"


def test_loopback_only_for_executors_on_this_machine() -> None:
    from replicator.runtime.spark import on_this_machine

    assert on_this_machine("local[*]") and on_this_machine("local[2]")
    assert on_this_machine("spark://127.0.0.1:7077") and on_this_machine("spark://localhost:7077")
    assert not on_this_machine("spark://10.0.0.5:7077")
    assert not on_this_machine("yarn") and not on_this_machine("k8s://https://api:6443")
    assert not on_this_machine(None)  # spark-submit's master: its own networking settings
