"""Output for machines (issue 29): with --json-summary / --json, stdout holds the JSON document and
nothing else (logs, progress, warnings, Spark's and the JVM's output go to stderr, also with -v);
the Spark reader's last progress line shows Kafka lag 0 once everything was applied; and a command
leaves nothing in its working directory (no spark-warehouse/, metastore_db/, derby.log).

Each command runs as a subprocess with stdout a pipe, in a fresh empty working directory: each
starts its own driver JVM (20-30 s), so there are three.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from replicator.sim.simulate import SimConfig, Simulation
from tests.integration.helpers import produce
from tests.kafka_fixtures import new_topic
from tests.support.cli import run_replicator
from tests.support.env import cli_env

pytestmark = pytest.mark.integration

# The display's line (replicator/engine/display.py `Display`), logged to stderr when it is not a terminal.
KAFKA_LAG = re.compile(r"\| kafka lag (\d+|\?)")


@pytest.fixture(scope="module")
def stream(kafka_bootstrap: str) -> tuple[str, int]:
    """A tiny simulated stream on two partitions: (topic, messages)."""
    sim = Simulation(SimConfig(protocol="open", seed=29, events=60, partitions=2, tables=2, ddl="none"))
    msgs = list(sim.messages())
    topic = new_topic(kafka_bootstrap, 2, prefix="machine-output")
    produce(kafka_bootstrap, topic, msgs)
    return topic, len(msgs)


def _env() -> dict[str, str]:
    """A small Spark; nothing from the caller's environment that changes what is printed."""
    return cli_env("REPLICATOR_CONFIG", "REPLICATOR_SPARK_LOG_LEVEL", PYTHONUNBUFFERED="1")


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`replicator ARGS` in `cwd`, stdout and stderr pipes (not terminals)."""
    cwd.mkdir()
    out = run_replicator(*args, cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, timeout=600)
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr[-5000:]}"
    return out


def _document(out: subprocess.CompletedProcess[str]) -> Any:
    """stdout as-is is one JSON document (json.loads allows surrounding whitespace only)."""
    try:
        return json.loads(out.stdout)
    except ValueError as exc:
        raise AssertionError(f"stdout is not only JSON ({exc}):\n{out.stdout[:3000]}") from None


def _left_in(cwd: Path) -> list[str]:
    return sorted(p.name for p in cwd.iterdir())


def _run(kafka_bootstrap: str, topic: str, wh: Path, reader: str) -> list[str]:
    return ["run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
            "--warehouse", str(wh), "--group-id", f"{topic}-{reader}", "--reader", reader,
            "--until-caught-up", "--json-summary"]


def test_driver_reader_verbose_keeps_stdout_json(kafka_bootstrap: str, stream: tuple[str, int],
                                                 tmp_path: Path) -> None:
    """-v: debug logging and Spark's own (default) log4j profile, all of it on stderr."""
    topic, messages = stream
    cwd = tmp_path / "cwd"
    out = _cli(cwd, "-v", *_run(kafka_bootstrap, topic, tmp_path / "wh", "driver"))
    summary = _document(out)
    assert summary["records"] == messages and summary["error"] is None
    assert "Using Spark's default log4j profile" in out.stderr  # -v did reach Spark
    assert _left_in(cwd) == []


def test_spark_reader_json_final_lag_and_tables_json(kafka_bootstrap: str, stream: tuple[str, int],
                                                     tmp_path: Path) -> None:
    topic, messages = stream
    wh = tmp_path / "wh"
    cwd = tmp_path / "cwd"
    out = _cli(cwd, *_run(kafka_bootstrap, topic, wh, "spark"))
    summary = _document(out)
    assert summary["records"] == messages and summary["error"] is None
    lags = KAFKA_LAG.findall(out.stderr)
    assert lags and lags[-1] == "0", f"progress lines' kafka lag: {lags}\n{out.stderr[-3000:]}"
    assert _left_in(cwd) == []

    listed = tmp_path / "cwd-tables"
    tables = _document(_cli(listed, "tables", "--warehouse", str(wh), "--json"))
    assert isinstance(tables, list) and len(tables) == len(summary["tables"]) > 0
    assert _left_in(listed) == []
