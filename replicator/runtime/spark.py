"""The one SparkSession factory used everywhere (CLI, engine, tests, notebooks, benchmarks).

The jars beyond pyspark's own are declared once, in `replicator.runtime.jars`, and reach the session
through `spark.jars`: from REPLICATOR_SPARK_JARS (a directory a user fills), else `.cache/spark-jars`
in a checkout (`make spark-jars`), else the per-user jar cache, filled from Maven Central (or a
mirror) with exactly the groups the run needs. Once cached everything works offline.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from replicator.errors import ConfigError, DecodeError, ReplicatorError, SchemaError, UnsupportedError
from replicator.runtime import jars
from replicator.storage import storage_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_JARS_DIR = REPO_ROOT / ".cache" / "spark-jars"
# The driver JVM's class archive (jvm_archive.py), written by `make setup`.
JVM_ARCHIVE_DIR = REPO_ROOT / ".cache" / "jvm"
# log4j2 configuration the driver JVM starts with unless verbose: errors only, so Spark's start-up
# chatter (NativeCodeLoader, "Using Spark's default log4j profile", "Setting default log level")
# never reaches the terminal. It must be given at JVM launch: those lines are written before
# setLogLevel can run.
QUIET_LOG4J = Path(__file__).resolve().with_name("log4j2-quiet.properties")
# FAIR scheduling with one FAIR pool (`apply`) for the concurrent MERGEs of a step (APPLY_POOL).
FAIR_POOLS = Path(__file__).resolve().with_name("fairscheduler.xml")
APPLY_POOL = "apply"
# Hadoop's local file system with java.nio in place of its per-file shell calls (tools/localfs,
# built by `make spark-jars`; docs/delta.md "Local file system"). REPLICATOR_NIO_LOCAL_FS=0: Hadoop's own.
LOCALFS_JAR = "replicator-localfs.jar"
LOCALFS_CONF = {
    "spark.hadoop.fs.file.impl": "replicator.localfs.NioLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "replicator.localfs.NioLocalFs",
}
DELTA_SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
"""What any session needs to run Delta's SQL (this one's, and a user's job: `replicator spark-conf`)."""
_LOCK = threading.Lock()


@dataclass
class NextSession:
    """How the next session this process starts is set up: chosen by the command before it starts
    one (`set_verbose`, `use_catalog`, `plan_jit`), read when it starts."""

    verbose: bool = False  # Spark's own logging and the JVM's start-up output (the CLI's -v)
    catalog_uri: str | None = None  # the Hive metastore the session uses (None: Spark's own catalog)
    jit: str = "full"  # the driver JVM's compiler (JIT_MODES less auto)


NEXT = NextSession()

JIT_MODES = ("auto", "quick", "full")
QUICK_JIT = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]
"""The driver JVM's compiler for a short run: the quick (C1) compiler only, without the profiling
tier that feeds the optimising one. A catch-up run of a small warehouse spends most of its JVM
time warming up (Spark's planner, Delta's commands, code generation, each run once per table),
where this is about a quarter faster; long MERGE scans run up to 1.7x slower on its code, so
followers and big warehouses keep the full compiler (`plan_jit`, docs/how-it-works.md "Tuning the driver JVM").
The code cache stays at the tiered default (C1 alone gets 48 MiB, which a run of the demo filled:
the JVM then stops compiling altogether)."""
JVM_LOG_TO_STDERR = ["-Xlog:disable", "-Xlog:all=warning:stderr"]
"""The JVM's own warnings (unified logging) on stderr instead of stdout: the driver JVM shares the
process's stdout, which `--json-summary` owns."""
QUICK_JIT_MAX_WAREHOUSE_BYTES = 256 * 2**20
"""`auto` chooses the quick compiler for a catch-up run only while the warehouse's tables hold
less than this: past it, scans of the tables cost more than warming up does."""


def set_verbose(verbose: bool) -> None:
    """Start Spark with its own default logging (the CLI's -v); quiet (errors only) otherwise.

    Takes effect for the next session started in this process.
    """
    NEXT.verbose = verbose


