"""Typed settings: precedence (flag > env > config file), strict booleans, secrets handling."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.cli import build_parser, main
from replicator.cli.common import settings_from
from replicator.cli.run import run_options
from replicator.cli.settings import DecodeCommand, ReplicatorSettings, SimulateCommand, load_settings, options
from replicator.errors import ConfigError

SECRET = "s3cr3t-PaSS-9f2c"
BOOLEANS = ("until_caught_up", "wait", "json_summary")


def parse(argv: list[str]) -> ReplicatorSettings:
    return settings_from(build_parser().parse_args(argv))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Settings read REPLICATOR_* from the process environment: start every test without any."""
    for name in list(os.environ):
        if name.upper().startswith("REPLICATOR_"):
            monkeypatch.delenv(name)


def test_flag_beats_env_beats_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text('bootstrap_servers = "cfg:1"\ntopic = "cfg-topic"\nwarehouse = "/cfg/wh"\nprotocol = "craft"\n'
                   "max-buffer-rows = 77\n")
    monkeypatch.setenv("REPLICATOR_TOPIC", "env-topic")
    monkeypatch.setenv("REPLICATOR_WAREHOUSE", "/env/wh")
    s = parse(["run", "--config", str(cfg), "--warehouse", "/flag/wh"])
    assert s.warehouse == "/flag/wh"
    assert s.topic == "env-topic"
    assert s.bootstrap_servers == "cfg:1"
    assert s.protocol == "craft"
    assert s.max_buffer_rows == 77  # a key spelled like the flag works too
    assert s.group_id is None and s.group_id_for("t") == "replicator-t"
    with pytest.raises(ConfigError, match=r"--group-id is required \(or set REPLICATOR_GROUP_ID"):
        s.require("group_id")


def test_config_file_from_env_and_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text('on_error = "skip"\n')
    monkeypatch.setenv("REPLICATOR_CONFIG", str(cfg))
    s = parse(["run"])
    assert s.on_error == "skip"
    assert (s.on_ddl_error, s.timezone, s.max_buffer_rows, s.kafka_retry_budget) == ("stop", "UTC", 200_000, 120.0)


def test_wrong_shapes_name_their_origin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text('max_buffer_rows = "lots"\n')
    with pytest.raises(ConfigError, match=r"`max_buffer_rows` in config file .*r\.toml"):
        parse(["run", "--config", str(cfg)])
    monkeypatch.setenv("REPLICATOR_MAX_BUFFER_ROWS", "many")
    with pytest.raises(ConfigError, match="REPLICATOR_MAX_BUFFER_ROWS"):
        parse(["run", "--config", str(cfg)])
    with pytest.raises(ConfigError, match="REPLICATOR_ON_ERROR"):
        monkeypatch.setenv("REPLICATOR_ON_ERROR", "explode")
        parse(["run"])
    (tmp_path / "bad.toml").write_text("this is = not toml =")
    with pytest.raises(ConfigError, match="cannot read config file"):
        parse(["run", "--config", str(tmp_path / "bad.toml")])


