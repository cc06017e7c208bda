"""Helpers shared by the command modules: settings from parsed flags, time zones, summaries."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any, Protocol

from replicator.cli.settings import ReplicatorSettings, load_settings
from replicator.errors import ConfigError
from replicator.runtime import jars


class Summary(Protocol):
    def render(self) -> str: ...

    def to_json(self) -> Any: ...


def settings_from(ns: argparse.Namespace) -> ReplicatorSettings:
    """The layered settings of one parsed command line (flags left unset do not count); the
    process's storage options (object-store endpoint, Spark pass-through) are set from them."""
    from replicator.storage import configure

    settings = load_settings(vars(ns), config=getattr(ns, "config", None))
    configure(settings.storage())
    # The jar groups of the Spark session this command may start (declared in replicator.runtime.jars).
    if settings.reader == "spark":
        jars.require("kafka")
    if settings.warehouse and jars.needs_s3(settings.warehouse):
        jars.require("s3")
    return settings


def add_storage(p: argparse.ArgumentParser) -> None:
    """--warehouse and how to reach its store (each also REPLICATOR_<FLAG> and a --config key)."""
    p.add_argument("--warehouse", help="warehouse: a directory, or an object-store URL such as s3a://bucket/prefix "
                                       "(Delta tables + replicator state)")
    add_store_access(p)


def add_store_access(p: argparse.ArgumentParser) -> None:
    """How to reach an object store (each also REPLICATOR_<FLAG> and a --config key): for commands
    whose paths may be URLs (`capture --out`, `archive inspect`) and, with --warehouse, `add_storage`."""
    p.add_argument("--s3-endpoint", metavar="URL",
                   help="endpoint of an S3-compatible store (e.g. http://127.0.0.1:9000); credentials come from the "
                        "standard AWS sources (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, roles)")
    p.add_argument("--s3-path-style", metavar="BOOL",
                   help="path-style S3 addressing (default: true when --s3-endpoint is given)")
    p.add_argument("--s3-conditional-writes", metavar="BOOL",
                   help="require the store to honour conditional PUTs (If-None-Match / If-Match), which fence a "
                        "stale writer out of Delta commits and progress (default true); false only for a store "
                        "that lacks them, with one replicator per warehouse ensured otherwise")
    p.add_argument("--storage-retry-budget", type=float, metavar="SECONDS",
                   help="stop (non-zero, nothing lost) once the store has been unreachable this long (default 60)")


def add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="TOML config file (also REPLICATOR_CONFIG)")


def time_zone(name: str | None) -> dt.tzinfo:
    """A zone name to tzinfo; ConfigError for an unknown one."""
    if not name or name.upper() == "UTC":
        return dt.UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"unknown time zone {name!r}") from None


def read_input(path: str) -> bytes:
    """A file named on the command line ('-' = stdin); ConfigError if unreadable."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None


def print_summary(summary: Summary, settings: ReplicatorSettings) -> None:
    """The run summary, readable or (--json-summary) one JSON line, on stdout."""
    if settings.json_summary:
        sys.stdout.write(json.dumps(summary.to_json()) + "\n")
    else:
        sys.stdout.write(summary.render() + "\n")
    sys.stdout.flush()


def files_text(files: int | None, small: int | None) -> str:
    """The terminal's "files (small)" cell of `tables` and `status`: live data files, and how many
    of them are small (under half compaction's default target, delta/rowcount.py)."""
    return "-" if files is None else f"{files:,} ({small or 0:,})"


def age_text(seconds: float) -> str:
    """A short age: 40s, 12m, 5h, 3d."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def maintained_text(compacted_at: float | None, vacuumed_at: float | None, now: float) -> str:
    """The terminal's "maintained" cell of `tables` and `status`: how long ago a follower or
    `replicator maintain` last compacted and vacuumed the table (state.json); "-" for never."""
    parts = [f"{what} {age_text(now - at)} ago" for what, at in (("compacted", compacted_at),
                                                                 ("vacuumed", vacuumed_at)) if at is not None]
    return ", ".join(parts) or "-"
