"""SIGKILL of `replicator run --storage-sink` at random instants after it applied a step (mid-MERGE,
mid-DDL, between data and progress), then a rerun: the warehouse equals the simulator's expected
tables exactly. The storage-sink twin of test_kills.py's DDL stream (CI: two kills; soak: ten)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from replicator.sim.storage_sink import write_storage_sink
from tests.reliability.common import cli_env, kill_group, size, steps_done, tail, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.timeout(1800)]


def _start(sink: Path, wh: Path, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "replicator", "run", "--storage-sink", str(sink), "--protocol", "csv",
           "--warehouse", str(wh), "--until-caught-up"]
    with open(log, "ab") as err:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=cli_env(), start_new_session=True)


def test_sigkill_at_random_instants_of_a_storage_sink(spark: Any, tmp_path: Path) -> None:
    kills = size(2, 10)
    sim = Simulation(SimConfig(protocol="open", seed=17, events=size(200, 3000), tables=3,
                               ddl="add_column,truncate,drop_column"))
    sink, wh, log = tmp_path / "sink", tmp_path / "wh", tmp_path / "runs.log"
    write_storage_sink(sim, str(sink))
    rnd, landed = random.Random(99), 0
    for _ in range(kills):
        before = steps_done(wh)
        proc = _start(sink, wh, log)
        wait_for("the run to apply a step", lambda: proc.poll() is not None or steps_done(wh) > before,  # noqa: B023
                 timeout=600)
        time.sleep(rnd.uniform(0.0, 2.0))
        if proc.poll() is not None:
            assert proc.returncode == 0, tail(log)
            break
        kill_group(proc)
        landed += 1
    final = _start(sink, wh, log)
    assert final.wait(timeout=1200) == 0, tail(log)
    assert landed >= 1, "no kill landed: the stream was consumed first"
    assert check_warehouse(spark, wh, sim.expected) == []
