"""Which store a path is in: `fileio_for` picks the `FileIO` by the path's scheme (local
directories, S3, other Hadoop URLs), apart from fileio.py, the interface those stores implement."""

from __future__ import annotations

import os

from replicator.storage.fileio import S3_SCHEMES, FileIO, Location, is_url, normalise_root, scheme_of


def fileio_for(path: str | os.PathLike[str]) -> FileIO:
    """The store of `path`: local directories, `s3a://` / `s3://` / `s3n://` object stores, and any
    other Hadoop URL through Spark's Hadoop file systems."""
    text = os.fspath(path)
    scheme = scheme_of(text) if is_url(text) else "file"
    if scheme == "file":
        from replicator.storage.local import LocalFileIO

        return LocalFileIO()
    if scheme in S3_SCHEMES:
        from replicator.storage.s3 import S3FileIO

        return S3FileIO.shared()
    from replicator.storage.hadoop import HadoopFileIO

    return HadoopFileIO.shared()


def as_location(path: Location | str | os.PathLike[str]) -> Location:
    """`path` as a Location in its store (a Location is returned as it is)."""
    if isinstance(path, Location):
        return path
    text = normalise_root(path)
    return Location(fileio_for(text), text)
