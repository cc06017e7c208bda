"""CSV decoder: one TiCDC CSV record -> its row change, typed by the table version's schema file.

Every malformed record raises `DecodeError` naming the field and column; the caller adds the
file and line. A record without a commit-ts column (`include-commit-ts = false`) raises
`MissingCommitTs` (a `ConfigError`): such a changefeed cannot be windowed, and the run is refused.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from replicator.codec.canal_json.decoder import converter
from replicator.codec.csv.common import HEADER_PREFIX, CsvConfig, split_texts
from replicator.codec.storage_sink.schema import TableColumn
from replicator.codec.values import DEFAULT_DECODE_OPTIONS, DecodeOptions
from replicator.errors import ConfigError, DecodeError
from replicator.events import Column, Flag, Op, Position, RowChange, TypeCode, Value

__all__ = ["MissingCommitTs", "TableShape", "decode_record", "is_header"]

_OPS: Final = {"I": Op.INSERT, "U": Op.UPDATE, "D": Op.DELETE}
_TEXT_KINDS: Final = frozenset(int(c) for c in (TypeCode.ENUM, TypeCode.SET, TypeCode.JSON, TypeCode.VECTOR))
MISSING_COMMIT_TS: Final = (
    "the CSV files carry no commit-ts column: the changefeed was created without include-commit-ts, and "
    "without commit timestamps its rows cannot be ordered or windowed exactly once; recreate the changefeed "
    "with [sink.csv] include-commit-ts = true and replicate its new files"
)


class MissingCommitTs(ConfigError):
    """The changefeed writes no commit ts: refused at start, never dead-lettered."""


_BINARY_TEXT: Final = frozenset(int(c) for c in (TypeCode.VARCHAR, TypeCode.VAR_STRING, TypeCode.STRING,
                                                  TypeCode.TINY_BLOB, TypeCode.MEDIUM_BLOB, TypeCode.LONG_BLOB,
                                                  TypeCode.BLOB))
_AS_BINARY: Final = "binary"  # a plan entry's reader: base64 / hex per the changefeed's setting


@dataclass(frozen=True)
class TableShape:
    """A table version's columns, typed once: (name, type code, flags) in schema-file order, and
    how each column's text is read (`plan`), worked out once per table version, not per value."""

    schema: str
    table: str
    columns: tuple[tuple[str, int, int], ...]

    @classmethod
    def of(cls, schema: str, table: str, columns: Sequence[TableColumn]) -> TableShape:
        return cls(schema, table, tuple((c.name, *c.shape()) for c in columns))

    @functools.cached_property
    def plan(self) -> tuple[tuple[str, int, int, object], ...]:
        """(name, code, flags, reader): None (the text is the value), `_AS_BINARY`, or a converter."""
        out = []
        for name, code, flags in self.columns:
            reader: object
            if flags & Flag.BINARY and code in _BINARY_TEXT:
                reader = _AS_BINARY
            elif code in _TEXT_KINDS:
                reader = None  # ENUM and SET as their labels, JSON as text
            else:
                reader = converter(code, flags)
            out.append((name, code, flags, reader))
        return tuple(out)


def is_header(record: str, config: CsvConfig) -> bool:
    """The new architecture's optional header record (`output-field-header`)."""
    first = record[1:] if config.quote and record.startswith(config.quote) else record
    return first.startswith(HEADER_PREFIX)


def _binary(text: str, config: CsvConfig) -> bytes:
    try:
        if config.binary_encoding == "hex":
            return bytes.fromhex(text)
        return base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error):
        raise DecodeError(f"binary value {text[:40]!r} is not {config.binary_encoding}") from None


def decode_record(record: str, shape: TableShape, config: CsvConfig, *, options: DecodeOptions | None = None,
                  position: Position | None = None) -> RowChange:
    """One record of a table version's data file -> its row change (an `I`/`U` record's values are
    the new image, a `D` record's the old one)."""
    opts = options or DEFAULT_DECODE_OPTIONS
    texts, quoted = split_texts(record, config)
    ncols = len(shape.columns)
    meta = len(texts) - ncols
    if meta not in (3, 4, 5):
        raise DecodeError(f"record has {len(texts)} fields; table {shape.schema}.{shape.table} has {ncols} "
                          "columns after 3 to 5 leading fields (operation, table, schema, commit ts, is-update)")
    op = _OPS.get(texts[0])
    if op is None:
        raise DecodeError(f"operation {texts[0][:20]!r} is not I, U or D", where="field 1")
    if meta == 3 or not (texts[3].isdigit() and texts[3].isascii()):
        raise MissingCommitTs(MISSING_COMMIT_TS)
    commit_ts = int(texts[3])
    if meta == 5 and texts[4] not in ("true", "false"):
        raise DecodeError(f"is-update field is {texts[4][:20]!r}, not true or false", where="field 5")
    table, schema = texts[1], texts[2]
    if (schema, table) != (shape.schema, shape.table):
        raise DecodeError(f"record names table {schema}.{table}, but its file is under {shape.schema}.{shape.table}",
                          where="fields 2-3")
    cols: list[Column] = []
    null = config.null
    for i, (name, code, flags, reader) in enumerate(shape.plan, meta):
        text = texts[i]
        try:
            if quoted is not None and not quoted[i] and text == null:
                value: Value = None
            elif reader is None:
                value = text
            elif reader is _AS_BINARY:
                value = _binary(text, config)
            else:
                value = reader(text, opts)  # type: ignore[operator]
        except DecodeError as exc:
            raise DecodeError(exc.what, where=f"column {name!r}") from None
        cols.append(Column(name, code, flags, value))
    image = tuple(cols)
    if op is Op.DELETE:
        return RowChange(commit_ts, schema, table, op, old_columns=image, position=position)
    return RowChange(commit_ts, schema, table, op, columns=image, position=position)