# What the JVM and Spark's launcher print on stderr at start-up, outside log4j: the JDK's incubator
# notice (Spark adds jdk.incubator.vector) and Ivy's resolution report when the Delta jars are not
# cached. Dropped unless verbose; every other line of the JVM's stderr is passed on.
_STARTUP_CHATTER = re.compile(
    r"WARNING: Using incubator modules|Using Spark's default log4j profile|Setting default log level"
    r"|To adjust logging level use|:: (loading settings|resolving dependencies|resolution report|retrieving) ::"
    r"|Ivy Default Cache set to|The jars for the packages stored in|\S+#\S+ added as a dependency"
    r"|\s+(confs: |found \S+ in |:: modules in use|\d+ artifacts copied|-{20,}|\|)"
)


IMPLEMENTATION_CONF = "spark.sql.catalogImplementation"
URIS_CONF = "spark.hadoop.hive.metastore.uris"


def session_conf(uri: str) -> dict[str, str]:
    """Spark settings of a session that uses the metastore at `uri` (the equivalent of
    `enableHiveSupport()` plus `hive.metastore.uris`)."""
    return {IMPLEMENTATION_CONF: "hive", URIS_CONF: uri}


def use_catalog(uri: str | None) -> None:
    """Start the next session of this process on the Hive metastore at `uri` (delta/catalog.py),
    or on Spark's own catalog (None). A catalog is chosen when the session starts; a `[spark]`
    setting of the same keys wins."""
    NEXT.catalog_uri = uri


def plan_jit(*, short_lived: bool, tables_bytes: Callable[[int], int] | None = None) -> str:
    """Choose the compiler of the driver JVM this process will start (REPLICATOR_JIT: auto, the
    default, quick or full); `auto` is quick for a short-lived run (catch up and exit) into a
    warehouse whose tables hold under QUICK_JIT_MAX_WAREHOUSE_BYTES (`tables_bytes(enough)`
    counts them; None: a new warehouse). No effect on a JVM already running or under
    spark-submit. Returns the mode chosen."""
    mode = os.environ.get("REPLICATOR_JIT", "auto").strip().lower() or "auto"
    if mode not in JIT_MODES:
        raise ConfigError(f"REPLICATOR_JIT={mode!r}: expected one of {', '.join(JIT_MODES)}")
    if mode == "auto":
        limit = QUICK_JIT_MAX_WAREHOUSE_BYTES
        mode = "quick" if short_lived and (tables_bytes is None or tables_bytes(limit) < limit) else "full"
    NEXT.jit = mode
    return mode


@contextmanager
def _filtered_jvm_stderr() -> Iterator[None]:
    """While the JVM starts, fd 2 is a pipe (the JVM keeps it for life); a daemon thread passes
    its lines on to the real stderr, without the start-up chatter."""
    try:
        sys.stderr.flush()
        original = os.dup(2)
        target = os.dup(2)
    except (OSError, ValueError):  # no usable stderr: nothing to keep quiet
        yield
        return
    read_end, write_end = os.pipe()

    def pump() -> None:
        # Always keep reading: a full pipe would block the JVM on its next stderr write.
        with os.fdopen(read_end, "rb") as src, os.fdopen(target, "wb", buffering=0) as dst:
            for line in src:
                if not _STARTUP_CHATTER.match(line.decode("utf-8", "replace")):
                    with contextlib.suppress(OSError):
                        dst.write(line)

    threading.Thread(target=pump, name="jvm-stderr", daemon=True).start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)
        os.close(original)


@contextmanager
def _jvm_stdout_on_stderr() -> Iterator[None]:
    """While the JVM starts, fd 1 is fd 2 (the JVM keeps both for life): what Delta prints with
    println (VACUUM's "Deleted N files ...") goes to stderr, never into the stdout that `--json`
    and `--json-summary` own. This process's own fd 1 is back as it was once the JVM is up."""
    try:
        sys.stdout.flush()
        original = os.dup(1)
    except (OSError, ValueError):  # no usable stdout: nothing to keep clean
        yield
        return
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(original, 1)
        os.close(original)


