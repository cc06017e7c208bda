"""Any other Hadoop URL (`abfss://`, `gs://`, `hdfs://`, ...) as a store, through the Hadoop file
system Spark itself writes the Delta tables with (its jars on the classpath, its settings from the
`[spark]` table): so a store Spark can reach holds the state too.

Writes go to a temporary file, then a rename over the target (atomic on HDFS, ABFS and GCS).
Hadoop's API has no compare-and-swap: `create` is Hadoop's create-without-overwrite (exclusive on
those stores), but `replace` compares the file's modification time and length and then renames, so
the writer lease is exclusive on these stores only between runs that do not start within the same
instant. Only S3 is tested here (docs/running-on-object-storage.md).

The Spark session comes from above: storage sits below the Spark runtime, which owns the session
factory and hands it over with `use_session_factory` (replicator/runtime/__init__.py), so the
session is made only when a Hadoop URL is first used, as before.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from replicator.errors import StorageError
from replicator.storage.fileio import FileIO, Versioned

_LOCK = threading.Lock()
_shared: HadoopFileIO | None = None
_session_factory: Callable[[], Any] | None = None


def use_session_factory(factory: Callable[[], Any]) -> None:
    """Where the shared instance gets its SparkSession from (called once it is first needed)."""
    global _session_factory
    _session_factory = factory


class HadoopFileIO(FileIO):
    def __init__(self, spark: Any) -> None:
        """Over `spark`'s JVM and a Hadoop configuration of its session (its `spark.hadoop.*`)."""
        self._jvm: Any = spark.sparkContext._jvm
        self._conf: Any = spark._jsparkSession.sessionState().newHadoopConf()

    @classmethod
    def shared(cls) -> HadoopFileIO:
        global _shared
        with _LOCK:
            if _shared is None:
                if _session_factory is None:
                    raise StorageError("a Hadoop URL needs a Spark session: import replicator.delta, which "
                                       "provides it, before using one")
                _shared = cls(_session_factory())
            return _shared

    def _fs(self, path: str) -> tuple[Any, Any]:
        p = self._jvm.org.apache.hadoop.fs.Path(path)
        try:
            return p.getFileSystem(self._conf), p
        except Exception as exc:
            raise StorageError(f"no Hadoop file system for {path}: {str(exc).splitlines()[0]}; put its jars on "
                               "Spark's classpath (REPLICATOR_SPARK_JARS) and its settings in the [spark] table") \
                from None

    def describe(self) -> str:
        return "a Hadoop file system"

    def _status(self, path: str) -> Any | None:
        fs, p = self._fs(path)
        return fs.getFileStatus(p) if fs.exists(p) else None

    def _etag(self, status: Any) -> str:
        return f"{status.getModificationTime()}-{status.getLen()}"

    def read(self, path: str) -> bytes | None:
        got = self.read_versioned(path)
        return None if got is None else got.data

    def read_versioned(self, path: str) -> Versioned | None:
        fs, p = self._fs(path)
        status = self._status(path)
        if status is None or status.isDirectory():
            return None
        stream = fs.open(p)
        try:
            data = bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
        finally:
            stream.close()
        return Versioned(data, self._etag(status))

    def _put(self, path: str, data: bytes, *, overwrite: bool) -> None:
        fs, p = self._fs(path)
        out = fs.create(p, overwrite)
        try:
            out.write(bytearray(data))
        finally:
            out.close()

    def write(self, path: str, data: bytes) -> None:
        fs, p = self._fs(path)
        tmp = self._jvm.org.apache.hadoop.fs.Path(f"{path}.{uuid.uuid4().hex}.tmp")
        self._put(str(tmp.toString()), data, overwrite=True)
        fs.delete(p, False)
        if not fs.rename(tmp, p):
            raise StorageError(f"cannot replace {path}: the rename from {tmp.toString()} failed")

    def create(self, path: str, data: bytes) -> str | None:
        try:
            self._put(path, data, overwrite=False)
        except Exception as exc:
            if "FileAlreadyExists" in str(exc) or "already exists" in str(exc):
                return None
            raise
        status = self._status(path)
        return None if status is None else self._etag(status)

    def replace(self, path: str, data: bytes, etag: str) -> str | None:
        status = self._status(path)
        if status is None or self._etag(status) != etag:
            return None
        self.write(path, data)
        status = self._status(path)
        return None if status is None else self._etag(status)

    def exists(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(fs.exists(p))

    def files(self, path: str) -> Iterator[tuple[str, int]]:
        fs, p = self._fs(path)
        if not fs.exists(p):
            return
        it = fs.listFiles(p, True)
        while it.hasNext():
            status = it.next()
            yield str(status.getPath().toString()), int(status.getLen())

    def children(self, path: str) -> list[str]:
        fs, p = self._fs(path)
        if not fs.exists(p):
            return []
        return sorted(str(s.getPath().getName()) for s in fs.listStatus(p))

    def remove_tree(self, path: str) -> None:
        fs, p = self._fs(path)
        fs.delete(p, True)

    def remove_listed(self, path: str, files: Sequence[str]) -> None:
        fs, root = self._fs(path)
        for file in files:
            fs.delete(self._fs(file)[1], False)

        def prune(p: Any) -> None:  # depth first; a directory written to since is not empty: kept
            for status in fs.listStatus(p):
                if status.isDirectory():
                    prune(status.getPath())
            with contextlib.suppress(Exception):
                fs.delete(p, False)

        if fs.exists(root):
            prune(root)
