"""The file interface the warehouse's own state goes through, and a path-like `Location` over it.

Paths are plain strings: an absolute local path, or a URL (`s3a://bucket/key`). What the
replicator needs from a store is small and the same everywhere:

* `read` / `write`: a whole small file; `write` replaces atomically (a reader sees the old or the
  new bytes, never half) and durably.
* `create` / `replace`: conditional writes (create only if absent; replace only if unchanged since
  it was read, by entity tag): the writer lease is built on them (storage/lease.py).
* `append`: only where the store can append in place (`can_append`); the step log uses segments
  elsewhere (storage/steplog.py).
* `exists`, `files` (recursive, with sizes), `children`, `remove`, `remove_tree`: the few looks into table
  directories (a crash's leftovers, Delta logs, the size of the tables).
"""

from __future__ import annotations

import os
import posixpath
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
S3_SCHEMES = frozenset({"s3a", "s3", "s3n"})


def is_url(path: str | os.PathLike[str]) -> bool:
    """A URL with a scheme other than file:// (a local path is not one)."""
    m = _URL.match(os.fspath(path))
    return m is not None and m.group(1).lower() != "file"


def scheme_of(path: str) -> str:
    m = _URL.match(path)
    return m.group(1).lower() if m else "file"


def normalise_root(root: str | os.PathLike[str]) -> str:
    """A warehouse root as state files record it: an absolute local path, or the URL without a
    trailing slash. `file://` URLs become local paths."""
    text = os.fspath(root)
    if text.startswith("file://"):
        text = text[len("file://"):]
    if is_url(text):
        return text.rstrip("/")
    return str(Path(text).resolve())


@dataclass(frozen=True)
class Versioned:
    """A file's bytes and its entity tag (what a conditional `replace` compares against)."""

    data: bytes
    etag: str
    # Seconds since the file was last written, by the store's own clock (its answer's Date less the
    # object's Last-Modified): how old a lease record is without anyone's wall clock in it. None
    # where the store does not say (a local directory: the writer's clock is the reader's).
    age: float | None = None


class FileIO(ABC):
    """One store. Every method takes full paths (local paths or URLs of this store's scheme)."""

    can_append: bool = False

    @abstractmethod
    def read(self, path: str) -> bytes | None:
        """The file's bytes; None when it does not exist."""

    @abstractmethod
    def read_versioned(self, path: str) -> Versioned | None:
        """The file's bytes and entity tag; None when it does not exist."""

    @abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Atomic, durable replace (or create)."""

    @abstractmethod
    def create(self, path: str, data: bytes) -> str | None:
        """Create the file only if it does not exist: its entity tag, or None when it existed."""

    @abstractmethod
    def replace(self, path: str, data: bytes, etag: str) -> str | None:
        """Replace the file only if its entity tag is still `etag`: the new tag, or None when it
        changed (or was removed) since."""

    def append(self, path: str, data: bytes) -> None:
        """Append durably (only where `can_append`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot append in place")

    @abstractmethod
    def exists(self, path: str) -> bool:
        """A file at `path`, or anything below it (a directory, a key prefix)."""

    @abstractmethod
    def files(self, path: str) -> Iterator[tuple[str, int]]:
        """(path, size) of every file below `path`, recursively, in no particular order."""

    @abstractmethod
    def children(self, path: str) -> list[str]:
        """Names of the files and directories directly below `path` (empty when there are none)."""

    def children_from(self, path: str, first: str) -> list[str]:
        """`children(path)` from the name `first` on (in name order): on an object store one list
        from there (a `_delta_log` read from its last checkpoint, however many commits it keeps)."""
        return [n for n in self.children(path) if n >= first]

    @abstractmethod
    def remove_tree(self, path: str) -> None:
        """Remove `path` and everything below it."""

    def remove(self, path: str) -> None:
        """Remove one file (nothing when it is absent)."""
        self.remove_tree(path)

    def remove_listed(self, path: str, files: Sequence[str]) -> None:
        """Remove exactly `files` (one listing of `path`), then the directories below `path` (and
        `path`) left empty: a file written there since the listing is kept, never listed again to
        be removed."""
        for file in files:
            self.remove(file)

    def join(self, base: str, *parts: str) -> str:
        return posixpath.join(base, *parts)

    def describe(self) -> str:
        """The store, for messages (never a secret)."""
        return type(self).__name__


class Location(os.PathLike[str]):
    """A path in a store: the little of `pathlib.Path` the warehouse and its readers use, over any
    `FileIO` (`os.fspath` gives the local path or the URL)."""

    __slots__ = ("io", "path")

    def __init__(self, io: FileIO, path: str) -> None:
        self.io = io
        self.path = path

    def __truediv__(self, part: str) -> Location:
        return Location(self.io, self.io.join(self.path, part))

    def __fspath__(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"Location({self.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/"))

    @property
    def parent(self) -> Location:
        return Location(self.io, posixpath.dirname(self.path.rstrip("/")))

    def exists(self) -> bool:
        return self.io.exists(self.path)

    def read_bytes(self) -> bytes:
        data = self.io.read(self.path)
        if data is None:
            raise FileNotFoundError(self.path)
        return data

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """A directory on a local store; nothing on an object store (prefixes need no creating)."""
        if not is_url(self.path):
            Path(self.path).mkdir(parents=parents, exist_ok=exist_ok)
