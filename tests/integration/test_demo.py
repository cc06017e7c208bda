"""`make run`'s demo against the session broker (a small workload, one protocol)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replicator.delta.warehouse import Warehouse
from replicator.sim import demo

pytestmark = pytest.mark.integration


def test_demo_replicates_and_checks(kafka_bootstrap: str, spark: Any, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REPLICATOR_SPARK_LOG_LEVEL", "ERROR")
    wh = tmp_path / "warehouse"
    (wh / "_replicator").mkdir(parents=True)  # a previous demo run's warehouse: recreated
    (wh / "_replicator" / "state.json").write_text("{}")
    args = ["--warehouse", str(wh), "--bootstrap-servers", kafka_bootstrap, "--events", "400", "--protocols", "open",
            "--ddl", "none", "--state-dir", str(tmp_path / "state")]
    assert demo.main(args) == 0
    out = capsys.readouterr().out
    assert "check  open: every table equals the simulator's expected state" in out
    assert "make notebook" in out and "shop.customers" in out and "lag" in out
    assert (tmp_path / "state" / "expected-open.json").exists()
    assert list((tmp_path / "state" / "archive").glob("archive-*.rcf"))
    state = Warehouse(wh).load_state()
    assert state.source and state.source.startswith(demo.TOPIC_PREFIX) and state.applied_ts > 0
