"""A class-data archive of the driver JVM, so that each run starts Spark and Delta faster.

Why: every `replicator run` starts a JVM that loads and verifies some 20,000 classes of Spark,
Scala and Delta before its first MERGE. On the 2-core machine that is about 1.5 s of a cold
session start and of the first Delta commands (`make bench`, docs/delta.md "Driver JVM start").
The JDK's dynamic class-data sharing (CDS) keeps those classes parsed and verified in a file
that the next JVM maps instead. `make setup` writes the archive once (`python -m
replicator.sim.jvm_archive`) by running a small replication through the real engine, so the
archive holds the classes a run loads; `get_spark` then starts the driver JVM with it.

This module is what the session needs to use an archive (where it is, the JVM options); writing
one runs the simulator and the engine, which sit above the Delta write path: replicator/sim/jvm_archive.py.

The archive is only valid for the JVM and the class path it was written with. Its file name
carries a key of both (the java binary, pyspark's jars, the cached Delta jars and the local file
system setting), so a changed installation looks for another file and starts as before until
`make setup` writes it; the JVM checks the class path itself too and, with its CDS logging off,
silently starts without an archive it cannot use (its warning would go to stdout, which
`--json-summary` owns). REPLICATOR_JVM_ARCHIVE=0 turns it off; a path puts it elsewhere.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off", "-Xlog:cds=off:stderr", "-Xlog:cds+dynamic=off:stderr"]
"""CDS logging off (on both outputs): a stale or foreign archive is skipped without a word."""

_dump_to: Path | None = None  # set while the archive is being written (`dumping_to`)


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


@contextmanager
def dumping_to(path: Path) -> Iterator[None]:
    """While inside, a driver JVM started by `get_spark` writes its class archive to `path` as it
    exits (replicator/sim/jvm_archive.py)."""
    global _dump_to
    _dump_to = path
    try:
        yield
    finally:
        _dump_to = None
