"""`make run`: the embedded default, end to end, with no Kafka or TiDB of the user's own.

Starts the local broker (``replicator.sim.localkafka``, port $KAFKA_PORT or 9092; a free port when that
one is taken by another program), simulates one TiCDC workload into two fresh topics (Open
Protocol and Craft: same model upstream, same seed), replicates each until caught up (open ->
``./warehouse``, craft -> ``./warehouse-craft``), checks both against the simulator's expected
state (any difference fails the run), prints a per-table summary, and captures the Open Protocol
topic into an archive (``state/demo/archive``) to show the replay-beyond-retention path.

Re-running is safe: every run uses new topic names (older demo topics are deleted) and recreates
the two demo warehouses (only directories that are replicator warehouses are ever removed). The
broker is left running for the commands printed at the end; ``make kafka-down`` stops it.

``--s3`` runs the same demo into an object store: the local S3-compatible server
(``replicator.sim.locals3``, S3Proxy under ``state/s3``, port $S3_PORT or 9000; reused when it
runs, left running like the broker, ``make s3-down`` stops it), this process pointed at it (its
AWS environment and ``REPLICATOR_S3_ENDPOINT``, which Spark's JVM inherits), and the warehouses
``s3a://warehouse/demo`` and ``s3a://warehouse/demo-craft``; checked as the local ones are.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicator.errors import ConfigError, ReplicatorError
from replicator.sim.localkafka.process import port_free
from replicator.storage import as_location, is_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from replicator.engine.pipeline import RunSummary
    from replicator.sim.locals3 import LocalS3
    from replicator.sim.simcheck import ActualTable

log = logging.getLogger("replicator.sim.demo")

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_STATE = REPO_ROOT / "state" / "demo"
DEFAULT_S3_STATE = REPO_ROOT / "state" / "s3"  # replicator.sim.locals3's default (`make s3-up` / `make s3-down`)
TOPIC_PREFIX = "replicator-demo-"
PROTOCOLS = ("open", "craft", "canal-json")
# Every mid-stream DDL is a barrier that splits the stream into one more MERGE per table; this
# subset shows schema evolution (new column, type widening, truncate) while keeping `make run`
# to a few minutes on two cores. `--ddl auto` runs every kind this build applies.
DEMO_DDL = ("create_schema", "add_column", "modify_column", "truncate")
LOCAL_WAREHOUSE = "./warehouse"
S3_WAREHOUSE = "s3a://warehouse/demo"  # --s3 (the local server's default bucket)


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def ensure_broker(port: int) -> str:
    """The local broker's bootstrap address, starting it when it is not running."""
    from replicator.sim import localkafka

    running = localkafka.status(localkafka.DEFAULT_STATE_DIR)
    if running is not None:
        note = "" if running.port == port else f" (not {port}: it was started on that port earlier)"
        say(f"kafka   local broker already running on {running.bootstrap}{note}")
        return running.bootstrap
    wanted: int | None = port
    if not port_free(port):
        say(f"kafka   port {port} is taken by another program: starting the local broker on a free port instead")
        wanted = None
    handle = localkafka.start(localkafka.DEFAULT_STATE_DIR, wanted)
    say(f"kafka   started the local broker on {handle.bootstrap} (pid {handle.pid}, ready in "
        f"{handle.ready_seconds or 0:.1f}s; data in {handle.state_dir})")
    return handle.bootstrap


def ensure_s3(port: int, state_dir: Path | str) -> LocalS3:
    """The local S3-compatible server of `state_dir`, starting it when it is not running (on
    `port`, or a free one when another program holds that)."""
    from replicator.sim import locals3

    running = locals3.status(state_dir)
    if running is not None:
        note = "" if running.port == port else f" (not {port}: it was started on that port earlier)"
        say(f"s3      local S3-compatible server already running on {running.endpoint}{note}")
        return running
    wanted: int | None = port
    if not port_free(port):
        say(f"s3      port {port} is taken by another program: starting the local S3-compatible server on a free "
            "port instead")
        wanted = None
    handle = locals3.start(state_dir, wanted)
    say(f"s3      started the local S3-compatible server on {handle.endpoint} (pid {handle.pid}, ready in "
        f"{handle.ready_seconds or 0:.1f}s; data in {handle.data_dir})")
    return handle


