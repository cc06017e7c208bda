"""`replicator` command line. Thin: parse, resolve settings, call the stage that does the work.

Settings resolve flag > environment (REPLICATOR_<NAME>, e.g. REPLICATOR_BOOTSTRAP_SERVERS) >
config file (--config FILE, TOML; keys are the long flag names with '_' for '-'). Every
ReplicatorError becomes a one-line message and a non-zero exit; anything else is a bug.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replicator import __version__
from replicator.errors import ConfigError, ReplicatorError

log = logging.getLogger("replicator")

SECRET_KEYS = {"sasl_password", "ssl_password", "ssl_keyfile_password"}


class Settings:
    """flag > env > config file > default, for one parsed command line."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.file: dict[str, Any] = {}
        cfg = getattr(args, "config", None) or os.environ.get("REPLICATOR_CONFIG")
        if cfg:
            try:
                self.file = tomllib.loads(Path(cfg).read_text())
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"cannot read config file {cfg}: {exc}") from None

    def get(self, name: str, default: Any = None, *, required: bool = False) -> Any:
        value = getattr(self.args, name, None)
        if value is None:
            value = os.environ.get("REPLICATOR_" + name.upper())
        if value is None:
            value = self.file.get(name, self.file.get(name.replace("_", "-")))
        if value is None:
            value = default
        if value is None and required:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} is required (or set REPLICATOR_{name.upper()}, or `{name}` in --config)")
        return value

    def kafka_security(self) -> dict[str, Any]:
        """SASL/SSL settings for kafka-python; passwords come only from env or config, never flags."""
        out: dict[str, Any] = {}
        mapping = {
            "security_protocol": "security_protocol", "sasl_mechanism": "sasl_mechanism",
            "sasl_username": "sasl_plain_username", "sasl_password": "sasl_plain_password",
            "ssl_cafile": "ssl_cafile", "ssl_certfile": "ssl_certfile", "ssl_keyfile": "ssl_keyfile",
            "ssl_password": "ssl_password",
        }
        for name, key in mapping.items():
            value = self.get(name)
            if value is not None:
                out[key] = value
        return out


