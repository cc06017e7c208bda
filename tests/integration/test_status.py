"""`replicator status --json` beside a running follower and after it stopped (issue 32).

A follower (`replicator run` without --until-caught-up, a process of its own) applies a small
simulated stream with one undecodable message (dead-lettered, `--on-error skip`). While it runs,
status names it as the holder (its pid, this host) and lists both tables with their Delta versions
and exact row counts; after SIGTERM nobody holds the warehouse (the lease was given back), the
watermark is the step log's last, and status changed no file of the warehouse.
"""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from replicator.cli import main
from replicator.sim.simulate import SimConfig, Simulation
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce
from tests.kafka_fixtures import new_topic
from tests.support.cli import kill_group, start_replicator, tail
from tests.support.env import cli_env
from tests.support.waiting import wait_for
from tests.support.warehouse import applied_ts

pytestmark = pytest.mark.integration

GARBAGE = b"\x00\x01not a TiCDC message\xff"


def _status(capsys: pytest.CaptureFixture[str], wh: Path) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["status", "--warehouse", str(wh), "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def _files(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_status_while_the_follower_runs_and_after_it_stops(kafka_bootstrap: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    sim = Simulation(SimConfig(protocol="open", seed=32, events=300, partitions=2, tables=2, ddl="none"))
    msgs = list(sim.messages())
    p0 = [i for i, m in enumerate(msgs) if m[0] == 0]
    at = p0[len(p0) // 3]
    topic = new_topic(kafka_bootstrap, 2, prefix="status")
    produce(kafka_bootstrap, topic, [*msgs[:at], (0, b"\x00" * 8, GARBAGE), *msgs[at:]])
    expected = sim.expected
    wh, log = tmp_path / "wh", tmp_path / "run.log"

    proc = start_replicator("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
                            "--warehouse", str(wh), "--on-error", "skip", env=cli_env(), log=log)
    try:
        wait_for("the follower to apply the whole stream",
                 lambda: proc.poll() is not None or applied_ts(wh) >= expected.watermark, timeout=240)
        assert proc.poll() is None, f"the follower stopped:\n{tail(log)}"

        doc = _status(capsys, wh)  # while it runs
        assert doc["warehouse"] == str(wh)
        assert doc["holder"] is not None and doc["last_holder"] is None
        assert (doc["holder"]["host"], doc["holder"]["pid"]) == (socket.gethostname(), proc.pid)
        assert doc["holder"]["since"] < doc["holder"]["expires_at"]
        assert doc["applied_watermark"] >= expected.watermark
        assert doc["applied_watermark_age_s"] is not None and doc["applied_watermark_age_s"] > 0
        assert doc["last_step"] is not None and doc["last_step"]["outcome"] == "applied"
        assert doc["dead_letters"] == {"total": 1, "by_reason": {"DecodeError": 1}}
        tables = {f"{t['schema']}.{t['table']}": t for t in doc["tables"]}
        assert set(tables) == set(expected.tables)
        for name, t in tables.items():
            assert isinstance(t["delta_version"], int) and t["delta_version"] >= 1, t
            assert t["rows"] == len(expected.tables[name]), name
            assert t["applied_ts"] == doc["applied_watermark"]

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0, tail(log)
    finally:
        if proc.poll() is None:
            kill_group(proc)

    before = _files(wh)
    after_stop = _status(capsys, wh)
    assert _files(wh) == before, "status wrote to the warehouse"
    assert after_stop["holder"] is None
    assert after_stop["last_holder"] is not None and after_stop["last_holder"]["ended"] == "released"
    assert after_stop["last_holder"]["pid"] == proc.pid
    w = Warehouse(wh)
    last = w.windows()[-1]
    assert after_stop["applied_watermark"] == last["applied_ts"] == w.load_state().applied_ts
    assert after_stop["last_step"]["step"] == last["step"] == w.load_state().steps
    assert after_stop["last_step"]["time"] == last["recorded_at"]
    assert [(t["schema"], t["table"], t["rows"]) for t in after_stop["tables"]] == [
        (t["schema"], t["table"], t["rows"]) for t in doc["tables"]]
