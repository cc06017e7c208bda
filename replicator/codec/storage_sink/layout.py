"""TiCDC storage-sink paths and small files, read and written (docs/storage-sink.md).

Data files: `{schema}/{table}/{table-version}/[{partition}/][{date}/]CDC{num}.{ext}` and, when the
new architecture splits a table between writers, `CDC_{uuid}_{num}.{ext}`. Beside them
`meta/CDC.index` (`meta/CDC_{uuid}.index`) names the largest file in use: one name and a newline.
The file number restarts at 1 in each date directory. `{prefix}/metadata` holds the changefeed's
checkpoint-ts, the storage sink's resolved ts.

A record's place in the engine: each data-file stream (schema, table, version, partition,
uuid) is one engine partition whose offsets fold (date, file number, line) into one integer, in
the order the stream is read (`fold_offset`, `unfold_offset`).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import Final, Literal

from replicator.errors import DecodeError

__all__ = [
    "DATE_SEPARATORS",
    "DataFile",
    "DateSeparator",
    "StreamKey",
    "date_dir",
    "date_key",
    "fold_offset",
    "index_name",
    "index_writer",
    "meta_topic",
    "parse_data_file",
    "parse_index",
    "parse_metadata",
    "render_metadata",
    "unfold_offset",
]

DateSeparator = Literal["none", "year", "month", "day"]
DATE_SEPARATORS: Final = ("none", "year", "month", "day")
EXTENSIONS: Final = {"csv": ".csv", "canal-json": ".json"}
METADATA: Final = "metadata"
SOURCE_PREFIX: Final = "storage:"  # a warehouse's recorded source: `storage:<url of the changefeed>`
META_DIR: Final = "meta"
DEFAULT_INDEX_WIDTH: Final = 20  # tiflow's file-index-width default

_DATA_RE: Final = re.compile(r"CDC(?:_(?P<uuid>[0-9A-Za-z-]+)_)?(?P<num>[0-9]{1,20})(?P<ext>\.csv|\.json)\Z")
_INDEX_RE: Final = re.compile(r"CDC(?:_(?P<uuid>[0-9A-Za-z-]+))?\.index\Z")
_DATE_RES: Final[dict[str, re.Pattern[str]]] = {
    "year": re.compile(r"(?P<y>[0-9]{4})\Z"),
    "month": re.compile(r"(?P<y>[0-9]{4})-(?P<m>[0-9]{2})\Z"),
    "day": re.compile(r"(?P<y>[0-9]{4})-(?P<m>[0-9]{2})-(?P<d>[0-9]{2})\Z"),
}

# An offset must fit a signed 64-bit integer (the dead-letter table's BIGINT): 16 bits of date (days
# since 1970, to 2149), 24 of file number (16M files per date directory and writer), 23 of line
# (8M records per file: TiCDC's 64 MiB files hold fewer).
DATE_BITS: Final = 16
NUM_BITS: Final = 24
LINE_BITS: Final = 23
LINE_MASK: Final = (1 << LINE_BITS) - 1
NUM_MASK: Final = (1 << NUM_BITS) - 1
DATE_MASK: Final = (1 << DATE_BITS) - 1
_EPOCH: Final = dt.date(1970, 1, 1)


@dataclass(frozen=True, slots=True, order=True)
class DataFile:
    """A data file's name: its writer (`uuid`, empty for the one writer of a table) and number."""

    num: int
    uuid: str = ""
    ext: str = ".csv"
    width: int = field(default=DEFAULT_INDEX_WIDTH, compare=False)  # digits of the zero-padded number

    def name(self) -> str:
        writer = f"_{self.uuid}_" if self.uuid else ""
        return f"CDC{writer}{self.num:0{self.width}d}{self.ext}"


def parse_data_file(name: str) -> DataFile | None:
    """`CDC000005.csv` / `CDC_{uuid}_000005.json` -> DataFile; None for any other name."""
    m = _DATA_RE.match(name)
    if m is None:
        return None
    digits = m.group("num")
    return DataFile(int(digits), m.group("uuid") or "", m.group("ext"), len(digits))