def _add_connection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-servers", help="Kafka bootstrap servers HOST:PORT[,HOST:PORT]")
    p.add_argument("--topic", help="the TiCDC topic")
    p.add_argument("--protocol", choices=["open", "craft"], help="TiCDC wire format of the topic")
    p.add_argument("--warehouse", help="warehouse directory (Delta tables + replicator state)")
    p.add_argument("--group-id", help="Kafka consumer group for offset commits (default: replicator-<topic>)")
    p.add_argument("--security-protocol", help="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    p.add_argument("--sasl-mechanism", help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")
    p.add_argument("--sasl-username", help="SASL user (the password comes from REPLICATOR_SASL_PASSWORD or --config)")
    p.add_argument("--ssl-cafile", help="CA bundle for SSL")
    p.add_argument("--until-caught-up", action="store_true", default=None,
                   help="read up to the end offsets seen at start, apply, commit, print a summary and exit")
    p.add_argument("--on-error", choices=["stop", "skip"],
                   help="undecodable message: dead-letter and stop (default) or skip")
    p.add_argument("--on-ddl-error", choices=["stop", "skip"],
                   help="unmappable DDL: stop (default) or dead-letter and skip")
    p.add_argument("--table-features", choices=["compatible", "fast"],
                   help="Delta features of new tables: compatible (default; readable by deltalake and polars, "
                   "features added by the DDL that needs them) or fast (all up front)")
    p.add_argument("--timezone", help="upstream time zone of TIMESTAMP values (default UTC)")
    p.add_argument("--legacy", choices=["auto", "legacy", "modern"], help="Open Protocol pre-4.0.6 base64 strings")
    p.add_argument("--zero-dates", choices=["error", "null"], help="zero DATE/DATETIME values: error (default) or NULL")
    p.add_argument("--max-buffer-rows", type=int,
                   help="bound on buffered rows: apply complete windows once reached (default 200000)")
    p.add_argument("--kafka-retry-budget", type=float, metavar="SECONDS",
                   help="stop (non-zero, nothing lost) once the broker has been unreachable this long (default 120)")
    p.add_argument("--wait", action="store_true", default=None, help="wait for another run on the warehouse to finish")
    p.add_argument("--json-summary", action="store_true", default=None, help="print the summary as JSON")
    p.add_argument("--config", help="TOML config file")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replicator",
        description="Replicate a TiCDC Kafka topic (Open Protocol or Craft) into Delta Lake tables, exactly once.",
    )
    parser.add_argument("--version", action="version", version=f"replicator {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="replicate a topic (or archives) into a warehouse")
    _add_connection(run)
    run.add_argument("--archive", nargs="+", metavar="PATH", help="replicate from capture archives instead of Kafka")
    run.add_argument("--binlog", nargs="+", metavar="PATH", help="apply a statement binlog instead of Kafka")

    replay = sub.add_parser("replay", help="re-read a topic from chosen offsets and re-apply")
    _add_connection(replay)
    start = replay.add_mutually_exclusive_group(required=True)
    start.add_argument("--from-earliest", action="store_true", help="from the earliest retained offsets")
    start.add_argument("--from-offsets", metavar="P=O[,P=O...]", help="from these offsets (other partitions: stored)")
    start.add_argument("--from-timestamp", metavar="ISO8601", help="from the first offsets at/after this time")

    tables = sub.add_parser("tables", help="list the replicated tables of a warehouse")
    tables.add_argument("--warehouse", help="warehouse directory")
    tables.add_argument("--json", action="store_true", help="a JSON array instead of a readable table")
    tables.add_argument("--config", help="TOML config file")

    capture = sub.add_parser("capture", help="archive a topic's records into rotating framed files")
    capture.add_argument("--bootstrap-servers", help="Kafka bootstrap servers HOST:PORT[,HOST:PORT]")
    capture.add_argument("--topic", help="topic to capture")
    capture.add_argument("--out", required=True, metavar="DIR", help="archive directory")
    capture.add_argument("--protocol", choices=["open", "craft"],
                         help="recorded in each archived record (default: detected from the first record's key)")
    cstart = capture.add_mutually_exclusive_group()
    cstart.add_argument("--from-earliest", action="store_true", help="from the earliest retained offsets")
    cstart.add_argument("--from-offsets", metavar="P=O[,P=O...]", help="from these offsets")
    capture.add_argument("--until-caught-up", action="store_true", default=None,
                         help="stop at the end offsets seen at start")
    capture.add_argument("--rotate-bytes", type=int, help="start a new archive file past this size")
    capture.add_argument("--group-id", help="Kafka consumer group for offset commits")
    capture.add_argument("--config", help="TOML config file")

    archive = sub.add_parser("archive", help="work with capture archives")
    archive_sub = archive.add_subparsers(dest="archive_command", metavar="ACTION", required=True)
    inspect = archive_sub.add_parser("inspect", help="print frames (offset, type, length, CRC) and records")
    inspect.add_argument("paths", nargs="+", metavar="PATH")

    simulate = sub.add_parser("simulate", help="generate a realistic TiCDC stream plus its expected final tables")
    simulate.add_argument("--protocol", choices=["open", "craft"], required=True)
    simulate.add_argument("--topic", help="produce into this topic (with --bootstrap-servers)")
    simulate.add_argument("--bootstrap-servers", help="Kafka bootstrap servers")
    simulate.add_argument("--out", metavar="DIR", help="write an archive directory instead of producing")
    simulate.add_argument("--seed", type=int, default=1, help="random seed (same seed, same stream)")
    simulate.add_argument("--events", type=int, default=5000, help="number of row changes")
    simulate.add_argument("--partitions", type=int, default=3, help="Kafka partitions")
    simulate.add_argument("--tables", type=int, default=4, help="number of tables")
    simulate.add_argument("--expected", metavar="FILE", help="where to write the expected final tables (JSON)")
    simulate.add_argument("--ddl", metavar="KINDS", default="auto",
                          help="mid-stream DDL: auto (what this build applies), all, none, or a comma list of "
                               "create_schema,add_column,modify_column,truncate,drop_column,drop_table,rename_table")

    binlog = sub.add_parser("binlog", help="the statement-based protobuf binary log")
    binlog_sub = binlog.add_subparsers(dest="binlog_command", metavar="ACTION", required=True)
    bwrite = binlog_sub.add_parser("write", help="append a Query (or Commit/Rollback) event")
    bwrite.add_argument("--file", default="log.bin", help="binlog file (default log.bin)")
    bwrite.add_argument("--trans", type=int, required=True, help="transaction id")
    bwrite.add_argument("--server-id", type=int, default=1, help="server id (default 1)")
    bwrite.add_argument("--session-id", type=int, default=0, help="session id (default 0)")
    bwrite.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="session variable")
    bwhat = bwrite.add_mutually_exclusive_group()
    bwhat.add_argument("--commit", action="store_true", help="append a Commit event")
    bwhat.add_argument("--rollback", action="store_true", help="append a Rollback event")
    bwrite.add_argument("query", nargs="?", help="the SQL statement")
    bread = binlog_sub.add_parser("read", help="print events in the seed's shape, following Chain events")
    bread.add_argument("paths", nargs="*", metavar="FILE", help="binlog files (default log.bin)")
    bread.add_argument("--verbose", action="store_true", help="also print Start/Chain events")

    decode = sub.add_parser("decode", help="decode one captured Kafka message to JSON lines")
    decode.add_argument("--protocol", choices=["open", "craft"], required=True)
    decode.add_argument("--value", required=True, metavar="FILE", help="message value file ('-' = stdin)")
    decode.add_argument("--key", metavar="FILE", help="message key file (Open Protocol)")
    decode.add_argument("--timezone", default="UTC", help="upstream time zone of TIMESTAMP values")
    decode.add_argument("--legacy", choices=["auto", "legacy", "modern"], default="auto")
    return parser


