"""CSV decoder: one TiCDC CSV record -> its row change, typed by the table version's schema file.

Every malformed record raises `DecodeError` naming the field and column; the caller adds the
file and line. A record without a commit-ts column (`include-commit-ts = false`) raises
`MissingCommitTs` (a `ConfigError`): such a changefeed cannot be windowed, and the run is refused.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from replicator.codec.canal_json.decoder import converter
from replicator.codec.csv.common import HEADER_PREFIX, CsvConfig, Field, split_fields
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


@dataclass(frozen=True)
class TableShape:
    """A table version's columns, typed once: (name, type code, flags) in schema-file order."""

    schema: str
    table: str
    columns: tuple[tuple[str, int, int], ...]

    @classmethod
    def of(cls, schema: str, table: str, columns: Sequence[TableColumn]) -> TableShape:
        return cls(schema, table, tuple((c.name, *c.shape()) for c in columns))


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


def _value(f: Field, code: int, flags: int, config: CsvConfig, opts: DecodeOptions) -> Value:
    if not f.quoted and f.text == config.null:
        return None
    text = f.text
    if flags & Flag.BINARY and code in (TypeCode.VARCHAR, TypeCode.VAR_STRING, TypeCode.STRING,
                                        TypeCode.TINY_BLOB, TypeCode.MEDIUM_BLOB, TypeCode.LONG_BLOB,
                                        TypeCode.BLOB):
        return _binary(text, config)
    if code in _TEXT_KINDS:
        return text  # ENUM and SET as their labels, JSON as text
    conv = converter(code, flags)
    return text if conv is None else conv(text, opts)


def decode_record(record: str, shape: TableShape, config: CsvConfig, *, options: DecodeOptions | None = None,
                  position: Position | None = None) -> RowChange:
    """One record of a table version's data file -> its row change (an `I`/`U` record's values are
    the new image, a `D` record's the old one)."""
    opts = options or DEFAULT_DECODE_OPTIONS
    fields = split_fields(record, config)
    ncols = len(shape.columns)
    meta = len(fields) - ncols
    if meta not in (3, 4, 5):
        raise DecodeError(f"record has {len(fields)} fields; table {shape.schema}.{shape.table} has {ncols} "
                          "columns after 3 to 5 leading fields (operation, table, schema, commit ts, is-update)")
    op = _OPS.get(fields[0].text)
    if op is None:
        raise DecodeError(f"operation {fields[0].text[:20]!r} is not I, U or D", where="field 1")
    if meta == 3 or not (fields[3].text.isdigit() and fields[3].text.isascii()):
        raise MissingCommitTs(MISSING_COMMIT_TS)
    commit_ts = int(fields[3].text)
    if meta == 5 and fields[4].text not in ("true", "false"):
        raise DecodeError(f"is-update field is {fields[4].text[:20]!r}, not true or false", where="field 5")
    table, schema = fields[1].text, fields[2].text
    if (schema, table) != (shape.schema, shape.table):
        raise DecodeError(f"record names table {schema}.{table}, but its file is under {shape.schema}.{shape.table}",
                          where="fields 2-3")
    cols: list[Column] = []
    for (name, code, flags), f in zip(shape.columns, fields[meta:], strict=True):
        try:
            cols.append(Column(name, code, flags, _value(f, code, flags, config, opts)))
        except DecodeError as exc:
            raise DecodeError(exc.what, where=f"column {name!r}") from None
    image = tuple(cols)
    if op is Op.DELETE:
        return RowChange(commit_ts, schema, table, op, old_columns=image, position=position)
    return RowChange(commit_ts, schema, table, op, columns=image, position=position)
