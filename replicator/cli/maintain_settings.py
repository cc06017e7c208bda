"""The settings of `replicator maintain` (`replicator.maintenance`), kept beside
`replicator.cli.settings` (which would pass its size limit) and layered the same way.

`MaintainFields` holds the layered ones (flag > environment `REPLICATOR_<NAME>` > config file), with
their defaults: `ReplicatorSettings` derives from it, so one config file serves every command
(`retention_hours = 336` in a file `replicator run` also reads is no unknown key).
`replicator.cli.maintain.MaintainCommand` carries the flags that are deliberately not layered:
`--dry-run`, `--json` and the unsafe `--allow-short-retention`, which must be typed on the command
line each time, never left behind in an environment or a file.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field
from pydantic_settings import BaseSettings

from replicator.delta.schemachange import format_size, parse_size
from replicator.errors import ConfigError
from replicator.maintenance import DEFAULT_MIN_SMALL_FILES, DEFAULT_RETENTION_HOURS, DEFAULT_TARGET_FILE_BYTES


def _size(value: Any) -> int:
    """`--target-file-size`: a byte count or a size (`64MiB`); the ConfigError's text as the error."""
    try:
        return parse_size(value, "a size")
    except ConfigError as exc:
        raise ValueError(str(exc).removeprefix("a size: ")) from None


def add_size_flags(p: Any, d: dict[str, Any], who: str) -> None:
    """`--target-file-size` and `--min-small-files` of `who` ("compact", "a follower compacts")."""
    p.add_argument("--target-file-size", metavar="SIZE",
                   help="compacted files' size; a file under half of it is small; bytes or a size (64MiB) "
                        f"(default {format_size(d['target_file_size'])})")
    p.add_argument("--min-small-files", type=int, metavar="N",
                   help=f"{who} a table once it holds N small files (default {d['min_small_files']})")


class MaintainFields(BaseSettings):
    """`replicator maintain`'s layered settings (field name = flag name with '_')."""

    # VACUUM: files no version within this many hours needs are removed (also `_change_data/`:
    # how far back the change data feed stays readable); 7 days, Delta's own default
    retention_hours: float = Field(default=DEFAULT_RETENTION_HOURS, ge=0)
    # OPTIMIZE: bin-pack into files of about this size; a file under half of it is small
    target_file_size: Annotated[int, BeforeValidator(_size)] = Field(default=DEFAULT_TARGET_FILE_BYTES, gt=0)
    # OPTIMIZE a table only once it holds at least this many small files
    min_small_files: int = Field(default=DEFAULT_MIN_SMALL_FILES, ge=2)
    # `replicator run`: a follower compacts the tables it writes between its steps by the two
    # rules above (engine/compaction.py); `--no-compaction` turns it off (None: a follower does)
    compaction: bool | None = None
