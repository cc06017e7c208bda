"""`--log-format json` (replicator/logformat.py): one JSON object per stderr line; human lines unchanged."""

from __future__ import annotations

import io
import json
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator import logformat
from replicator.cli import build_parser
from replicator.engine.loop import _log_step
from replicator.events import TP
from replicator.logformat import HUMAN_FORMAT, JsonFormatter, position, resolve
from tests.support.cli import run_replicator
from tests.support.env import clean_env

KEYS = {"time", "level", "logger", "event"}


@pytest.fixture
def logger() -> Iterator[tuple[logging.Logger, io.StringIO, logging.StreamHandler[io.StringIO]]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    lg = logging.getLogger("replicator.test_log_format")
    lg.addHandler(handler)
    lg.setLevel(logging.DEBUG)
    lg.propagate = False
    try:
        yield lg, stream, handler
    finally:
        lg.removeHandler(handler)
        lg.propagate = True


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    text = stream.getvalue()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_every_line_is_a_json_object_with_the_keys(logger: tuple[logging.Logger, io.StringIO, object]) -> None:
    lg, stream, _ = logger
    lg.info("plain %s", "message")
    lg.warning("with\nnewlines and \"quotes\" and ünïcode")
    lg.debug("a debug line")
    lines = _lines(stream)
    assert len(lines) == 3
    for line in lines:
        assert set(line) >= KEYS
        assert line["logger"] == "replicator.test_log_format"
    assert lines[0]["event"] == "plain message" and lines[0]["level"] == "INFO"
    assert lines[1]["event"] == "with\nnewlines and \"quotes\" and ünïcode"
    t = str(lines[0]["time"])
    assert t.endswith("Z") and len(t) == len("2026-01-02T03:04:05.678Z"), t


def test_structured_fields_come_through(logger: tuple[logging.Logger, io.StringIO, object]) -> None:
    lg, stream, _ = logger
    lg.info("DDL at 5: x -> y", extra={"step": 7, "table": "db.t", "counts": {"upserts": 3, "deletes": 1},
                                       "position": position("topic", 2, 41), "nothing": None})
    (line,) = _lines(stream)
    assert line["step"] == 7 and line["table"] == "db.t"
    assert line["counts"] == {"upserts": 3, "deletes": 1}
    assert line["position"] == {"topic": "topic", "partition": 2, "offset": 41}
    assert "nothing" not in line  # None fields are left out


def test_an_exception_is_one_line(logger: tuple[logging.Logger, io.StringIO, object]) -> None:
    lg, stream, _ = logger
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        lg.exception("it failed")
    assert stream.getvalue().count("\n") == 1
    (line,) = _lines(stream)
    assert line["event"] == "it failed" and line["level"] == "ERROR"
    assert "Traceback" in str(line["exc"]) and "ValueError: boom\nsecond line" in str(line["exc"])


def test_the_step_line_carries_step_counts_and_positions(logger: tuple[logging.Logger, io.StringIO, object],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _, stream, handler = logger
    engine_log = logging.getLogger("replicator")
    monkeypatch.setattr(logformat, "ACTIVE", "json")
    monkeypatch.setattr(engine_log, "handlers", [handler])
    monkeypatch.setattr(engine_log, "propagate", False)
    monkeypatch.setattr(engine_log, "level", logging.INFO)
    record = {"step": 3, "kind": "window", "applied_ts": 99,
              "tables": {"u1": {"schema": "db", "table": "t", "version": 4, "upserts": 5, "deletes": 2}}}
    _log_step(record, {TP("topic-a", 0): 10, TP("topic-b", 1): 12})
    (line,) = _lines(stream)
    assert line["level"] == "INFO" and line["step"] == 3 and line["table"] == "db.t" and line["watermark"] == 99
    assert line["counts"] == {"db.t": {"upserts": 5, "deletes": 2}}
    assert line["positions"] == [position("topic-a", 0, 10), position("topic-b", 1, 12)]
    # A person's log (human) has it at DEBUG only: not at INFO.
    monkeypatch.setattr(logformat, "ACTIVE", "human")
    _log_step(record, {TP("topic-a", 0): 10})
    assert len(_lines(stream)) == 1


def test_human_lines_are_unchanged_and_ignore_the_extras() -> None:
    record = logging.LogRecord("replicator", logging.INFO, __file__, 1, "DDL at %s: %s", (5, "q"), None)
    record.step, record.table = 7, "db.t"
    line = logging.Formatter(HUMAN_FORMAT).format(record)
    assert line.endswith(" INFO replicator: DDL at 5: q")
    assert HUMAN_FORMAT == "%(asctime)s %(levelname)s %(name)s: %(message)s"


def test_configure_switches_the_format() -> None:
    root = logging.getLogger()
    saved, level = list(root.handlers), root.level
    stream = io.StringIO()
    try:
        logformat.configure("json", logging.INFO, stream, force=True)
        logging.getLogger("kafka.conn").error("a library's record")  # any logger: the root's handler
        logformat.configure("human", logging.INFO, stream, force=True)
        logging.getLogger("replicator").info("back to human")
    finally:
        logformat.configure("human", level, force=True)  # the module's format back to the default
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in saved:
            root.addHandler(h)
        root.setLevel(level)
    first, second = stream.getvalue().splitlines()
    assert json.loads(first)["logger"] == "kafka.conn"
    assert second.endswith(" INFO replicator: back to human") and not second.startswith("{")


def test_the_flag_goes_before_or_after_the_command_and_has_an_environment_twin() -> None:
    parser = build_parser()
    assert parser.parse_args(["--log-format", "json", "tables", "--warehouse", "w"]).log_format == "json"
    assert parser.parse_args(["tables", "--log-format", "json", "--warehouse", "w"]).log_format == "json"
    assert parser.parse_args(["--log-format", "json", "tables", "--warehouse", "w"]).log_format == "json"
    assert parser.parse_args(["tables", "--warehouse", "w"]).log_format is None
    assert resolve(None, {}) == "human"
    assert resolve(None, {"REPLICATOR_LOG_FORMAT": "JSON"}) == "json"
    assert resolve("human", {"REPLICATOR_LOG_FORMAT": "json"}) == "human"
    with pytest.raises(ValueError, match="REPLICATOR_LOG_FORMAT"):
        resolve(None, {"REPLICATOR_LOG_FORMAT": "xml"})


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_replicator(*args, env=clean_env("REPLICATOR_*", **env), timeout=120)


def test_a_failing_command_writes_only_json_lines_on_stderr(tmp_path: Path) -> None:
    """A warning (an unknown REPLICATOR_ variable) and the error the command ends with: JSON lines."""
    typo = "REPLICATOR_" + "WAREHOUS"  # spelt apart: the sources' REPLICATOR_ names are checked (test_cli_settings)
    out = _cli(["--log-format", "json", "tables", "--warehouse", str(tmp_path)], {typo: "x"})
    assert out.returncode != 0
    lines = [json.loads(line) for line in out.stderr.splitlines()]
    assert [line["level"] for line in lines] == ["WARNING", "ERROR"], out.stderr
    assert all(set(line) >= KEYS for line in lines)
    assert f"{typo} is not a replicator setting" in str(lines[0]["event"])
    assert str(lines[1]["event"]).startswith("replicator tables: error: ") and lines[1]["error"] == "ConfigError"
    # The environment twin, and the human format as it was.
    assert json.loads(_cli(["tables", "--warehouse", str(tmp_path)],
                           {"REPLICATOR_LOG_FORMAT": "json"}).stderr.splitlines()[-1])["level"] == "ERROR"
    human = _cli(["tables", "--warehouse", str(tmp_path)], {})
    assert human.stderr.startswith("replicator tables: error: ") and human.stderr.count("\n") == 1
