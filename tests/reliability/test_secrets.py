"""Secrets: a run against a real SASL_PLAINTEXT (PLAIN) broker listener takes its password from
the environment or the config file, replicates correctly, and the password appears nowhere: not
in verbose logs, the JSON summary, the dead-letter table, the warehouse's files or `--help`; a
wrong password fails clearly, naming the broker, without echoing the password either."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.deadletter import read_dead_letters
from replicator.sim import localkafka
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, produce_stream
from tests.kafka_fixtures import new_topic
from tests.reliability.common import assert_model_state
from tests.streamgen import generate
from tests.support.cli import run_replicator
from tests.support.env import cli_env

pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.timeout(1800)]

# Quotes and a backslash: a password must survive every layer (env, TOML, kafka-python, JAAS) intact.
SECRET = 'pw-7Qz"x\\9-unique-secret'
USER = "replicator-svc"
GARBAGE = b"\x00" * 8, b"\x01not a TiCDC message"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[localkafka.BrokerHandle]:
    state = tmp_path_factory.mktemp("sasl-kafka") / "broker"
    handle = localkafka.start(state, detach=False, sasl_users={USER: SECRET})
    try:
        yield handle
    finally:
        localkafka.stop(state)


def _run(broker: localkafka.BrokerHandle, topic: str, wh: Path, *extra: str, env: dict[str, str],
         timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return run_replicator("-v", "run", "--bootstrap-servers", broker.sasl_bootstrap, "--topic", topic,
                          "--protocol", "open", "--warehouse", str(wh), "--until-caught-up", "--json-summary",
                          "--on-error", "skip", *extra, env=cli_env(**env), timeout=timeout)


def _files_mentioning(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _assert_secret_nowhere(out: subprocess.CompletedProcess[str], wh: Path, spark: Any) -> None:
    assert SECRET not in out.stdout and SECRET not in out.stderr
    assert _files_mentioning(wh, SECRET.encode()) == []
    for row in read_dead_letters(spark, Warehouse(wh)) if Warehouse(wh).dead_letters_path.exists() else []:
        assert all(SECRET.encode() not in (v if isinstance(v, bytes) else str(v).encode()) for v in row.values())


def test_sasl_password_from_env_or_config_works_and_never_leaks(sasl_broker: localkafka.BrokerHandle, spark: Any,
                                                                tmp_path: Path) -> None:
    stream = generate(seed=91, n_txn=40, n_partitions=2, n_tables=2, truncate_prob=0.0)
    topic = new_topic(sasl_broker.bootstrap, 2, prefix="rel-sasl")  # produced on the plain listener
    produce(sasl_broker.bootstrap, topic, [(0, *GARBAGE)])
    produce_stream(sasl_broker.bootstrap, topic, stream.partitions, "open")
    sasl = ("--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", USER)

    # 1. Password from the environment.
    wh = tmp_path / "wh-env"
    out = _run(sasl_broker, topic, wh, *sasl, env={"REPLICATOR_SASL_PASSWORD": SECRET})
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout)
    assert summary["watermark_tso"] == stream.final_ts and summary["dead_letters"] == 1, summary
    assert_model_state(spark, wh, stream.expected, "replicated over SASL (password from env)")
    _assert_secret_nowhere(out, wh, spark)
    assert len(read_dead_letters(spark, Warehouse(wh))) == 1

    # 2. Everything from a TOML config file (the password too).
    wh2 = tmp_path / "wh-config"
    cfg = tmp_path / "replicator.toml"
    cfg.write_text(f'security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\nsasl_username = "{USER}"\n'
                   f"sasl_password = {json.dumps(SECRET)}\n")
    out = _run(sasl_broker, topic, wh2, "--config", str(cfg), env={})
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["watermark_tso"] == stream.final_ts
    assert_model_state(spark, wh2, stream.expected, "replicated over SASL (password from the config file)")
    _assert_secret_nowhere(out, wh2, spark)

    # 3. --help never shows it, whatever the environment holds.
    for argv in (["--help"], ["run", "--help"], ["replay", "--help"]):
        helped = run_replicator(*argv, env=cli_env(REPLICATOR_SASL_PASSWORD=SECRET), timeout=120)
        assert helped.returncode == 0 and SECRET not in helped.stdout + helped.stderr


def test_wrong_sasl_password_fails_clearly_without_echoing_it(sasl_broker: localkafka.BrokerHandle,
                                                              tmp_path: Path) -> None:
    topic = new_topic(sasl_broker.bootstrap, 1, prefix="rel-sasl-bad")
    wrong = SECRET + "-WRONG"
    wh = tmp_path / "wh"
    out = _run(sasl_broker, topic, wh, "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN",
               "--sasl-username", USER, "--kafka-retry-budget", "5",  # a rejected login: bootstrap waits this
               env={"REPLICATOR_SASL_PASSWORD": wrong}, timeout=300)
    assert out.returncode == 1, out.stderr[-3000:]
    assert "replicator run: error:" in out.stderr and sasl_broker.sasl_bootstrap in out.stderr, out.stderr[-3000:]
    assert "--sasl-username" in out.stderr  # points at the security settings
    assert "Traceback" not in out.stderr
    assert wrong not in out.stdout + out.stderr and SECRET not in out.stdout + out.stderr
    assert not Warehouse(wh).state_path.exists()  # nothing was applied
