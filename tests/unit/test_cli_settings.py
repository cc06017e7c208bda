"""Typed settings: precedence (flag > env > config file), strict booleans, secrets handling."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.cli import build_parser, main
from replicator.cli.common import settings_from
from replicator.cli.run import run_options
from replicator.cli.settings import DecodeCommand, ReplicatorSettings, SimulateCommand, load_settings, options
from replicator.errors import ConfigError
from tests.support.cli import run_replicator

SECRET = "s3cr3t-PaSS-9f2c"
BOOLEANS = ("until_caught_up", "wait", "json_summary")


def parse(argv: list[str]) -> ReplicatorSettings:
    return settings_from(build_parser().parse_args(argv))


# Settings read REPLICATOR_* from the process environment: start every test without any.
pytestmark = pytest.mark.usefixtures("no_replicator_env")


def test_flag_beats_env_beats_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text('bootstrap_servers = "cfg:1"\ntopic = "cfg-topic"\nwarehouse = "/cfg/wh"\nprotocol = "craft"\n'
                   "max-buffer-rows = 77\n")
    monkeypatch.setenv("REPLICATOR_TOPIC", "env-topic")
    monkeypatch.setenv("REPLICATOR_WAREHOUSE", "/env/wh")
    s = parse(["run", "--config", str(cfg), "--warehouse", "/flag/wh"])
    assert s.warehouse == "/flag/wh"
    assert s.topic == ["env-topic"]
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
        out = run_replicator(*argv, env={"REPLICATOR_SASL_PASSWORD": SECRET, "PATH": "/usr/bin:/bin"}, timeout=60)
        assert out.returncode == 0 and SECRET not in out.stdout + out.stderr


def test_help_names_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default 200000" in text and "default 120" in text and "default UTC" in text


def test_failed_sasl_connection_does_not_print_the_password(tmp_path: Path) -> None:
    env = {"REPLICATOR_SASL_PASSWORD": SECRET, "PATH": "/usr/bin:/bin", "PYDANTIC_SETTINGS_DEBUG": "1"}
    out = run_replicator("-v", "run", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--protocol", "open",
                         "--warehouse", str(tmp_path / "wh"), "--until-caught-up", "--kafka-retry-budget", "2",
                         "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", "u",
                         env=env, timeout=120)
    assert out.returncode != 0
    assert SECRET not in out.stdout + out.stderr
    assert "127.0.0.1:1" in out.stderr  # the error still says where it failed


def test_verbose_flag_lets_spark_start_loudly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from replicator.runtime import spark

    try:
        assert main(["archive", "inspect", str(tmp_path)]) == 0
        assert spark.NEXT.verbose is False
        assert main(["-v", "archive", "inspect", str(tmp_path)]) == 0
        assert spark.NEXT.verbose is True
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


# --- strict configuration (issue 29): unknown config keys are errors, unknown variables warnings --------


def _config(tmp_path: Path, text: str) -> Path:
    cfg = tmp_path / "replicator.toml"
    cfg.write_text(text)
    return cfg


def _one_error_line(err: str, command: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"replicator {command}: error: "), err
    return lines[0]


@pytest.mark.parametrize(("text", "key", "closest"), [
    ("untill_caught_up = true\n", "`untill_caught_up`", "did you mean `until_caught_up`?"),
    ("apply_paralelism = 8\n", "`apply_paralelism`", "did you mean `apply_parallelism`?"),
    ("apply-paralelism = 8\n", "`apply-paralelism`", "did you mean `apply-parallelism`?"),  # the user's spelling
])
def test_unknown_top_level_key_is_an_error(tmp_path: Path, text: str, key: str, closest: str) -> None:
    cfg = _config(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_settings({}, config=str(cfg))
    assert str(err.value) == f"unknown key {key} in config file {cfg} ({closest})"
    assert err.value.exit_code == 2 and "\n" not in str(err.value)


def test_unknown_key_without_a_close_setting(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "config = 'other.toml'\n")  # the file cannot name another one either
    with pytest.raises(ConfigError, match=r"^unknown key `config` in config file .* \(no setting has a similar name"):
        load_settings({}, config=str(cfg))


@pytest.mark.parametrize("command", [
    ["tables"], ["run", "--protocol", "open"], ["replay", "--from-earliest", "--protocol", "open"],
])
def test_unknown_key_stops_the_command_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    """Exit 2 and one line on stderr, before the warehouse, Spark or Kafka is touched (both would
    fail here: no warehouse, no broker)."""
    import replicator.storage

    def no_store(*args: object, **kwargs: object) -> None:
        raise AssertionError("the store was configured before the config file was checked")

    monkeypatch.setattr(replicator.storage, "configure", no_store)
    cfg = _config(tmp_path, 'bootstrap_servers = "127.0.0.1:1"\ntopic = "t"\nuntill_caught_up = true\n')
    code = main([*command, "--config", str(cfg), "--warehouse", str(tmp_path / "wh")])
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    line = _one_error_line(out.err, command[0])
    assert line.endswith(f"unknown key `untill_caught_up` in config file {cfg} (did you mean `until_caught_up`?)")


def test_unknown_key_through_replicator_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, "apply_paralelism = 8\n")
    monkeypatch.setenv("REPLICATOR_CONFIG", str(cfg))
    assert main(["capture", "--out", str(tmp_path / "a")]) == 2
    assert "unknown key `apply_paralelism`" in _one_error_line(capsys.readouterr().err, "capture")


@pytest.mark.parametrize(("text", "message"), [
    # the settings under a header: TOML makes them `replicator.<key>`, which no command reads
    ("[replicator]\nuntil_caught_up = true\n",
     "unknown key `replicator.until_caught_up` in config file {cfg} "
     "(keys go at the top level: `until_caught_up`; the only table is [spark])"),
    ("[replicator]\nuntil-caught-up = true\n",
     "unknown key `replicator.until-caught-up` in config file {cfg} "
     "(keys go at the top level: `until-caught-up`; the only table is [spark])"),
    ("[replicator]\nuntill_caught_up = true\n",
     "unknown key `replicator.untill_caught_up` in config file {cfg} "
     "(keys go at the top level; the closest setting is `until_caught_up`)"),
    ("[kafka.consumer]\nbootstrap_servers = 'k:9092'\n",
     "unknown key `kafka.consumer.bootstrap_servers` in config file {cfg} "
     "(keys go at the top level: `bootstrap_servers`; the only table is [spark])"),
    ("[replicator]\nnothing_alike = 1\n",
     "unknown key `replicator.nothing_alike` in config file {cfg} "
     "(keys go at the top level; the only table is [spark])"),
    # a setting written as a table
    ("[warehouse]\npath = '/wh'\n",
     "unknown key `warehouse.path` in config file {cfg} (`warehouse` is a setting, not a table: "
     "`warehouse = ...` at the top level)"),
    ("[replicator]\n",
     "unknown table `[replicator]` in config file {cfg} (the only table is [spark]; settings go at the top level)"),
])
def test_unknown_key_in_a_table_is_an_error(tmp_path: Path, text: str, message: str) -> None:
    cfg = _config(tmp_path, 'topic = "t"\n' + text)
    with pytest.raises(ConfigError) as err:
        load_settings({"warehouse": "/flag/wh"}, config=str(cfg))  # a flag does not hide the file's mistake
    assert str(err.value) == message.format(cfg=cfg)
    assert err.value.exit_code == 2


def test_no_nested_table_but_spark() -> None:
    """[spark] is the one table; a typo inside another table is the unknown-table error above."""
    from typing import get_origin

    tables = {n for n, f in ReplicatorSettings.model_fields.items()
              if get_origin(f.annotation) is dict or f.annotation is dict}
    assert tables == {"spark"}


def test_same_key_spelled_twice_is_an_error(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "json-summary = true\njson_summary = false\n")
    with pytest.raises(ConfigError, match=r"`json-summary` and `json_summary` are the same setting"):
        load_settings({}, config=str(cfg))


def test_every_setting_is_accepted_by_every_command_reading_the_file(tmp_path: Path) -> None:
    """One file serves run, replay, tables, capture and archive inspect: a key that one of them takes
    (e.g. until_caught_up, which `tables` has no flag for) must not stop another."""
    values = {"until_caught_up": "true", "wait": "true", "json_summary": "true", "apply_parallelism": "4",
              "rotate_bytes": "1000", "reader": '"spark"', "kafka_retry_budget": "5", "max_buffer_rows": "10",
              "lease_seconds": "30", "table_features": '"compatible"', "s3_path_style": "false"}
    text = "".join(f"{k} = {v}\n" for k, v in values.items())
    cfg = _config(tmp_path, text + '[spark]\n"spark.sql.shuffle.partitions" = 4\n')
    for argv in (["tables"], ["run"], ["replay", "--from-earliest"], ["capture", "--out", "d"],
                 ["archive", "inspect", "s3a://b/p"]):
        s = parse([*argv, "--config", str(cfg)])
        assert s.until_caught_up and s.apply_parallelism == 4 and s.spark == {"spark.sql.shuffle.partitions": "4"}


def test_spark_table_takes_any_key(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = _config(tmp_path, '[spark]\n"spark.anything.at.all" = 1\n"not.even.spark" = "x"\n'
                            "spark.sql.shuffle.partitions = 8\n")  # bare dotted keys: nested tables to TOML
    with caplog.at_level("WARNING", logger="replicator"):
        s = load_settings({}, config=str(cfg))
    assert s.spark == {"spark.anything.at.all": "1", "not.even.spark": "x", "spark.sql.shuffle.partitions": "8"}
    assert not caplog.records


def test_setting_after_the_spark_header_is_passed_through_with_a_warning(tmp_path: Path,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    """TOML puts every key after `[spark]` into it: accepted (it is the pass-through table) but said."""
    cfg = _config(tmp_path, '[spark]\n"spark.sql.shuffle.partitions" = 8\nuntil_caught_up = true\n')
    with caplog.at_level("WARNING", logger="replicator"):
        s = load_settings({}, config=str(cfg))
    assert s.until_caught_up is False and s.spark["until_caught_up"] == "true"
    assert [r.getMessage() for r in caplog.records] == [
        f"config file {cfg}: `spark.until_caught_up` is in the [spark] table, passed to Spark as it is; "
        "as a replicator setting it goes above the first [table]"]


def test_spark_table_value_of_the_wrong_shape(tmp_path: Path) -> None:
    cfg = _config(tmp_path, '[spark]\n"spark.jars.packages" = ["a", "b"]\n')
    with pytest.raises(ConfigError, match=r'^`spark\."spark\.jars\.packages"` in config file .*valid string'):
        load_settings({}, config=str(cfg))
    cfg.write_text('[spark]\n"spark.sql.x" = 1\nspark.sql.x = 2\n')
    with pytest.raises(ConfigError, match=r"'spark\.sql\.x' is given twice"):
        load_settings({}, config=str(cfg))


@pytest.mark.parametrize(("text", "message"), [
    ('apply_parallelism = "eight"\n',
     "`apply_parallelism` in config file {cfg}: Input should be a valid integer, unable to parse string as an "
     "integer (got 'eight')"),
    ("apply_parallelism = 0\n",
     "`apply_parallelism` in config file {cfg}: Input should be greater than or equal to 1 (got 0)"),
    ('until_caught_up = "maybe"\n',
     "`until_caught_up` in config file {cfg}: expected true/false, 1/0 or yes/no (got 'maybe')"),
    ("until_caught_up = 2\n",
     "`until_caught_up` in config file {cfg}: expected true/false, 1/0 or yes/no (got 2)"),
    ('protocol = "json"\n',
     "`protocol` in config file {cfg}: Input should be 'open', 'craft', 'canal-json', 'simple' or 'csv' (got 'json')"),
])
def test_wrong_type_in_the_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       text: str, message: str) -> None:
    cfg = _config(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_settings({}, config=str(cfg))
    assert str(err.value) == message.format(cfg=cfg) and err.value.exit_code == 2
    assert main(["tables", "--config", str(cfg), "--warehouse", str(tmp_path)]) == 2
    assert _one_error_line(capsys.readouterr().err, "tables").endswith(message.format(cfg=cfg))


@pytest.mark.parametrize(("text", "where"), [
    ("until_caught_up = \n", "(at line 1, column 19)"),
    ('warehouse = "/wh"\nuntil_caught_up = maybe\n', "(at line 2, column 19)"),
    ("[spark\n", "(at line 1, column 7)"),
    ('topic = "a"\ntopic = "b"\n', "(at line 2, column 12)"),
])
def test_toml_syntax_error_names_file_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      text: str, where: str) -> None:
    cfg = _config(tmp_path, text)
    assert main(["tables", "--config", str(cfg), "--warehouse", str(tmp_path)]) == 2
    line = _one_error_line(capsys.readouterr().err, "tables")
    assert f"cannot read config file {cfg}: " in line and line.endswith(where)


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tables", "--config", str(tmp_path / "nope.toml"), "--warehouse", str(tmp_path)]) == 2
    assert "nope.toml" in _one_error_line(capsys.readouterr().err, "tables")


@pytest.fixture()
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    from replicator.cli import settings as settings_module

    monkeypatch.setattr(settings_module, "_WARNED", set())


@pytest.mark.usefixtures("_fresh_warnings")
def test_unknown_environment_variable_warns_once(monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    typo = "REPLICATOR_UNTIL_CAUGHT_UPP"  # (the registry test below skips this file, typos and all)
    monkeypatch.setenv(typo, "true")
    monkeypatch.setenv("REPLICATOR_SPARK_MASTR", "local[2]")
    monkeypatch.setenv("REPLICATOR_SPARK_MASTER", "local[2]")  # read by runtime/spark.py: no warning
    monkeypatch.setenv("REPLICATOR_TOPIC", "t")
    with caplog.at_level("WARNING", logger="replicator"):
        s = load_settings({})
        load_settings({})  # once per process
    assert s.until_caught_up is False and s.topic == ["t"]  # a warning, not an error, and not a setting
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("replicator", "WARNING", "REPLICATOR_SPARK_MASTR is not a replicator setting "
                                  "(did you mean REPLICATOR_SPARK_MASTER?)"),
        ("replicator", "WARNING", f"{typo} is not a replicator setting (did you mean REPLICATOR_UNTIL_CAUGHT_UP?)"),
    ]


@pytest.mark.usefixtures("_fresh_warnings")
def test_no_warning_for_the_variables_the_code_base_reads(monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    from replicator.cli.settings import env_names, warn_unknown_environment

    for name in env_names():
        if name not in ("REPLICATOR_CONFIG", "REPLICATOR_SPARK"):  # a file to read, a JSON table
            monkeypatch.setenv(name, "1")
    with caplog.at_level("WARNING", logger="replicator"):
        warn_unknown_environment()  # (load_settings would stop on values such as REPLICATOR_PROTOCOL=1)
    assert not caplog.records


def test_environment_warning_goes_to_stderr(tmp_path: Path) -> None:
    typo = "REPLICATOR_APPLY_PARALELISM"
    out = run_replicator("tables", "--warehouse", str(tmp_path / "wh"), env={typo: "8", "PATH": "/usr/bin:/bin"},
                         timeout=60)
    assert out.returncode == 2 and out.stdout == ""
    assert f"WARNING replicator: {typo} is not a replicator setting (did you mean REPLICATOR_APPLY_PARALLELISM?)" \
        in out.stderr


#: Where REPLICATOR_ names are written down: the package, the benchmarks, tools, docs, notebooks, the
#: tests (the harnesses set some), the Makefile and the README.
_SOURCES = ("replicator", "bench", "tools", "docs", "notebooks", "tests", "Makefile", "README.md")
_TEXT = {".py", ".md", ".toml", ".ipynb", ".sh", ".txt", ".cfg", ".ini", ".yml", ".yaml", ".json", ".conf", ""}


def test_every_replicator_variable_in_the_sources_is_known() -> None:
    """Every REPLICATOR_ name written in the code base is a setting's variable or in OTHER_ENV_VARS
    (else setting it would warn), and every name there is still used (the list stays true)."""
    import re

    from replicator.cli.settings import OTHER_ENV_VARS, env_names

    root = Path(__file__).resolve().parents[2]
    found: dict[str, Path] = {}
    for source in _SOURCES:
        top = root / source
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for f in files:
            if "__pycache__" in f.parts or f.suffix not in _TEXT or f.resolve() == Path(__file__).resolve():
                continue
            for name in re.findall(r"REPLICATOR_[A-Z0-9_]+", f.read_text(errors="replace")):
                found.setdefault(name, f.relative_to(root))
    assert "REPLICATOR_SPARK_MASTER" in found and "REPLICATOR_UNTIL_CAUGHT_UP" in found  # the scan sees them
    unknown = {n: str(f) for n, f in found.items() if n not in env_names()}
    assert unknown == {}, "add these to OTHER_ENV_VARS in replicator/cli/settings.py (or fix the typo)"
    assert len(set(OTHER_ENV_VARS)) == len(OTHER_ENV_VARS)
    pending = {"REPLICATOR_MAVEN_REPOSITORY", "REPLICATOR_JARS_CACHE"}  # being added to runtime/jars.py
    assert {n for n in OTHER_ENV_VARS if n not in found} <= pending


def test_flush_interval_reaches_the_run_from_flag_env_and_config_file(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs tell followers (and every shard alike) to set `--flush-interval`: it is a setting like
    the others, with its default from the engine's one definition."""
    from replicator.engine.options import DEFAULT_FLUSH_INTERVAL_S

    base = ["--warehouse", str(tmp_path / "wh"), "--protocol", "open", "--topic", "t"]
    assert run_options(parse(["run", *base])).flush_interval_s == DEFAULT_FLUSH_INTERVAL_S == 2.0
    assert run_options(parse(["run", "--flush-interval", "0.5", *base])).flush_interval_s == 0.5
    monkeypatch.setenv("REPLICATOR_FLUSH_INTERVAL", "7")
    assert run_options(parse(["run", *base])).flush_interval_s == 7.0
    cfg = tmp_path / "r.toml"
    cfg.write_text("flush-interval = 30\n")
    monkeypatch.delenv("REPLICATOR_FLUSH_INTERVAL")
    assert run_options(parse(["run", "--config", str(cfg), *base])).flush_interval_s == 30.0
    with pytest.raises(ConfigError, match="--flush-interval"):
        load_settings({"flush_interval": "0"})
