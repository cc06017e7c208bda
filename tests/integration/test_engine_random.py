"""Randomized multi-table workloads through a real broker into real Delta, checked against an
independently computed expected state; then the same under SIGKILL at random instants."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.helpers import produce_stream, run_engine, table_rows
from tests.kafka_fixtures import new_topic
from tests.streamgen import SCHEMA, generate
from tests.support.cli import replicator_argv
from tests.support.env import clean_env

pytestmark = pytest.mark.integration


def assert_matches(spark: Any, wh: Path, stream: Any) -> None:
    for table in stream.tables:
        got = table_rows(spark, wh, SCHEMA, table)
        assert got == stream.expected[table], f"{SCHEMA}.{table} differs"


@pytest.mark.parametrize("protocol", ["open", "craft", "canal-json"])
def test_random_workload_equals_expected_state(kafka_bootstrap: str, spark: Any, tmp_path: Path,
                                               protocol: str) -> None:
    stream = generate(seed={"open": 11, "craft": 12}.get(protocol, 13), n_txn=400, n_partitions=3, n_tables=3,
                      truncate_prob=0.0)
    topic = new_topic(kafka_bootstrap, 3)
    produce_stream(kafka_bootstrap, topic, stream.partitions, protocol)
    wh = tmp_path / "wh"
    # ~1,100 rows through an 800-row buffer: more than one step, so more than one MERGE per table. A
    # step holds everything complete up to the watermark, so how many depends on how far the
    # partitions were read ahead (2-6 here); at 400 rows the buffer stays full and makes ~60 tiny steps.
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, max_buffer_rows=800,
                         spill_rows=0)
    assert summary.watermark == stream.final_ts
    assert summary.steps >= 2, summary.steps
    assert summary.replays_dropped > 0
    assert_matches(spark, wh, stream)


def _run_cli(bootstrap: str, topic: str, wh: Path) -> subprocess.Popen[bytes]:
    cmd = replicator_argv("run", "--bootstrap-servers", bootstrap, "--topic", topic, "--protocol", "open",
                          "--warehouse", str(wh), "--until-caught-up", "--max-buffer-rows", "1000")
    env = clean_env(REPLICATOR_SHUFFLE_PARTITIONS="1")
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


@pytest.mark.soak  # CI time: `make soak`; in CI tests/reliability/test_kills.py kills at random and named instants
def test_sigkill_at_random_instants_then_rerun(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    kills = int(os.environ.get("REPLICATOR_KILLS", "4"))
    stream = generate(seed=5, n_txn=700, n_partitions=3, n_tables=3, truncate_prob=0.0)
    topic = new_topic(kafka_bootstrap, 3)
    produce_stream(kafka_bootstrap, topic, stream.partitions, "open")
    wh = tmp_path / "wh"
    rnd = random.Random(99)
    killed = 0
    for _ in range(kills):
        proc = _run_cli(kafka_bootstrap, topic, wh)
        # JVM start-up takes ~8-15 s here; kill somewhere in start-up, mid-MERGE or between commits.
        time.sleep(rnd.uniform(6.0, 25.0))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=60)
    final = _run_cli(kafka_bootstrap, topic, wh)
    _, err = final.communicate(timeout=1200)
    assert final.returncode == 0, err.decode()[-3000:]
    assert killed >= 1, "the workload finished before any kill landed; make it larger"
    assert_matches(spark, wh, stream)
