"""Writes the driver JVM's class-data archive (`make setup`: `python -m replicator.sim.jvm_archive`).

A small replication through the real engine, from the simulator's stream, in this process's own
driver JVM, which writes the archive as it exits: so the archive holds the classes a run loads.
What a session needs to use the archive (its path, the JVM options) is replicator/runtime/jvm_archive.py,
which says why there is one.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from replicator.runtime.jvm_archive import archive_path, dumping_to


def _train(scratch: Path) -> None:
    """A small replication through the real engine (DDLs, inserts into new tables, MERGEs into
    filled ones, several steps), so the archive holds the classes a run loads."""
    from replicator.engine.pipeline import Engine, RunOptions
    from replicator.sim.simulate import SimConfig, Simulation, write_archive
    from replicator.sources.archive import ArchiveSource

    sim = Simulation(SimConfig(protocol="craft", seed=7, events=3000, partitions=2, tables=3))
    write_archive(sim, scratch / "archive", "jvm-archive")
    options = RunOptions(warehouse=str(scratch / "warehouse"), protocol="craft", until_caught_up=True,
                         max_buffer_rows=800, spill_rows=0, progress=False)  # a step each full buffer
    Engine(ArchiveSource(scratch / "archive"), options).run()


def to_write(*, force: bool = False) -> Path | None:
    """The archive this installation still lacks (all of it with `force`); None: it exists, or off."""
    from replicator.runtime import spark as sparkmod

    path = archive_path(sparkmod.JVM_ARCHIVE_DIR, sparkmod.jar_paths())
    return None if path is None or (path.is_file() and not force) else path


def write(path: Path) -> None:
    """Write the archive at `path` from a small replication in this process's own driver JVM,
    which must not be running yet (the archive is written as that JVM exits)."""
    from pyspark import SparkContext

    from replicator.runtime import spark as sparkmod

    if SparkContext._active_spark_context is not None:
        raise RuntimeError("the JVM archive must be written by a process without a Spark session")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with dumping_to(tmp), tempfile.TemporaryDirectory(prefix="replicator-jvm-archive-") as scratch:
            _train(Path(scratch))
            sparkmod.stop_jvm()  # the JVM writes the archive as it exits
        if not tmp.is_file():
            raise RuntimeError(f"the driver JVM wrote no class archive at {tmp}")
        os.replace(tmp, path)
        for old in path.parent.glob("driver-*.jsa"):
            if old != path:
                old.unlink(missing_ok=True)
    finally:
        tmp.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    """`make setup`: write the archive if this installation has none. Quiet when it exists; a
    failure is reported and leaves runs as they were (without an archive), it does not fail set-up."""
    parser = argparse.ArgumentParser(prog="python -m replicator.sim.jvm_archive",
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
    sys.exit(main())