def jar_paths() -> list[str] | None:
    """The jars of the session this process will start, or None when the replicator has none to give
    (spark-submit's own --jars / --packages apply). JarResolutionError (one line, exit 2) when a
    required jar is missing from REPLICATOR_SPARK_JARS or cannot be fetched."""
    configured = os.environ.get(jars.JARS_DIR_ENV, "").strip()
    if configured:
        directory = Path(configured).expanduser()
        if not directory.is_dir():
            raise jars.JarResolutionError(f"{jars.JARS_DIR_ENV}={configured} is not a directory: {jars.REMEDY}")
        missing = jars.missing_from(directory, jars.required())
        if missing:
            raise jars.JarResolutionError(
                f"{jars.JARS_DIR_ENV}={configured} lacks {missing[0].coordinate}"
                f"{f' and {len(missing) - 1} more' if len(missing) > 1 else ''}: {jars.REMEDY}")
        return sorted(str(p) for p in directory.glob("*.jar"))
    if DEFAULT_JARS_DIR.is_dir() and not jars.missing_from(DEFAULT_JARS_DIR, jars.ALL_GROUPS):
        # A checkout's cache holds every group: all of it, so that the driver JVM's class archive
        # (made for this list) matches whatever the run needs.
        return sorted(str(p) for p in DEFAULT_JARS_DIR.glob("*.jar"))
    return [str(p) for p in jars.fetch(jars.required(), jars.cache_dir())]


def local_fs_conf(jars: list[str]) -> dict[str, str]:
    """Spark confs that put file:// paths on the fork-free local file system, when its jar is among
    `jars` and REPLICATOR_NIO_LOCAL_FS is not 0. Why: without Hadoop's native library (pyspark has
    none) every file Hadoop creates forks `chmod` and every rename forks `readlink`, several per Delta
    commit (docs/delta.md). The jar goes on the JVMs' class path, not only spark.jars: Hadoop loads
    file system classes before spark.jars are."""
    jar = next((j for j in jars if Path(j).name == LOCALFS_JAR), None)
    if jar is None or os.environ.get("REPLICATOR_NIO_LOCAL_FS", "1") == "0":
        return {}
    return {"spark.driver.extraClassPath": jar, "spark.executor.extraClassPath": jar, **LOCALFS_CONF}


def commit_store_conf(jars_: list[str]) -> dict[str, str]:
    """Spark confs that make s3a:// (and s3://) Delta tables commit through the replicator's own log
    store (runtime/java/s3commit): a commit file is written only if absent, by the store itself, and
    only while this process holds the writer lease (docs/object-store.md "Two writers"). Empty
    when its jar is not among `jars_` (a warehouse on s3a then refuses to start: warehouse/store.py)."""
    if not any(Path(j).name == jars.COMMIT_STORE_JAR for j in jars_):
        return {}
    # Through spark.jars only (not the JVMs' class path): it extends Delta's classes, which load there.
    return {f"spark.delta.logStore.{scheme}.impl": jars.COMMIT_STORE_CLASS for scheme in ("s3a", "s3")}


# Session-wide helpers in the commit store's jar, each unless the user's `[spark]` names its own:
# - local logs are listed from a version by the directory's names first
#   (runtime/java/s3commit/LocalListingLogStore.java): Delta's own local store reads every entry's
#   status at every refresh, a log holds 30 days of commits, and a followed table's commits would
#   grow slower by the day;
# - Delta's checksum files on s3a:// are written with one PUT each
#   (runtime/java/s3commit/DirectPutCheckpointFileManager.java), not a temporary file and a
#   rename: a third of a small MERGE's S3 requests (docs/delta.md). Other stores keep Spark's own;
# - s3a:// (and s3://) data files are read by s3a with their status asked once, and a small one
#   with one GET (runtime/java/s3commit/DataFileS3AFileSystem.java), not four HEADs and three
#   GETs: a table's small files cost a read per request, not per byte (docs/object-store.md).
_JAR_HELPERS = {
    "spark.delta.logStore.file.impl": jars.LOCAL_LOG_STORE_CLASS,
    "spark.sql.streaming.checkpointFileManagerClass": jars.CHECKPOINT_FILE_MANAGER_CLASS,
    "spark.hadoop.fs.s3a.impl": jars.DATA_FILE_FS_CLASS,
    "spark.hadoop.fs.s3.impl": jars.DATA_FILE_FS_CLASS,
}


def jar_helpers_conf(jars_: list[str]) -> dict[str, str]:
    """The helpers above that the replicator's session sets: none without the commit store's jar,
    and none the user's `[spark]` settings name."""
    if not any(Path(j).name == jars.COMMIT_STORE_JAR for j in jars_):
        return {}
    user = storage_options().spark_conf
    return {key: value for key, value in _JAR_HELPERS.items() if key not in user}


