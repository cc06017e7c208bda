"""The CSV settings of a changefeed (`[sink.csv]`) and the record splitter both directions share.

TiCDC writes one row change per record: operation (`I`, `U`, `D`), table, schema, the commit ts
(`include-commit-ts = true`), the is-update flag (`output-old-value = true`: an UPDATE becomes a
`D` record of the old values and an `I` record of the new, both marked true), then the columns in
schema-file order. NULL is the bare `null` text (`\\N`); strings, decimals and temporal values
are quoted, a quote inside doubled; binary values are base64 or hex (`binary-encoding-method`).
The new architecture may write a header record (`output-field-header`) of `ticdc-meta$...` names.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, Literal

from replicator.errors import ConfigError, DecodeError

__all__ = ["HEADER_PREFIX", "CsvConfig", "Field", "split_fields", "split_records", "split_texts"]

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
    at the record's first line. Line by line with `str.find` / `str.count` (a quote toggles "inside",
    a doubled one twice), not character by character: the decoder's hot path.
    """
    q = config.quote
    pos, n, line = 0, len(text), 1
    while pos < n:
        start, start_line, inside = pos, line, False
        while True:
            j = text.find("\n", pos)
            end = n if j < 0 else j
            if q and text.count(q, pos, end) % 2:
                inside = not inside
            if j < 0:
                pos = n
                break
            if not inside:
                pos = j
                break
            line += 1
            pos = j + 1
        if inside:
            raise DecodeError("a quoted field is not closed before the end of the file", where=f"line {start_line}")
        record = text[start:pos]
        if record.endswith("\r"):
            record = record[:-1]
        pos += 1
        line += 1
        if record:
            yield start_line, record


def split_fields(record: str, config: CsvConfig) -> list[Field]:
    """The fields of one record (quotes removed, doubled quotes undone): split at every delimiter,
    then a quoted field's pieces joined again until its quotes pair up."""
    q, d = config.quote, config.delimiter
    pieces = record.split(d)
    if not q or q not in record:
        return [Field(p, False) for p in pieces]
    out: list[Field] = []
    qq = q + q
    i, n = 0, len(pieces)
    while i < n:
        piece = pieces[i]
        i += 1
        if not piece.startswith(q):
            out.append(Field(piece, False))
            continue
        while piece.count(q) % 2:
            if i == n:
                raise DecodeError("a quoted field is not closed")
            piece = piece + d + pieces[i]
            i += 1
        if len(piece) < 2 or not piece.endswith(q):
            closing = _closing(piece, q)
            raise DecodeError(f"characters after a closing quote: {piece[closing:closing + 20]!r}")
        out.append(Field(piece[1:-1].replace(qq, q), True))
    return out


def _closing(piece: str, q: str) -> int:
    """Where a quoted piece's closing quote ends (for the error message)."""
    i = 1
    while True:
        j = piece.find(q, i)
        if j < 0:
            return len(piece)
        if piece.startswith(q, j + 1):
            i = j + 2
            continue
        return j + 1


def split_texts(record: str, config: CsvConfig) -> tuple[list[str], list[bool] | None]:
    """The fields' texts and which were quoted; None in place of the flags when the record holds
    no null text at all (the flags only tell `\\N` from the quoted string "\\N"). Such a record with
    one-character delimiter and quote is split by the standard library's C `csv` reader (strict:
    anything `split_fields` refuses it refuses too, and the slow path then says why)."""
    d, q = config.delimiter, config.quote
    if record and len(d) == 1 and len(q) == 1 and config.null not in record:
        try:
            return next(csv.reader((record,), delimiter=d, quotechar=q, doublequote=True, strict=True)), None
        except (csv.Error, StopIteration):
            pass
    fields = split_fields(record, config)
    return [f.text for f in fields], [f.quoted for f in fields]
