"""`replicator --log-format json run`: every Python log line on stderr is a JSON object (a subprocess:
the root logger's handler is the real one)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from replicator.cli import main
from tests.support.cli import run_replicator
from tests.support.env import clean_env

pytestmark = pytest.mark.integration

HUMAN_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")


def test_a_run_logs_json_lines_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "arch"
    assert main(["simulate", "--protocol", "craft", "--out", str(archive), "--events", "40", "--tables", "2",
                 "--ddl", "none"]) == 0
    capsys.readouterr()
    out = run_replicator("--log-format", "json", "run", "--archive", str(archive), "--warehouse", str(tmp_path / "wh"),
                         "--json-summary", env=clean_env("REPLICATOR_LOG_FORMAT", PYTHONUNBUFFERED="1"), timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["records"] > 0  # the summary stays on stdout
    lines = out.stderr.splitlines()
    assert [line for line in lines if HUMAN_LINE.match(line)] == []
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert all({"time", "level", "logger", "event"} <= set(e) for e in events)
    steps = [e for e in events if str(e["event"]).startswith("step ")]
    assert steps and all(e["level"] == "INFO" and "step" in e and "positions" in e for e in steps), out.stderr
    assert any(str(e["event"]).startswith("caught up") for e in events), out.stderr