def _tz(name: str | None) -> dt.tzinfo:
    if not name or name.upper() == "UTC":
        return dt.UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"unknown time zone {name!r}") from None


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None


def cmd_decode(args: argparse.Namespace) -> int:
    from replicator.codec.render import render_lines
    from replicator.codec.values import DecodeOptions
    from replicator.engine.pipeline import decoder_for
    from replicator.events import Position

    value = _read(args.value)
    key = _read(args.key) if args.key else None
    opts = DecodeOptions(timezone=_tz(args.timezone), legacy=args.legacy)
    events = decoder_for(args.protocol)(key, value, opts, Position(args.value, -1, -1))
    for line in render_lines(events):
        sys.stdout.write(line + "\n")
    return 0


def cmd_tables(args: argparse.Namespace) -> int:
    from replicator.delta.warehouse import Warehouse

    s = Settings(args)
    wh = Warehouse(s.get("warehouse", required=True))
    if not wh.state_path.exists():
        raise ConfigError(f"{wh.root} is not a replicator warehouse (no _replicator/state.json)")
    state = wh.load_state()
    from replicator.delta.features import reader_features

    rows = [
        {"schema": e.schema_name, "table": e.table, "path": str(Path(e.path).resolve()), "key": e.key,
         "applied_ts": state.applied_ts, "reader_features": reader_features(e.path)}
        for e in state.live_tables()
    ]
    if args.json:
        sys.stdout.write(json.dumps(rows) + "\n")
        return 0
    from rich.console import Console
    from rich.table import Table

    from replicator.events import tso_to_datetime

    table = Table(title=f"warehouse {wh.root}")
    for col in ("schema", "table", "key", "applied watermark", "reader features", "path"):
        table.add_column(col)
    for r in rows:
        ts = int(state.applied_ts)
        when = tso_to_datetime(ts).isoformat() if ts else "-"
        table.add_row(str(r["schema"]), str(r["table"]), ", ".join(map(str, r["key"])), f"{ts} ({when})",  # type: ignore[call-overload]
                      ", ".join(r["reader_features"]) or "-", str(r["path"]))  # type: ignore[arg-type]
    Console().print(table)
    return 0


def _run_options(s: Settings, *, start: Any = None) -> Any:
    from replicator.codec.values import DecodeOptions
    from replicator.delta.features import check_profile
    from replicator.engine.pipeline import RunOptions

    return RunOptions(
        warehouse=s.get("warehouse", required=True),
        protocol=s.get("protocol", required=True),
        until_caught_up=bool(s.get("until_caught_up", False)),
        on_error=s.get("on_error", "stop"),
        on_ddl_error=s.get("on_ddl_error", "stop"),
        decode=DecodeOptions(timezone=_tz(s.get("timezone")), legacy=s.get("legacy", "auto"),
                             zero_dates=s.get("zero_dates", "error")),
        start=start,
        max_buffer_rows=int(s.get("max_buffer_rows", 200_000)),
        wait_for_lock=bool(s.get("wait", False)),
        table_features=check_profile(s.get("table_features", "compatible")),
    )