def log_store_conf(jars_: list[str]) -> dict[str, str]:
    """`commit_store_conf` less what the user's `[spark]` settings set themselves (a DynamoDB log
    store wins): what the replicator's session, and `replicator spark-conf`, give s3a:// tables."""
    user = storage_options().spark_conf
    return {k: v for k, v in commit_store_conf(jars_).items() if k not in user}


def _merged_conf(*confs: dict[str, str]) -> dict[str, str]:
    """Confs merged, class paths joined (each conf may add its jar to the JVMs' class path)."""
    out: dict[str, str] = {}
    for conf in confs:
        for key, value in conf.items():
            if key.endswith(".extraClassPath") and key in out:
                out[key] = f"{out[key]}{os.pathsep}{value}"
            else:
                out[key] = value
    return out


SIZING = (
    ("spark.sql.shuffle.partitions", "REPLICATOR_SHUFFLE_PARTITIONS", "2"),
    ("spark.default.parallelism", "", "2"),
    ("spark.driver.memory", "REPLICATOR_DRIVER_MEMORY", "4g"),
    ("spark.databricks.delta.snapshotPartitions", "", "2"),
    ("spark.sql.sources.parallelPartitionDiscovery.parallelism", "", "2"),
    # Compiled classes of generated code kept for reuse (Spark's default: 100). A MERGE compiles
    # 20-30 classes for its table's columns, so a step over more than a few tables evicted each
    # table's classes before its next MERGE and every MERGE recompiled all of them (a quarter of
    # a follower's JVM time). One class takes about 3 KiB of metaspace: 10,000 is ~30 MiB.
    ("spark.sql.codegen.cache.maxEntries", "REPLICATOR_CODEGEN_CACHE_ENTRIES", "10000"),
)
"""(conf, environment variable or "", default) of the settings sized for the machine and workload."""

# The AWS credential variables executors on other machines' workers need (a local session's
# executors share this process's environment). Spark redacts them in its UI and logs.
AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_PROFILE")


SQL_WAREHOUSE_CONF = "spark.sql.warehouse.dir"
SQL_WAREHOUSE_DIR = Path(tempfile.gettempdir()) / "replicator-spark-warehouse"
"""Where Spark's session catalog keeps managed tables: the replicator makes none (its tables are
paths), but Spark creates the directory on first use, by default `./spark-warehouse` in whatever
directory the command ran from. A `[spark]` setting or spark-submit's --conf wins."""


def _submitted_conf(key: str) -> str | None:
    """What spark-submit was given for `key` (its JVM is up already: ask its SparkConf)."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    conf = SparkConf()
    return conf.get(key) if conf.contains(key) else None


class _JvmStderr(io.TextIOBase):
    """sys.stderr under spark-submit: the JVM's System.err. spark-submit starts the Python driver
    with its stderr merged into its stdout (PythonRunner), so anything Python writes to stderr
    (logs, progress, error lines) would land on stdout, which `--json-summary` owns. Falls back
    to the original stream when the JVM cannot be reached (it is exiting)."""

    def __init__(self, fallback: TextIO) -> None:
        self._fallback = fallback
        self._err: Any = None

    def write(self, text: str) -> int:
        try:
            if self._err is None:
                from pyspark import SparkContext

                SparkContext._ensure_initialized()
                self._err = SparkContext._jvm.System.err  # type: ignore[union-attr]
            self._err.print(text)
            if "\n" in text:
                self._err.flush()
        except Exception:  # the gateway is gone: the merged stream is all there is
            self._err = None
            self._fallback.write(text)
        return len(text)

    def flush(self) -> None:
        with contextlib.suppress(Exception):
            if self._err is not None:
                self._err.flush()
        self._fallback.flush()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


def route_stderr_under_spark_submit() -> None:
    """Under spark-submit, point sys.stderr at the JVM's stderr (see _JvmStderr): call before
    logging is configured, so its handler writes there too."""
    if _submitted() and not isinstance(sys.stderr, _JvmStderr):
        sys.stderr = _JvmStderr(sys.stderr)


def _submitted() -> bool:
    """Whether this process was started by spark-submit (which hands it a JVM gateway): then the
    master, the jars and the driver's settings are spark-submit's, not ours."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_master() -> str | None:
    """REPLICATOR_SPARK_MASTER; else spark-submit's --master (None), else local[*]."""
    master = os.environ.get("REPLICATOR_SPARK_MASTER")
    if master:
        return master
    return None if _submitted() else "local[*]"


