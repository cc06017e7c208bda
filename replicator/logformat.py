"""How log records are written on stderr: `human` (the default) or `json` (`--log-format json`,
REPLICATOR_LOG_FORMAT=json), one JSON object per line for log shippers.

A JSON line holds `time` (ISO 8601, UTC, milliseconds), `level`, `logger`, `event` (the message as
the human format shows it), then the structured fields the log call passed with `extra=` (`step`,
`table`, `counts`, `position`: {"topic", "partition", "offset"}, ...), and `exc` (the formatted
traceback, newlines escaped, so still one line) when the record carries an exception. The human
format ignores the extras: its lines are exactly what they were.

The formatter is set on the root logger's handler, so the records of every library that logs
through Python's logging (py4j, pyspark, kafka-python, botocore) come out in the same format; what
the JVM itself writes on fd 2 (Spark's log4j lines) is not Python logging and stays as it is.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
from typing import Any, Literal

LogFormat = Literal["human", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("human", "json")
ENV = "REPLICATOR_LOG_FORMAT"
HUMAN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: The attributes every LogRecord has: anything else on a record came from `extra=`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}

ACTIVE: LogFormat = "human"
"""The format `configure` set last: what the engine's own step lines are shaped for."""


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in out and value is not None:
                out[key] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def resolve(flag: str | None, environ: dict[str, str] | None = None) -> LogFormat:
    """The format: the flag, else REPLICATOR_LOG_FORMAT, else human. ValueError for another name."""
    value = flag if flag is not None else (os.environ if environ is None else environ).get(ENV, "") or "human"
    value = value.strip().lower()
    if value not in LOG_FORMATS:
        raise ValueError(f"unknown log format {value!r} ({'--log-format' if flag is not None else ENV}): "
                         f"expected one of {', '.join(LOG_FORMATS)}")
    return value  # type: ignore[return-value]


def configure(fmt: LogFormat, level: int, stream: Any = None, *, force: bool = False) -> None:
    """The root logger writes `fmt` lines at `level` and above on `stream` (stderr).

    Like `logging.basicConfig`, it leaves a root logger that someone else gave handlers alone (a
    host embedding `replicator.cli.main`, pytest) unless `force`; a handler of an earlier call is
    replaced, so a second call switches the format."""
    global ACTIVE
    ACTIVE = fmt
    root = logging.getLogger()
    ours = [h for h in root.handlers if getattr(h, "_replicator", False)]
    if not force and len(ours) < len(root.handlers):
        return
    for old in ours if not force else list(root.handlers):
        root.removeHandler(old)
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(HUMAN_FORMAT))
    handler._replicator = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)


def json_logs() -> bool:
    """Whether stderr carries JSON lines: then nothing else may write on it (no live display)."""
    return ACTIVE == "json"


def event_level() -> int:
    """The level of the per-step / caught-up events: INFO for a log shipper (JSON), DEBUG (-v) for
    a person, whose terminal has the live display and the run summary instead."""
    return logging.INFO if ACTIVE == "json" else logging.DEBUG


def position(topic: str, partition: int, offset: int) -> dict[str, Any]:
    """The `position` field of a log line."""
    return {"topic": topic, "partition": partition, "offset": offset}
