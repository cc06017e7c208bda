"""A class-data archive of the driver JVM, so that each run starts Spark and Delta faster.

Why: every `replicator run` starts a JVM that loads and verifies some 20,000 classes of Spark,
Scala and Delta before its first MERGE. On the 2-core machine that is about 1.5 s of a cold
session start and of the first Delta commands (`make bench`, docs/delta.md "Driver JVM start").
The JDK's dynamic class-data sharing (CDS) keeps those classes parsed and verified in a file
that the next JVM maps instead. `make setup` writes the archive once (`python -m
replicator.delta.jvm_archive`) by running a small replication through the real engine, so the
archive holds the classes a run loads; `get_spark` then starts the driver JVM with it.

The archive is only valid for the JVM and the class path it was written with. Its file name
carries a key of both (the java binary, pyspark's jars, the cached Delta jars and the local file
system setting), so a changed installation looks for another file and starts as before until
`make setup` writes it; the JVM checks the class path itself too and, with its CDS logging off,
silently starts without an archive it cannot use (its warning would go to stdout, which
`--json-summary` owns). REPLICATOR_JVM_ARCHIVE=0 turns it off; a path puts it elsewhere.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off", "-Xlog:cds=off:stderr", "-Xlog:cds+dynamic=off:stderr"]
"""CDS logging off (on both outputs): a stale or foreign archive is skipped without a word."""

_dump_to: Path | None = None  # set while the archive is being written (this module's main)


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def archive_key(jars: list[str] | None) -> str | None:
    """A digest of what the archive depends on: the java binary, pyspark's jars and `jars` (the
    cached jars `get_spark` puts on the class path), each by path, size and modification time;
    None when java cannot be found (Spark would not start either)."""
    java = _java()
    if java is None:
        return None
    import pyspark

    spark_jars = sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    digest = hashlib.sha256()
    for path in [java, *spark_jars, *(Path(j) for j in jars or [])]:
        try:
            st = path.stat()
        except OSError:
            continue
        digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    digest.update(os.environ.get("REPLICATOR_NIO_LOCAL_FS", "1").encode())
    return digest.hexdigest()[:16]


def archive_path(default_dir: Path, jars: list[str] | None) -> Path | None:
    """Where the archive for this installation is (whether or not it exists yet); None when
    turned off (REPLICATOR_JVM_ARCHIVE=0) or without java."""
    setting = os.environ.get("REPLICATOR_JVM_ARCHIVE", "")
    if setting.lower() in ("0", "off", "false", "no"):
        return None
    if setting:
        return Path(setting)
    key = archive_key(jars)
    return default_dir / f"driver-{key}.jsa" if key else None


def java_options(default_dir: Path, jars: list[str] | None) -> list[str]:
    """The driver JVM's CDS options: write the archive at exit (while building it), use it when
    it exists, else none."""
    if _dump_to is not None:
        return ["-XX:ArchiveClassesAtExit=" + str(_dump_to), *QUIET]
    path = archive_path(default_dir, jars)
    if path is None or not path.is_file():
        return []
    return ["-XX:SharedArchiveFile=" + str(path), *QUIET]


def _train(scratch: Path) -> None:
    """A small replication through the real engine (DDLs, inserts into new tables, MERGEs into
    filled ones, several steps), so the archive holds the classes a run loads."""
    from replicator.engine.pipeline import Engine, RunOptions
    from replicator.sim.simulate import SimConfig, Simulation, write_archive
    from replicator.sources.archive import ArchiveSource

    sim = Simulation(SimConfig(protocol="craft", seed=7, events=3000, partitions=2, tables=3))
    write_archive(sim, scratch / "archive", "jvm-archive")
    options = RunOptions(warehouse=str(scratch / "warehouse"), protocol="craft", until_caught_up=True,
                         max_buffer_rows=800, progress=False)
    Engine(ArchiveSource(scratch / "archive"), options).run()


def to_write(*, force: bool = False) -> Path | None:
    """The archive this installation still lacks (all of it with `force`); None: it exists, or off."""
    from replicator.delta import spark as sparkmod

    path = archive_path(sparkmod.JVM_ARCHIVE_DIR, sparkmod._jar_paths())
    return None if path is None or (path.is_file() and not force) else path


def write(path: Path) -> None:
    """Write the archive at `path` from a small replication in this process's own driver JVM,
    which must not be running yet (the archive is written as that JVM exits)."""
    global _dump_to
    from pyspark import SparkContext

    from replicator.delta import spark as sparkmod

    if SparkContext._active_spark_context is not None:
        raise RuntimeError("the JVM archive must be written by a process without a Spark session")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _dump_to = tmp
    try:
        with tempfile.TemporaryDirectory(prefix="replicator-jvm-archive-") as scratch:
            _train(Path(scratch))
            sparkmod.stop_jvm()  # the JVM writes the archive as it exits
        if not tmp.is_file():
            raise RuntimeError(f"the driver JVM wrote no class archive at {tmp}")
        os.replace(tmp, path)
        for old in path.parent.glob("driver-*.jsa"):
            if old != path:
                old.unlink(missing_ok=True)
    finally:
        _dump_to = None
        tmp.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    """`make setup`: write the archive if this installation has none. Quiet when it exists; a
    failure is reported and leaves runs as they were (without an archive), it does not fail set-up."""
    parser = argparse.ArgumentParser(prog="python -m replicator.delta.jvm_archive",
                                     description="write the driver JVM's class archive (make setup)")
    parser.add_argument("--force", action="store_true", help="write it again even if it exists")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    for noisy in ("py4j", "kafka"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    path = to_write(force=args.force)
    if path is None:
        return 0
    print(f"writing the driver JVM's class archive {path} (a small replication, about a minute)")
    started = time.monotonic()
    try:
        write(path)
    except Exception as exc:  # an optimisation only: runs start without it
        print(f"warning: no JVM class archive ({exc}); Spark starts without one", file=sys.stderr)
        return 0
    print(f"wrote {path} ({path.stat().st_size / 2**20:.0f} MiB) in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    # Through the imported module, whose `_dump_to` get_spark reads (not this __main__ copy).
    from replicator.delta.jvm_archive import main as imported_main

    sys.exit(imported_main())
