"""SIGKILL of `replicator run --storage-sink` at random instants after it applied a step (mid-MERGE,
mid-DDL, between data and progress), then a rerun: the warehouse equals the simulator's expected
tables exactly. The storage-sink twin of test_kills.py's DDL stream (CI: two kills; soak: ten);
and a changefeed in an `s3a://` store whose whole backlog is one pass, killed between the steps
that pass applies (its intermediate resolved events) and resumed from the cursors (soak only: two
JVM starts, over a minute; CI runs it in-process in seconds, tests/integration/test_storage_sink.py)."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from replicator.sim.simcheck import check_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from replicator.sim.storage_sink import write_storage_sink
from tests.reliability.common import size
from tests.s3_fixtures import S3Server
from tests.support.cli import kill_group, start_replicator, tail
from tests.support.env import cli_env
from tests.support.waiting import wait_for
from tests.support.warehouse import applied_ts, steps_done

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.timeout(1800)]


def _start(sink: Path | str, wh: Path, log: Path, *args: str, env: dict[str, str] | None = None
           ) -> subprocess.Popen[bytes]:
    return start_replicator("run", "--storage-sink", str(sink), "--protocol", "csv", "--warehouse", str(wh),
                            "--until-caught-up", *args, env=cli_env(**(env or {})), log=log)


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


@pytest.mark.soak  # a JVM start per run (about 85 s on a busy 2-core machine): `make soak`
def test_sigkill_inside_one_pass_over_a_backlog_in_s3(s3_store: S3Server, spark: Any, tmp_path: Path) -> None:
    """The whole changefeed is in the bucket before the first run: one pass, applied in steps of
    --max-buffer-rows at the streams' intermediate resolved events. A kill after the first step
    lands inside that pass; the rerun resumes each stream from its file and line and is exact."""
    sim = Simulation(SimConfig(protocol="open", seed=23, events=size(150, 3000), tables=2, ddl="none"))
    sink, wh, log = s3_store.warehouse_url("storage-sink"), tmp_path / "wh", tmp_path / "runs.log"
    write_storage_sink(sim, sink)
    proc = _start(sink, wh, log, "--max-buffer-rows", "20", "--spill-rows", "0", env=s3_store.env())
    wait_for("the run to apply a step", lambda: proc.poll() is not None or steps_done(wh) > 0, timeout=600)
    time.sleep(random.Random(23).uniform(0.0, 1.0))
    assert proc.poll() is None, f"the run ended before the kill:\n{tail(log)}"
    kill_group(proc)
    applied = applied_ts(wh)
    assert 0 < applied < sim.expected.watermark  # killed inside the pass, after some of its steps
    final = _start(sink, wh, log, env=s3_store.env())  # the rest in one step
    assert final.wait(timeout=900) == 0, tail(log)
    assert check_warehouse(spark, wh, sim.expected) == []