@pytest.mark.parametrize("name", BOOLEANS)
@pytest.mark.parametrize(("text", "expected"), [
    ("false", False), ("0", False), ("no", False), ("FALSE", False), ("No", False),
    ("true", True), ("1", True), ("yes", True), ("True", True), ("YES", True),
])
def test_boolean_env_values_are_parsed_not_truthy(name: str, text: str, expected: bool,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """REPLICATOR_UNTIL_CAUGHT_UP=false used to switch the option on (any non-empty string was truthy)."""
    monkeypatch.setenv("REPLICATOR_" + name.upper(), text)
    s = parse(["run", "--warehouse", "/w", "--protocol", "open"])
    assert getattr(s, name) is expected
    options = run_options(s)
    assert options.until_caught_up is (expected if name == "until_caught_up" else False)
    assert options.wait_for_lock is (expected if name == "wait" else False)


@pytest.mark.parametrize("name", BOOLEANS)
@pytest.mark.parametrize("text", ["maybe", "", "on", "2", "y"])
def test_boolean_env_typos_are_errors(name: str, text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    var = "REPLICATOR_" + name.upper()
    monkeypatch.setenv(var, text)
    with pytest.raises(ConfigError, match=f"^{var}: expected true/false, 1/0 or yes/no") as err:
        parse(["run"])
    assert err.value.exit_code == 2


def test_boolean_typo_stops_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REPLICATOR_UNTIL_CAUGHT_UP", "maybe")
    assert main(["run", "--archive", str(tmp_path), "--warehouse", str(tmp_path / "wh")]) == 2
    assert "REPLICATOR_UNTIL_CAUGHT_UP" in capsys.readouterr().err


def test_boolean_config_values(tmp_path: Path) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text('wait = true\nuntil_caught_up = "no"\njson-summary = "YES"\n')
    s = parse(["run", "--config", str(cfg)])
    assert (s.wait, s.until_caught_up, s.json_summary) == (True, False, True)
    cfg.write_text('wait = "perhaps"\n')
    with pytest.raises(ConfigError, match="`wait` in config file"):
        parse(["run", "--config", str(cfg)])


def test_a_flag_beats_a_false_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLICATOR_UNTIL_CAUGHT_UP", "false")
    assert parse(["run", "--until-caught-up"]).until_caught_up is True
    assert parse(["capture", "--out", "d"]).until_caught_up is False


def test_sasl_settings_from_env_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text(f'security_protocol = "SASL_SSL"\nsasl_mechanism = "SCRAM-SHA-512"\nsasl_password = "{SECRET}"\n')
    s = parse(["run", "--config", str(cfg), "--sasl-username", "alice"])
    assert s.kafka_security() == {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
                                  "sasl_plain_username": "alice", "sasl_plain_password": SECRET}
    assert SECRET not in repr(s) and SECRET not in str(s) and SECRET not in s.model_dump_json()
    monkeypatch.setenv("REPLICATOR_SASL_PASSWORD", "from-env")
    assert parse(["run", "--config", str(cfg)]).kafka_security()["sasl_plain_password"] == "from-env"


def test_password_is_never_a_flag() -> None:
    assert load_settings({"sasl_password": SECRET}).sasl_password is not None  # the typed API still takes one
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--sasl-password", SECRET])


def test_no_password_flag_and_none_in_help() -> None:
    for argv in (["--help"], ["run", "--help"], ["replay", "--help"], ["capture", "--help"], ["tables", "--help"]):
        out = subprocess.run([sys.executable, "-m", "replicator", *argv], capture_output=True, text=True,
                             env={"REPLICATOR_SASL_PASSWORD": SECRET, "PATH": "/usr/bin:/bin"}, timeout=60)
        assert out.returncode == 0 and SECRET not in out.stdout + out.stderr


def test_help_names_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default 200000" in text and "default 120" in text and "default UTC" in text


def test_failed_sasl_connection_does_not_print_the_password(tmp_path: Path) -> None:
    env = {"REPLICATOR_SASL_PASSWORD": SECRET, "PATH": "/usr/bin:/bin", "PYDANTIC_SETTINGS_DEBUG": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "replicator", "-v", "run", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t",
         "--protocol", "open", "--warehouse", str(tmp_path / "wh"), "--until-caught-up",
         "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", "u"],
        capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode != 0
    assert SECRET not in out.stdout + out.stderr
    assert "127.0.0.1:1" in out.stderr  # the error still says where it failed


def test_verbose_flag_lets_spark_start_loudly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from replicator.delta import spark

    try:
        assert main(["archive", "inspect", str(tmp_path)]) == 0
        assert spark._verbose is False
        assert main(["-v", "archive", "inspect", str(tmp_path)]) == 0
        assert spark._verbose is True
    finally:
        spark.set_verbose(False)


def test_command_options_keep_their_defaults_for_flags_not_given() -> None:
    ns = build_parser().parse_args(["simulate", "--protocol", "open", "--out", "d", "--events", "7"])
    cmd = options(SimulateCommand, vars(ns))
    assert (cmd.protocol, cmd.out, cmd.events, cmd.seed, cmd.partitions, cmd.tables, cmd.ddl) == (
        "open", "d", 7, 1, 3, 4, "auto")
    decode = options(DecodeCommand, vars(build_parser().parse_args(["decode", "--protocol", "craft", "--value", "-"])))
    assert (decode.timezone, decode.legacy, decode.key) == ("UTC", "auto", None)


def test_reader_from_flag_env_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["--warehouse", "/wh", "--protocol", "open"]
    assert run_options(parse(["run", *base])).reader == "driver"
    cfg = tmp_path / "r.toml"
    cfg.write_text('reader = "spark"\n')
    assert run_options(parse(["replay", "--from-earliest", "--config", str(cfg), *base])).reader == "spark"
    monkeypatch.setenv("REPLICATOR_READER", "spark")
    assert run_options(parse(["run", *base])).reader == "spark"
    assert run_options(parse(["run", "--reader", "driver", *base])).reader == "driver"
    monkeypatch.setenv("REPLICATOR_READER", "executors")
    with pytest.raises(ConfigError, match="REPLICATOR_READER"):
        parse(["run", *base])


def test_archives_are_read_by_the_driver(tmp_path: Path) -> None:
    archive = tmp_path / "a"
    archive.mkdir()
    code = main(["run", "--archive", str(archive), "--warehouse", str(tmp_path / "wh"), "--reader", "spark"])
    assert code == 2


def test_object_store_settings_and_the_spark_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--s3-endpoint & co. layer like every setting; the config file's [spark] table passes Spark and
    Hadoop settings through as they are (scalars as Spark writes them) and wins over the defaults."""
    from replicator.storage.options import StorageOptions

    config = tmp_path / "replicator.toml"
    config.write_text('warehouse = "s3a://lake/cdc"\ns3-endpoint = "http://127.0.0.1:9000"\n'
                      'lease_seconds = 30\n[spark]\n"spark.hadoop.fs.s3a.connection.maximum" = 200\n'
                      '"spark.hadoop.fs.s3a.retry.limit" = "9"\n"spark.hadoop.fs.s3a.fast.upload" = true\n')
    monkeypatch.setenv("REPLICATOR_S3_PATH_STYLE", "false")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    s = load_settings({}, config=str(config))
    assert (s.warehouse, s.s3_endpoint, s.s3_path_style, s.lease_seconds) == (
        "s3a://lake/cdc", "http://127.0.0.1:9000", False, 30.0)
    opts = s.storage()
    assert isinstance(opts, StorageOptions) and opts.region == "eu-west-3" and not opts.use_path_style
    conf = opts.s3a_conf()
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-3"
    assert conf["spark.hadoop.fs.s3a.connection.maximum"] == "200"
    assert conf["spark.hadoop.fs.s3a.retry.limit"] == "9"  # the user's value wins over ours
    assert conf["spark.hadoop.fs.s3a.fast.upload"] == "true"
    assert load_settings({"s3_path_style": "yes"}).storage().use_path_style
    assert StorageOptions(endpoint="http://x:1").use_path_style and not StorageOptions().use_path_style
    with pytest.raises(ConfigError, match="--lease-seconds"):
        load_settings({"lease_seconds": "0"})