def _kafka_source(s: Settings) -> Any:
    from replicator.sources.kafka import KafkaSettings, KafkaSource

    topic = s.get("topic", required=True)
    return KafkaSource(KafkaSettings(
        bootstrap_servers=s.get("bootstrap_servers", required=True), topic=topic,
        group_id=s.get("group_id", f"replicator-{topic}"), security=s.kafka_security(),
        retry_budget_s=float(s.get("kafka_retry_budget", 120.0)),
    ))


def _finish(summary: Any, s: Settings) -> int:
    if s.get("json_summary"):
        sys.stdout.write(json.dumps(summary.to_json()) + "\n")
    else:
        sys.stdout.write(summary.render() + "\n")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from replicator.engine.pipeline import Engine

    s = Settings(args)
    if args.archive and args.binlog:
        raise ConfigError("--archive and --binlog are different sources: give one")
    if args.binlog:
        from replicator.binlog_apply import cmd_run_binlog

        return int(cmd_run_binlog(args, s))
    if args.archive:
        from replicator.sources.archive import ArchiveSource

        archive = ArchiveSource(args.archive)  # checks every frame first: corruption stops before anything applies
        given = s.get("protocol")
        if given is not None and given != archive.protocol:
            raise ConfigError(f"--protocol {given}, but the archive holds {archive.protocol} records")
        args.protocol = archive.protocol
        options = _run_options(s)
        options.until_caught_up = True  # an archive is finite: read it to the end, apply, exit
        return _finish(Engine(archive, options).run(), s)
    source = _kafka_source(s)
    return _finish(Engine(source, _run_options(s)).run(), s)


def cmd_replay(args: argparse.Namespace) -> int:
    from replicator.engine.pipeline import Engine
    from replicator.sources.kafka import parse_offsets

    s = Settings(args)
    source = _kafka_source(s)
    start: Any
    if args.from_earliest:
        start = "earliest"
    elif args.from_offsets:
        start = parse_offsets(args.from_offsets, source.partitions())
    else:
        try:
            when = dt.datetime.fromisoformat(args.from_timestamp)
        except ValueError:
            raise ConfigError(f"--from-timestamp expects ISO 8601, got {args.from_timestamp!r}") from None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        start = {p: o for p, o in source.offsets_for_timestamp(when).items() if o is not None}
    return _finish(Engine(source, _run_options(s, start=start)).run(), s)


def cmd_capture(args: argparse.Namespace) -> int:
    from replicator.sources.capture import cmd_capture as impl

    return int(impl(args, Settings(args)))


def cmd_archive(args: argparse.Namespace) -> int:
    from replicator.formats.archive import archive_inspect_main

    return archive_inspect_main(args.paths, sys.stdout)


def cmd_simulate(args: argparse.Namespace) -> int:
    from replicator.sim.simulate import cmd_simulate as impl

    return int(impl(args))


def cmd_binlog(args: argparse.Namespace) -> int:
    from replicator.formats.binlog import binlog_read_main, binlog_write_main

    if args.binlog_command == "write":
        if not (args.commit or args.rollback) and not args.query:
            raise ConfigError("binlog write needs a SQL statement, --commit or --rollback")
        return binlog_write_main(
            file=args.file, trans=args.trans, query=args.query, sets=args.set, server_id=args.server_id,
            session_id=args.session_id, commit=args.commit, rollback=args.rollback,
        )
    return binlog_read_main(args.paths or ["log.bin"], sys.stdout, verbose=args.verbose)


COMMANDS = {
    "run": cmd_run, "replay": cmd_replay, "tables": cmd_tables, "decode": cmd_decode, "capture": cmd_capture,
    "archive": cmd_archive, "simulate": cmd_simulate, "binlog": cmd_binlog,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr,
    )
    for noisy in ("kafka", "py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING if args.verbose else logging.ERROR)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command](args)
    except ReplicatorError as exc:
        sys.stderr.write(f"replicator {args.command}: error: {exc}\n")
        return exc.exit_code
    except OSError as exc:  # a missing/unreadable file named on the command line
        sys.stderr.write(f"replicator {args.command}: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
