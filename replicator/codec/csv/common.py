"""The CSV settings of a changefeed (`[sink.csv]`) and the record splitter both directions share.

TiCDC writes one row change per record: operation (`I`, `U`, `D`), table, schema, the commit ts
(`include-commit-ts = true`), the is-update flag (`output-old-value = true`: an UPDATE becomes a
`D` record of the old values and an `I` record of the new, both marked true), then the columns in
schema-file order. NULL is the bare `null` text (`\\N`); strings, decimals and temporal values
are quoted, a quote inside doubled; binary values are base64 or hex (`binary-encoding-method`).
The new architecture may write a header record (`output-field-header`) of `ticdc-meta$...` names.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from replicator.errors import ConfigError, DecodeError

__all__ = ["HEADER_PREFIX", "CsvConfig", "Field", "split_fields", "split_records"]

HEADER_PREFIX: Final = "ticdc-meta$"
BinaryEncoding = Literal["base64", "hex"]


@dataclass(frozen=True)
class CsvConfig:
    """The changefeed's `[sink.csv]` settings (TiCDC's defaults)."""

    delimiter: str = ","
    quote: str = '"'
    terminator: str = "\r\n"
    null: str = "\\N"
    include_commit_ts: bool = True
    output_old_value: bool = False
    binary_encoding: BinaryEncoding = "base64"

    def __post_init__(self) -> None:
        if not 1 <= len(self.delimiter) <= 3:
            raise ConfigError(f"csv delimiter must be 1-3 characters, not {self.delimiter!r}")
        if len(self.quote) > 1 or (self.quote and self.quote in self.delimiter):
            raise ConfigError(f"csv quote must be one character (or empty) outside the delimiter, not {self.quote!r}")
        if self.terminator not in ("\r\n", "\n"):
            raise ConfigError(f"csv terminator must be \\r\\n or \\n, not {self.terminator!r}")
        if self.binary_encoding not in ("base64", "hex"):
            raise ConfigError(f"binary-encoding-method must be base64 or hex, not {self.binary_encoding!r}")


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a record: its text, and whether it was quoted (a quoted `\\N` is the string)."""

    text: str
    quoted: bool


def split_records(text: str, config: CsvConfig) -> Iterator[tuple[int, str]]:
    """(first line number, 1-based; the record's text without its terminator) of every record.

    A quoted field may hold line breaks; a record ends at a line break outside quotes (a bare
    `\\r\\n` or `\\n`: both terminators are accepted). An unterminated quote raises `DecodeError`
    at the record's first line.
    """
    q = config.quote
    i, n, line = 0, len(text), 1
    while i < n:
        start, start_line, inside = i, line, False
        while i < n:
            ch = text[i]
            if q and ch == q:
                inside = not inside  # a doubled quote toggles twice
            elif ch == "\n":
                if not inside:
                    break
                line += 1
            i += 1
        if inside:
            raise DecodeError("a quoted field is not closed before the end of the file", where=f"line {start_line}")
        record = text[start:i]
        if record.endswith("\r"):
            record = record[:-1]
        i += 1
        line += 1
        if record:
            yield start_line, record


def split_fields(record: str, config: CsvConfig) -> list[Field]:
    """The fields of one record (quotes removed, doubled quotes undone)."""
    q, d = config.quote, config.delimiter
    out: list[Field] = []
    i, n = 0, len(record)
    while True:
        if q and record.startswith(q, i):
            parts: list[str] = []
            i += 1
            while True:
                j = record.find(q, i)
                if j < 0:
                    raise DecodeError("a quoted field is not closed")
                parts.append(record[i:j])
                if record.startswith(q, j + 1):
                    parts.append(q)
                    i = j + 2
                    continue
                i = j + 1
                break
            out.append(Field("".join(parts), True))
            if i == n:
                return out
            if not record.startswith(d, i):
                raise DecodeError(f"characters after a closing quote: {record[i:i + 20]!r}")
            i += len(d)
        else:
            j = record.find(d, i)
            if j < 0:
                out.append(Field(record[i:], False))
                return out
            out.append(Field(record[i:j], False))
            i = j + len(d)
            if i == n:
                out.append(Field("", False))
                return out
