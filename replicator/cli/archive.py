"""`replicator archive inspect`: print every frame of capture archives, then fail on bad CRCs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from replicator.cli.common import add_config, add_store_access, settings_from
from replicator.cli.settings import ArchiveInspectCommand
from replicator.errors import FrameError

if TYPE_CHECKING:
    from replicator.formats.archive import ArchiveFile


def register(sub: Any) -> None:
    p = sub.add_parser("archive", help="work with capture archives")
    actions = p.add_subparsers(dest="archive_command", metavar="ACTION", required=True)
    inspect_p = actions.add_parser("inspect", help="print frames (offset, type, length, CRC) and records")
    inspect_p.add_argument("paths", nargs="+", metavar="PATH",
                           help="archive files or directories, or object-store URLs (s3a://bucket/prefix[/file])")
    add_store_access(inspect_p)
    add_config(inspect_p)
    inspect_p.set_defaults(handler=_inspect)


def _inspect(ns: argparse.Namespace) -> int:
    from replicator.storage import is_url

    if any(is_url(p) for p in ns.paths):
        settings_from(ns)  # how to reach the store
    return inspect_archives(ArchiveInspectCommand(paths=tuple(ns.paths)))


def inspect_archives(cmd: ArchiveInspectCommand, out: IO[str] | None = None) -> int:
    """Directories expand to their archive files. Structural errors propagate (after the frames
    before them were printed); bad CRCs are all listed, then reported as one FrameError."""
    from replicator.formats.archive import archive_files, list_archive_files
    from replicator.formats.inspect import format_inspect_entry, inspect
    from replicator.storage import is_url

    stream = out if out is not None else sys.stdout
    bad: list[tuple[str, int]] = []
    files: list[ArchiveFile] = []
    for p in cmd.paths:
        if is_url(p):
            files.extend(archive_files(p))  # a prefix's archive objects, or one object
        else:
            files.extend(list_archive_files(p) if Path(p).is_dir() else [Path(p)])
    for f in files:
        print(f"# {f}", file=stream)
        for entry in inspect(f):
            print(format_inspect_entry(entry, limit=cmd.limit), file=stream)
            if not entry["crc_ok"]:
                bad.append((entry["file"], entry["offset"]))
    if bad:
        raise FrameError(f"{len(bad)} frame(s) with a bad CRC, the first", offset=bad[0][1], where=bad[0][0])
    return 0
