"""`replicator --log-format json run`: every Python log line on stderr is a JSON object (a subprocess:
the root logger's handler is the real one)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.cli import main

pytestmark = pytest.mark.integration

HUMAN_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) ")


def test_a_run_logs_json_lines_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "arch"
    assert main(["simulate", "--protocol", "craft", "--out", str(archive), "--events", "40", "--tables", "2",
                 "--ddl", "none"]) == 0
    capsys.readouterr()
    env = {k: v for k, v in os.environ.items() if k.upper() != "REPLICATOR_LOG_FORMAT"}
    out = subprocess.run(
        [sys.executable, "-m", "replicator", "--log-format", "json", "run", "--archive", str(archive),
         "--warehouse", str(tmp_path / "wh"), "--json-summary"],
        capture_output=True, text=True, env={**env, "PYTHONUNBUFFERED": "1"}, timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["records"] > 0  # the summary stays on stdout
    lines = out.stderr.splitlines()
    assert [line for line in lines if HUMAN_LINE.match(line)] == []
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert all({"time", "level", "logger", "event"} <= set(e) for e in events)
    steps = [e for e in events if str(e["event"]).startswith("step ")]
    assert steps and all(e["level"] == "INFO" and "step" in e and "positions" in e for e in steps), out.stderr
    assert any(str(e["event"]).startswith("caught up") for e in events), out.stderr
