"""Settings precedence (flag > env > config file) and secrets handling."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from replicator.cli import Settings, build_parser
from replicator.errors import ConfigError

SECRET = "s3cr3t-PaSS-9f2c"


def parse(argv: list[str]) -> Settings:
    return Settings(build_parser().parse_args(argv))


def test_flag_beats_env_beats_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text('bootstrap_servers = "cfg:1"\ntopic = "cfg-topic"\nwarehouse = "/cfg/wh"\nprotocol = "craft"\n')
    monkeypatch.setenv("REPLICATOR_TOPIC", "env-topic")
    monkeypatch.setenv("REPLICATOR_WAREHOUSE", "/env/wh")
    s = parse(["run", "--config", str(cfg), "--warehouse", "/flag/wh"])
    assert s.get("warehouse") == "/flag/wh"
    assert s.get("topic") == "env-topic"
    assert s.get("bootstrap_servers") == "cfg:1"
    assert s.get("protocol") == "craft"
    with pytest.raises(ConfigError, match="--group-id is required"):
        s.get("group_id", required=True)


def test_sasl_settings_from_env_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text(f'security_protocol = "SASL_SSL"\nsasl_mechanism = "SCRAM-SHA-512"\nsasl_password = "{SECRET}"\n')
    s = parse(["run", "--config", str(cfg), "--sasl-username", "alice"])
    assert s.kafka_security() == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                  "sasl_plain_username": "alice", "sasl_plain_password": SECRET}
    monkeypatch.setenv("REPLICATOR_SASL_PASSWORD", "from-env")
    assert parse(["run", "--config", str(cfg)]).kafka_security()["sasl_plain_password"] == "from-env"


def test_no_password_flag_and_none_in_help() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--sasl-password", SECRET])
    for argv in (["--help"], ["run", "--help"], ["replay", "--help"], ["capture", "--help"]):
        out = subprocess.run([sys.executable, "-m", "replicator", *argv], capture_output=True, text=True,
                             env={"REPLICATOR_SASL_PASSWORD": SECRET, "PATH": "/usr/bin:/bin"}, timeout=60)
        assert out.returncode == 0 and SECRET not in out.stdout + out.stderr


def test_failed_sasl_connection_does_not_print_the_password(tmp_path: Path) -> None:
    env = {"REPLICATOR_SASL_PASSWORD": SECRET, "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "replicator", "-v", "run", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t",
         "--protocol", "open", "--warehouse", str(tmp_path / "wh"), "--until-caught-up",
         "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", "u"],
        capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0
    assert SECRET not in out.stdout + out.stderr
    assert "127.0.0.1:1" in out.stderr  # the error still says where it failed