def use_s3(server: LocalS3, warehouses: Sequence[str]) -> None:
    """Point this process (its storage options, and the environment Spark's JVM and any subprocess
    inherit) at `server`, and create the warehouses' buckets on it (a no-op for existing ones)."""
    from replicator.storage import StorageOptions, configure
    from replicator.storage.s3 import split_url

    os.environ.update(server.env())
    configure(StorageOptions.from_env())
    for url in warehouses:
        server.create_bucket(split_url(url)[0])


def twin(warehouse: str, suffix: str) -> str:
    """The warehouse next to `warehouse` named with `suffix`: a sibling directory, or a sibling
    prefix of an object-store URL."""
    if is_url(warehouse):
        return f"{warehouse.rstrip('/')}-{suffix}"
    path = Path(warehouse)
    return str(path.parent / f"{path.name}-{suffix}")


def delete_old_demo_topics(bootstrap: str, keep: Sequence[str]) -> list[str]:
    """Drop topics of earlier demo runs so repeated `make run`s do not fill the disk."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="replicator-demo")
    try:
        old = [t for t in admin.list_topics() if t.startswith(TOPIC_PREFIX) and t not in keep]
        if old:
            try:
                admin.delete_topics(old, timeout_ms=30000)
            except KafkaError as exc:  # housekeeping only
                log.warning("could not delete old demo topics: %s", exc)
        return old
    finally:
        admin.close()


def recreate_warehouse(path: Path | str) -> None:
    """Remove a previous demo warehouse; refuse to touch a directory (or an object-store prefix)
    that is not a warehouse."""
    if is_url(path):
        location = as_location(path)
        if location.exists():
            if not (location / "_replicator").exists():
                raise ConfigError(f"{location} holds objects and is not a replicator warehouse; remove them or pass "
                                  "--warehouse")
            location.io.remove_tree(location.path)
        return
    path = Path(path)
    if path.exists():
        is_warehouse = (path / "_replicator").is_dir()
        if not is_warehouse and any(path.iterdir()):
            raise ConfigError(f"{path} exists and is not a replicator warehouse; move it away or pass --warehouse")
        shutil.rmtree(path)


def replicate(spark: SparkSession, bootstrap: str, topic: str, protocol: str, warehouse: Path | str) -> RunSummary:
    from replicator.engine.pipeline import Engine, RunOptions
    from replicator.sources.kafka import KafkaSettings, KafkaSource

    source = KafkaSource(KafkaSettings(bootstrap, topic, group_id=f"replicator-{topic}"))
    options = RunOptions(warehouse=str(warehouse), protocol=protocol, until_caught_up=True)  # type: ignore[arg-type]
    return Engine(source, options, spark=spark).run()


def summary_table(title: str, tables: dict[str, ActualTable], summary: RunSummary) -> Any:
    from rich.table import Table

    from replicator.events import tso_to_datetime

    wm = summary.watermark
    when = tso_to_datetime(wm).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if wm else "-"
    lag = f"{summary.lag_s:.1f}s" if summary.lag_s is not None else "n/a"
    table = Table(title=title, title_justify="left")
    for col, justify in (("table", "left"), ("rows", "right"), ("key", "left"), ("watermark (UTC)", "left"),
                         ("lag", "right"), ("upserts", "right"), ("deletes", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for name, t in sorted(tables.items()):
        counts = summary.tables.get(name)
        table.add_row(name, str(len(t.rows)), ", ".join(t.key), when, lag,
                      str(counts.upserts if counts else 0), str(counts.deletes if counts else 0))
    return table


def capture_archive(bootstrap: str, topic: str, directory: Path) -> str:
    from replicator.sources.capture import CaptureOptions, capture

    if directory.exists():
        shutil.rmtree(directory)
    result = capture(CaptureOptions(bootstrap_servers=bootstrap, topic=topic, out=directory, start="earliest",
                                    until_caught_up=True, group_id=None))
    return f"{result.records} records in {len(result.files)} file(s)"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from replicator.runtime.spark import get_spark, plan_jit, use_storage
    from replicator.sim.simcheck import compare_tables, read_warehouse
    from replicator.sim.simulate import SimConfig, Simulation, produce

    started = time.monotonic()
    console = Console(width=None if sys.stdout.isatty() else 140)
    warehouse: str = args.warehouse or (S3_WAREHOUSE if args.s3 else LOCAL_WAREHOUSE)
    if args.s3 and not warehouse.startswith("s3a://"):
        raise ConfigError(f"--s3 replicates into the local S3-compatible server: --warehouse must be an s3a:// URL "
                          f"(default {S3_WAREHOUSE}), not {warehouse}")
    warehouses = {"open": warehouse, "craft": twin(warehouse, "craft"), "canal-json": twin(warehouse, "canal-json")}
    protocols = [p for p in PROTOCOLS if p in args.protocols.split(",")]
    if not protocols:
        raise ConfigError("--protocols must name one or more of open, craft, canal-json")
    s3 = None
    if args.s3:  # before anything reaches the store, and before Spark's JVM starts (it inherits the environment)
        s3 = ensure_s3(args.s3_port, args.s3_state_dir)
        use_s3(s3, [warehouses[p] for p in protocols])
    for p in protocols:
        recreate_warehouse(warehouses[p])

    bootstrap = args.bootstrap_servers or ensure_broker(args.port)
    run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    topics = {p: f"{TOPIC_PREFIX}{p}-{run_id}" for p in protocols}
    if not args.bootstrap_servers:
        removed = delete_old_demo_topics(bootstrap, list(topics.values()))
        if removed:
            say(f"kafka   deleted {len(removed)} topic(s) of earlier demo runs")

    # Catch-up runs into new warehouses: the quick compiler (docs/delta.md "Driver JVM start"), and
    # Spark starts while the streams are simulated and produced.
    plan_jit(short_lived=True)
    spark_start = ThreadPoolExecutor(1, thread_name_prefix="demo-spark-start").submit(get_spark, "replicator-demo")
    start_time = dt.datetime.now(dt.UTC)
    state = Path(args.state_dir)
    if args.ddl == "demo":
        from replicator.sim.simulate import supported_ddl_kinds

        ddl: str | list[str] = [k for k in DEMO_DDL if k in supported_ddl_kinds()]
    else:
        ddl = args.ddl
    expected = None
    state.mkdir(parents=True, exist_ok=True)
    for p in protocols:
        t0 = time.monotonic()
        sim = Simulation(SimConfig(protocol=p, seed=args.seed, events=args.events, partitions=args.partitions,  # type: ignore[arg-type]
                                   tables=args.tables, start_time=start_time, ddl=ddl))
        report = produce(sim, bootstrap, topics[p])
        expected = sim.expected
        expected.write(state / f"expected-{p}.json")
        st = sim.stats
        say(f"simulate {p:<5} {st.row_changes} row changes in {st.transactions} transactions, {st.ddl} DDL "
            f"({', '.join(sim.ddl_kinds)}), {st.resolved} resolved, {st.replayed_events} replayed "
            f"-> {report.total} records in topic {topics[p]} ({time.monotonic() - t0:.1f}s)")
    assert expected is not None
    say(f"expected final tables: {state}/expected-<protocol>.json")

    spark = spark_start.result()
    if s3 is not None:
        use_storage(spark)  # a session started before (a test's) reaches the server too
    failures = 0
    for p in protocols:
        t0 = time.monotonic()
        say(f"replicate {p} -> {warehouses[p]} ...")
        summary = replicate(spark, bootstrap, topics[p], p, warehouses[p])
        tables = read_warehouse(spark, warehouses[p])
        diffs = compare_tables(expected, tables)
        if summary.watermark < expected.watermark:
            diffs.insert(0, f"applied watermark {summary.watermark} is behind the stream's {expected.watermark}")
        console.print(summary_table(f"{warehouses[p]}  ({p}, topic {topics[p]}, {summary.records} records, "
                                    f"{summary.replays_dropped} replays dropped, {summary.ddl_applied} DDL, "
                                    f"{time.monotonic() - t0:.0f}s)", tables, summary))
        if diffs:
            failures += 1
            say(f"CHECK FAILED for {p}: {len(diffs)} difference(s) from the expected state:")
            for d in diffs[:40]:
                say(f"  {d}")
        else:
            say(f"check  {p}: every table equals the simulator's expected state "
                f"({sum(len(t.rows) for t in tables.values())} rows in {len(tables)} tables)")

    if "open" in protocols and not args.skip_capture:
        archive = state / "archive"
        say(f"capture {topics['open']} -> {archive}: {capture_archive(bootstrap, topics['open'], archive)}")

    say()
    say(f"done in {time.monotonic() - started:.0f}s.")
    say("next:")
    default_s3 = Path(args.s3_state_dir).resolve() == DEFAULT_S3_STATE.resolve()
    s3_dir = "" if default_s3 else f" --state-dir {args.s3_state_dir}"
    if s3 is not None:
        say(f'  eval "$(.venv/bin/python -m replicator.sim.locals3 up{s3_dir})"      the server\'s environment for the '
            "commands below (it is running: this only prints it)")
        say(f"  REPLICATOR_WAREHOUSE={warehouse} make notebook      explore {warehouse} in Jupyter")
    else:
        say(f"  make notebook                      explore {warehouse} in Jupyter (notebooks/explore.ipynb)")
    if "craft" in protocols:
        if s3 is not None:
            say(f"  REPLICATOR_WAREHOUSE={warehouses['craft']} make notebook      the Craft warehouse")
        else:
            say(f"  make notebook WAREHOUSE={warehouses['craft']}      the Craft warehouse")
    say(f"  .venv/bin/replicator tables --warehouse {warehouse}")
    if "open" in protocols:
        say(f"  .venv/bin/replicator run --bootstrap-servers {bootstrap} --topic {topics['open']} --protocol open "
            f"--warehouse {warehouse} --until-caught-up      # catch up again (nothing new: no-op)")
        if not args.skip_capture:
            say(f"  .venv/bin/replicator run --archive {state / 'archive'} --warehouse /tmp/from-archive"
                "      # rebuild from the archive")
    say(f"  .venv/bin/replicator simulate --protocol open --bootstrap-servers {bootstrap} --topic my-topic"
        "      # your own workload")
    if not args.bootstrap_servers:
        say("  make kafka-down                    stop the local Kafka broker (left running for the commands above)")
    if s3 is not None:
        down = f".venv/bin/python -m replicator.sim.locals3 down{s3_dir}" if s3_dir else "make s3-down"
        say(f"  {down:<34} stop the local S3-compatible server (left running as well)")
    return 1 if failures else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m replicator.sim.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--warehouse", default=None,
                   help=f"Open Protocol warehouse (craft: <warehouse>-craft; default {LOCAL_WAREHOUSE}, with --s3 "
                   f"{S3_WAREHOUSE})")
    p.add_argument("--events", type=int, default=20_000, help="row changes to simulate (default 20000)")
    p.add_argument("--seed", type=int, default=1, help="simulator seed (default 1)")
    p.add_argument("--partitions", type=int, default=3, help="topic partitions (default 3)")
    p.add_argument("--tables", type=int, default=4, help="simulated tables (default 4)")
    p.add_argument("--protocols", default="open,craft",
                   help="a comma list of open, craft, canal-json (default open,craft)")
    p.add_argument("--ddl", default="demo", help="mid-stream DDL kinds: demo (default: add/modify column, "
                   "truncate), auto, all, none or a comma list (see `replicator simulate --help`)")
    p.add_argument("--port", type=int, default=int(os.environ.get("KAFKA_PORT") or 9092),
                   help="local broker port (default $KAFKA_PORT or 9092)")
    p.add_argument("--bootstrap-servers", help="use this running broker instead of the local one (tests)")
    p.add_argument("--s3", action="store_true",
                   help=f"replicate into the local S3-compatible server (started under --s3-state-dir unless running): "
                   f"{S3_WAREHOUSE} and {S3_WAREHOUSE}-craft")
    p.add_argument("--s3-port", type=int, default=int(os.environ.get("S3_PORT") or 9000),
                   help="local S3-compatible server port (default $S3_PORT or 9000)")
    p.add_argument("--s3-state-dir", default=str(DEFAULT_S3_STATE),
                   help="the local S3-compatible server's settings, log and data (default state/s3)")
    p.add_argument("--skip-capture", action="store_true", help="do not capture the topic into an archive")
    p.add_argument("--state-dir", default=str(DEMO_STATE), help=f"expected files and archive (default {DEMO_STATE})")
    p.add_argument("-v", "--verbose", action="store_true", help="progress logging and Spark's start-up output")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for noisy in ("kafka", "py4j", "pyspark"):
        logging.getLogger(noisy).setLevel(logging.WARNING if args.verbose else logging.ERROR)
    if args.verbose:
        from replicator.runtime.spark import set_verbose

        set_verbose(True)  # the JVM's start-up output too (quiet by default)
    # Delta logs a benign "Failed to translate filter" ERROR per read of a table with deletion vectors.
    os.environ.setdefault("REPLICATOR_SPARK_LOG_LEVEL", "FATAL")
    try:
        return run(args)
    except ReplicatorError as exc:
        sys.stderr.write(f"make run: error: {exc}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
