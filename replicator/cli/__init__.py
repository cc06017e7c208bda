"""`replicator` command line. Thin: parse, resolve typed settings, call the stage that does the work.

Settings resolve flag > environment (REPLICATOR_<NAME>, e.g. REPLICATOR_BOOTSTRAP_SERVERS) > config
file (--config FILE, TOML; keys are the long flag names with '_' for '-'): see `replicator.cli.settings`,
where every default lives. Each command group has its module (`run`, `tables`, `status`, `check`, `decode`, `capture`,
`archive`, `simulate`, `binlog`, `jars`): it registers its flags and turns them into a typed option object,
and its handler takes only that object. Every ReplicatorError becomes a one-line message and a
non-zero exit; anything else is a bug.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from replicator import __version__
from replicator.cli import archive, binlog, capture, check, decode, jars, run, simulate, status, tables
from replicator.cli.settings import ReplicatorSettings, load_settings
from replicator.errors import ReplicatorError

log = logging.getLogger("replicator")

#: Loggers of libraries that are chatty at INFO: quiet unless -v.
NOISY_LOGGERS = ("kafka", "py4j", "pyspark", "botocore", "boto3", "urllib3", "s3transfer")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="replicator",
        description="Replicate a TiCDC Kafka topic (Open Protocol or Craft) into Delta Lake tables, exactly once.",
    )
    parser.add_argument("--version", action="version", version=f"replicator {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging (and Spark's start-up output)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in (run, tables, status, check, capture, archive, simulate, binlog, decode, jars):
        group.register(sub)
    return parser


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr,
    )
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose else logging.ERROR)
    # pydantic-settings can dump every source's raw values (passwords included) at DEBUG.
    logging.getLogger("pydantic_settings").setLevel(logging.INFO)
    if verbose:
        from replicator.delta.spark import set_verbose

        set_verbose(True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from replicator.delta.spark import route_stderr_under_spark_submit

    route_stderr_under_spark_submit()  # spark-submit merges our stderr into stdout
    _configure_logging(args.verbose)
    if not args.command:
        parser.print_help()
        return 2
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return int(handler(args))
    except ReplicatorError as exc:
        sys.stderr.write(f"replicator {args.command}: error: {exc}\n")
        return exc.exit_code
    except OSError as exc:  # a missing/unreadable file named on the command line
        sys.stderr.write(f"replicator {args.command}: error: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


__all__ = ["ReplicatorSettings", "build_parser", "load_settings", "main"]


if __name__ == "__main__":
    sys.exit(main())
