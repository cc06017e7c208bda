"""`replicator` command line. Thin: parse, resolve typed settings, call the stage that does the work.

Settings resolve flag > environment (REPLICATOR_<NAME>, e.g. REPLICATOR_BOOTSTRAP_SERVERS) > config
file (--config FILE, TOML; keys are the long flag names with '_' for '-'): see `replicator.cli.settings`,
where every default lives. Each command group has its module (`run`, `tables`, `status`, `check`, `decode`, `capture`,
`archive`, `simulate`, `binlog`, `jars`, `sparkconf`, `maintain`): it registers its flags and turns them into a typed
option object, and its handler takes only that object. Every ReplicatorError becomes a one-line message and a
non-zero exit; anything else is a bug.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from replicator import __version__
from replicator.cli import (
    archive,
    binlog,
    capture,
    check,
    decode,
    jars,
    maintain,
    run,
    simulate,
    sparkconf,
    status,
    tables,
)
from replicator.cli.settings import ReplicatorSettings, load_settings
from replicator.errors import ReplicatorError
from replicator.logformat import LOG_FORMATS, configure, json_logs, resolve

log = logging.getLogger("replicator")

#: Loggers of libraries that are chatty at INFO: quiet unless -v.
NOISY_LOGGERS = ("kafka", "py4j", "pyspark", "botocore", "boto3", "urllib3", "s3transfer")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replicator",
        description="Replicate TiCDC changefeeds from Kafka (Open Protocol, canal-json with the TiDB extension, "
                    "Simple, Craft; one topic or many) into Delta Lake tables on a directory or s3a://, with an "
                    "optional Hive metastore, exactly once: as a scheduled job (--until-caught-up) or a follower. "
                    "Also: replay from chosen offsets, capture archives, and status, tables and check on a "
                    "warehouse.",
    )
    parser.add_argument("--version", action="version", version=f"replicator {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (and Spark's start-up output)")
    _add_log_format(parser, default=None)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in (run, tables, status, check, maintain, capture, archive, simulate, binlog, decode, jars, sparkconf):
        group.register(sub)
    _log_format_after_commands(parser)
    return parser


def _add_log_format(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--log-format", choices=LOG_FORMATS, default=default,
                        help="stderr log lines: human (default) or json, one JSON object per line "
                             "(env REPLICATOR_LOG_FORMAT)")


def _log_format_after_commands(parser: argparse.ArgumentParser) -> None:
    """`--log-format` is also accepted after a command (`replicator run --log-format json ...`);
    there it must not reset a value given before the command, hence SUPPRESS as its default."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in set(action.choices.values()):
                if not any("--log-format" in a.option_strings for a in command._actions):
                    _add_log_format(command, default=argparse.SUPPRESS)
                _log_format_after_commands(command)


def _configure_logging(verbose: bool, log_format: str | None = None) -> None:
    """Log lines on stderr: `log_format` (--log-format), else REPLICATOR_LOG_FORMAT, else human
    (replicator/logformat.py). Raises ValueError for an unknown REPLICATOR_LOG_FORMAT."""
    configure(resolve(log_format), logging.DEBUG if verbose else logging.INFO)
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose else logging.ERROR)
    # pydantic-settings can dump every source's raw values (passwords included) at DEBUG.
    logging.getLogger("pydantic_settings").setLevel(logging.INFO)
    if verbose:
        from replicator.runtime.spark import set_verbose

        set_verbose(True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from replicator.runtime.spark import route_stderr_under_spark_submit

    route_stderr_under_spark_submit()  # spark-submit merges our stderr into stdout
    try:
        _configure_logging(args.verbose, args.log_format)
    except ValueError as exc:
        parser.error(str(exc))
    if not args.command:
        parser.print_help()
        return 2
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return int(handler(args))
    except ReplicatorError as exc:
        _error(f"replicator {args.command}: error: {exc}", exc)
        return exc.exit_code
    except OSError as exc:  # a missing/unreadable file named on the command line
        _error(f"replicator {args.command}: error: {exc}", exc)
        return 1
    except KeyboardInterrupt:
        _error("interrupted", None)
        return 130


def _error(message: str, exc: BaseException | None) -> None:
    """The one line a failed command ends with: as it is, or (--log-format json) a JSON line."""
    if json_logs():
        log.error("%s", message, extra={"error": type(exc).__name__} if exc is not None else None)
    else:
        sys.stderr.write(message + "\n")


__all__ = ["ReplicatorSettings", "build_parser", "load_settings", "main"]


if __name__ == "__main__":
    sys.exit(main())