def on_this_machine(master: str | None) -> bool:
    """Whether every executor of `master` runs on this machine (local mode, or a standalone master
    on the loopback address such as `make cluster-up`'s); None (spark-submit's) is not known to."""
    if master is None:
        return False
    return master.startswith("local") or master.startswith(("spark://127.0.0.1:", "spark://localhost:"))


def driver_java_options(jars: list[str] | None) -> list[str]:
    """The driver JVM's options: UTC, the class archive and the compiler `plan_jit` chose (not
    under spark-submit, whose JVM is already running), the user's REPLICATOR_DRIVER_JAVA_OPTIONS
    (last, so they win: docs/how-it-works.md "Tuning the driver JVM"), and the quiet log4j configuration."""
    # UTC as the JVM's zone too: on a table of fewer than 50 files Delta re-verifies the whole
    # file list after every commit when a zone name lacks "utc" (docs/delta.md).
    options = ["-Duser.timezone=UTC"]
    if not _submitted():
        from replicator.runtime import jvm_archive

        options += JVM_LOG_TO_STDERR
        options += jvm_archive.java_options(JVM_ARCHIVE_DIR, jars)
        if NEXT.jit == "quick":
            options += QUICK_JIT
    options += shlex.split(os.environ.get("REPLICATOR_DRIVER_JAVA_OPTIONS", ""))
    if not NEXT.verbose:
        options.append(f"-Dlog4j2.configurationFile={QUIET_LOG4J.as_uri()}")
    return options


def get_spark(app_name: str = "replicator") -> SparkSession:
    """Return the process-wide Delta-enabled local SparkSession (created on first use).

    Tunables via environment: REPLICATOR_SPARK_MASTER (default local[*]),
    REPLICATOR_SHUFFLE_PARTITIONS (default 2), REPLICATOR_DRIVER_MEMORY (default 4g),
    REPLICATOR_DRIVER_JAVA_OPTIONS (extra driver JVM options, e.g. -XX:TieredStopAtLevel=1),
    REPLICATOR_NIO_LOCAL_FS (0: Hadoop's own local file system, see `local_fs_conf`).
    """
    with _LOCK:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        master = spark_master()
        # Under spark-submit its --master decides where executors run: loopback too for a local one.
        local = on_this_machine(master if master is not None or not _submitted() else _submitted_conf("spark.master"))
        if local:
            # Loopback only: a local Spark never needs to listen on another interface. A driver
            # of a cluster elsewhere must be reachable by its executors: Spark's defaults then.
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.appName(app_name)
        if master is not None:
            builder = builder.master(master)
        for delta_key, delta_value in DELTA_SESSION_CONF.items():
            builder = builder.config(delta_key, delta_value)
        builder = (
            builder
            .config("spark.sql.session.timeZone", "UTC")
            # Generated SQL embeds untrusted upstream names: Spark must not expand ${var}/${env:X}
            # in statement text before parsing (quoting cannot stop that).
            .config("spark.sql.variable.substitute", "false")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.execution.arrow.pyspark.fallback.enabled", "false")
            .config("spark.sql.adaptive.enabled", "true")
            .config("spark.scheduler.mode", "FAIR")
            .config("spark.scheduler.allocation.file", str(FAIR_POOLS))
            .config("spark.databricks.delta.autoCompact.enabled", "false")
        )
        if local:
            builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
        # Sized for this 2-core machine; under spark-submit its own --conf / --driver-memory apply
        # unless the REPLICATOR_ variable is set.
        for key, env, default in SIZING:
            value = os.environ.get(env) if env else None
            if value is not None or not _submitted():
                builder = builder.config(key, value if value is not None else default)
        if master is not None and not master.startswith("local"):
            for name in AWS_ENV:
                if os.environ.get(name):
                    builder = builder.config(f"spark.executorEnv.{name}", os.environ[name])
        if not _submitted() or _submitted_conf(SQL_WAREHOUSE_CONF) is None:
            builder = builder.config(SQL_WAREHOUSE_CONF, str(SQL_WAREHOUSE_DIR))
        if NEXT.catalog_uri is not None:  # tables registered by name in a shared metastore
            for key, value in session_conf(NEXT.catalog_uri).items():
                builder = builder.config(key, value)
        # The object store's settings (endpoint, path style, region, credentials chain) and the
        # config file's [spark] pass-through, which wins.
        for key, value in storage_options().s3a_conf().items():
            builder = builder.config(key, value)
        jar_list = None if _submitted() else jar_paths()  # spark-submit: its --jars / --packages
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(driver_java_options(jar_list)))
        if jar_list is not None:
            builder = builder.config("spark.jars", ",".join(jar_list))
            for key, value in _merged_conf(local_fs_conf(jar_list), log_store_conf(jar_list),
                                           jar_helpers_conf(jar_list)).items():
                builder = builder.config(key, value)
        try:
            if NEXT.verbose:
                with _jvm_stdout_on_stderr():
                    spark = builder.getOrCreate()
            else:
                with _filtered_jvm_stderr(), _jvm_stdout_on_stderr():
                    spark = builder.getOrCreate()
        except Exception as exc:  # pyspark's own error types; the JVM has said why on stderr
            if "JAVA_GATEWAY_EXITED" not in str(exc) and "Java gateway process exited" not in str(exc):
                raise
            raise ConfigError("the Spark driver JVM did not start (its output is above; Java 17 on PATH or "
                              "JAVA_HOME is required); rerun with -v for Spark's full output") from None
        level = os.environ.get("REPLICATOR_SPARK_LOG_LEVEL", "ERROR")
        spark.sparkContext.setLogLevel(level)
        if level.upper() == "ERROR":
            _quiet_handled_errors(spark)
        return spark


