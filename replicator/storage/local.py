"""A local directory as a store: atomic replace by rename, durable by fsync, conditional writes
under a short `flock` of a guard file beside the target (processes on one machine, or a network
file system with working locks)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from replicator.storage.fileio import FileIO, Versioned


def atomic_write(path: str | os.PathLike[str], data: bytes) -> None:
    """Atomic, durable replace: write `<name>.tmp`, fsync, rename over `path`, fsync the directory.
    A crash leaves either the old or the new file, never a torn one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(target.suffix + f".{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    dfd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


class LocalFileIO(FileIO):
    can_append = True

    def read(self, path: str) -> bytes | None:
        try:
            return Path(path).read_bytes()
        except FileNotFoundError:
            return None

    def read_versioned(self, path: str) -> Versioned | None:
        data = self.read(path)
        return None if data is None else Versioned(data, _etag(data))

    def write(self, path: str, data: bytes) -> None:
        atomic_write(path, data)

    @contextmanager
    def _guard(self, path: str) -> Iterator[None]:
        """Serialise the conditional writes of `path` (the compare and the rename as one step)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{path}.guard", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def create(self, path: str, data: bytes) -> str | None:
        with self._guard(path):
            if os.path.exists(path):
                return None
            atomic_write(path, data)
        return _etag(data)

    def replace(self, path: str, data: bytes, etag: str) -> str | None:
        with self._guard(path):
            current = self.read(path)
            if current is None or _etag(current) != etag:
                return None
            atomic_write(path, data)
        return _etag(data)

    def append(self, path: str, data: bytes) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def files(self, path: str) -> Iterator[tuple[str, int]]:
        for root, _dirs, names in os.walk(path):
            for name in names:
                full = os.path.join(root, name)
                with suppress(OSError):
                    yield full, os.stat(full).st_size

    def children(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def remove(self, path: str) -> None:
        for name in (path, f"{path}.guard"):  # and the guard of its conditional writes
            with suppress(FileNotFoundError):
                os.unlink(name)

    def remove_listed(self, path: str, files: Sequence[str]) -> None:
        for file in files:
            with suppress(FileNotFoundError):
                os.unlink(file)
        for root, _dirs, _names in os.walk(path, topdown=False):
            with suppress(OSError):  # not empty: something was written since the listing
                os.rmdir(root)

    def join(self, base: str, *parts: str) -> str:
        return os.path.join(base, *parts)

    def describe(self) -> str:
        return "the local file system"