def index_name(uuid: str = "") -> str:
    """The index file's name (in the `meta` directory beside the data files)."""
    return f"CDC_{uuid}.index" if uuid else "CDC.index"


def index_writer(name: str) -> str | None:
    """The writer (uuid, or "" for the table's one writer) an index file name belongs to; None: not one."""
    m = _INDEX_RE.match(name)
    return None if m is None else (m.group("uuid") or "")


def parse_index(data: bytes, where: str) -> DataFile:
    """An index file's content: the largest data file name in use there."""
    text = data.decode("utf-8", "replace").strip()
    found = parse_data_file(text)
    if found is None:
        raise DecodeError(f"index file holds {text[:80]!r}, not a data file name (CDC<number>.csv or .json)",
                          where=where)
    return found


def parse_metadata(data: bytes, where: str) -> int:
    """The changefeed's `metadata` file: {"checkpoint-ts": TSO}."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise DecodeError(f"metadata file is not JSON ({exc})", where=where) from None
    ts = obj.get("checkpoint-ts") if isinstance(obj, dict) else None
    if type(ts) is not int or ts < 0:
        raise DecodeError("metadata file has no integer 'checkpoint-ts'", where=where)
    return ts


def render_metadata(checkpoint_ts: int) -> bytes:
    return json.dumps({"checkpoint-ts": checkpoint_ts}).encode()


def date_key(name: str, separator: DateSeparator) -> int | None:
    """A date directory's name as an increasing number (days since 1970 of its first day); None:
    not a date directory of this separator (with `none` there are none: the key is 0)."""
    if separator == "none":
        return None
    m = _DATE_RES[separator].match(name)
    if m is None:
        return None
    parts = m.groupdict()
    try:
        day = dt.date(int(parts["y"]), int(parts.get("m") or 1), int(parts.get("d") or 1))
    except ValueError:
        return None
    key = (day - _EPOCH).days
    return key if 0 <= key <= DATE_MASK else None


def date_dir(when: dt.datetime, separator: DateSeparator) -> str:
    """The date directory TiCDC writes for a flush at `when` ("" with `none`)."""
    if separator == "year":
        return when.strftime("%Y")
    if separator == "month":
        return when.strftime("%Y-%m")
    if separator == "day":
        return when.strftime("%Y-%m-%d")
    return ""


def fold_offset(date: int, num: int, line: int) -> int:
    """(date key, file number, line) -> one engine offset, increasing in reading order, below 2**63."""
    if not (0 <= num <= NUM_MASK and 0 <= line <= LINE_MASK and 0 <= date <= DATE_MASK):
        raise ValueError(f"position date {date} file {num} line {line} is out of range (at most {DATE_MASK} days, "
                         f"{NUM_MASK} files per date directory, {LINE_MASK} lines per file)")
    return (date << (NUM_BITS + LINE_BITS)) | (num << LINE_BITS) | line


def unfold_offset(offset: int) -> tuple[int, int, int]:
    """Inverse of `fold_offset`."""
    return offset >> (NUM_BITS + LINE_BITS), (offset >> LINE_BITS) & NUM_MASK, offset & LINE_MASK


def after_file(date: int, num: int) -> int:
    """The offset of the position just past file `num` (all its lines read): where the stream's
    resolved marker goes, so that the next offset is that of the next file's first line."""
    return fold_offset(date, num, LINE_MASK)


@dataclass(frozen=True, slots=True)
class StreamKey:
    """One data-file stream: the files one writer writes for one table version (and partition)."""

    schema: str
    table: str
    version: int
    partition: int | None = None
    uuid: str = ""

    @property
    def directory(self) -> str:
        """The version (and partition) directory, relative to the changefeed's prefix."""
        parts = [self.schema, self.table, str(self.version)]
        if self.partition is not None:
            parts.append(str(self.partition))
        return "/".join(parts)

    @property
    def topic(self) -> str:
        """The stream's name as the engine's progress records it (its "topic", partition 0)."""
        return self.directory + (f"#{self.uuid}" if self.uuid else "")


def meta_topic(schema: str, table: str = "") -> str:
    """The engine "topic" of a table's (or, with no table, a database's) schema files: their DDLs."""
    return f"{schema}/{table}/meta" if table else f"{schema}/meta"