def use_storage(spark: SparkSession) -> None:
    """Give a running session the process's current storage settings (the object store's
    endpoint, path style, region, the [spark] pass-through): a session started before they were
    configured, such as a notebook's own, reaches the same store (the Hadoop settings go to the
    context's configuration, which every session of it shares). They take effect for file systems
    first opened afterwards."""
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()  # shared by every session of the context
    for key, value in storage_options().s3a_conf().items():
        if key.startswith("spark.hadoop."):
            hadoop_conf.set(key.removeprefix("spark.hadoop."), value)
        else:
            spark.conf.set(key, value)


# Loggers that report at ERROR what is not an error for the replicator: Delta's "Failed to
# translate filter EqualTo(__delta_internal_is_row_deleted,0)" on every scan of a table with
# deletion vectors (a pushdown it cannot do; the scan is correct), and MergeIntoCommand's "Fatal
# error in MERGE" with a stack trace for a concurrent-commit conflict, which the applier retries
# and logs itself (any other MERGE failure reaches the caller as an exception anyway).
_HANDLED_ERROR_LOGGERS = (
    "org.apache.spark.sql.delta.DeltaParquetFileFormat",
    "org.apache.spark.sql.delta.commands.MergeIntoCommand",
)


def _quiet_handled_errors(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    off = jvm.org.apache.logging.log4j.Level.OFF
    for name in _HANDLED_ERROR_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)


def stop_spark() -> None:
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


def stop_jvm() -> None:
    """Stop Spark and its driver JVM, and wait for the JVM to exit (it exits when its gateway's
    stdin closes; a class archive being written is written then, see jvm_archive.py)."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context  # whichever thread started it
    if context is not None:
        context.stop()
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if gateway is None or proc is None:
        return
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None


_EXECUTOR_ERRORS = {"SchemaError": SchemaError, "DecodeError": DecodeError,
                    "UnsupportedError": UnsupportedError, "ReplicatorError": ReplicatorError}
_ERROR_LINE = re.compile(r"replicator\.errors\.(\w+Error): (.*)")


@contextmanager
def executor_errors(what: str) -> Iterator[None]:
    """Re-raise an error the executors' Python code raised (a SchemaError naming a row's position,
    say) as itself on the driver, instead of a Spark exception with a Python traceback inside."""
    try:
        yield
    except ReplicatorError:
        raise
    except Exception as exc:
        found = _ERROR_LINE.findall(str(exc))
        if found:
            name, message = found[-1]
            raise _EXECUTOR_ERRORS.get(name, ReplicatorError)(message.strip()) from None
        raise ReplicatorError(f"{what} failed on Spark: {str(exc).strip().splitlines()[0] if str(exc) else exc!r}") \
            from exc
