"""CSV encoder: row changes -> TiCDC CSV records (the simulator writes storage-sink files with it).

The inverse of `decoder`: NULL as the bare null text, strings, decimals and temporal values
quoted (a quote inside doubled), integers and floats bare, binary values base64 or hex.
With `output_old_value` an UPDATE becomes a `D` record of its old values and an `I` record of its
new ones, both marked is-update; without it a `U` record of the new values.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal

from replicator.codec import values
from replicator.codec.csv.common import CsvConfig
from replicator.codec.open_protocol.golang import go_float_text
from replicator.events import Column, Flag, Op, RowChange, TypeCode

__all__ = ["encode_row"]

_BYTES_CODES = frozenset(int(c) for c in (TypeCode.VARCHAR, TypeCode.VAR_STRING, TypeCode.STRING, TypeCode.TINY_BLOB,
                                           TypeCode.MEDIUM_BLOB, TypeCode.LONG_BLOB, TypeCode.BLOB))
Labels = Mapping[str, tuple[str, ...]]


def _quoted(text: str, config: CsvConfig) -> str:
    q = config.quote
    return q + text.replace(q, q + q) + q if q else text


def _labels(v: int, labels: tuple[str, ...], is_set: bool) -> str:
    if is_set:
        return ",".join(lbl for i, lbl in enumerate(labels) if v >> i & 1)
    return "" if v == 0 else labels[v - 1]


def value_text(col: Column, config: CsvConfig, tz: dt.tzinfo = dt.UTC, labels: Labels | None = None) -> str:
    """One column value as its CSV field."""
    v, t = col.value, col.type_code
    if v is None:
        return config.null
    if isinstance(v, bool):
        raise TypeError(f"column {col.name!r}: bool {v!r} is no column value")
    if t in (TypeCode.ENUM, TypeCode.SET):
        if isinstance(v, int):
            names = (labels or {}).get(col.name)
            if names is None:
                raise TypeError(f"column {col.name!r}: ENUM/SET index {v} without its labels")
            v = _labels(v, names, t == TypeCode.SET)
        return _quoted(str(v), config)
    if isinstance(v, int) and t not in (TypeCode.DECIMAL, TypeCode.NEWDECIMAL):
        return str(v)
    if isinstance(v, float):
        return go_float_text(v, 32 if t == TypeCode.FLOAT else 64)
    if isinstance(v, bytes | bytearray) or (col.flags & Flag.BINARY and t in _BYTES_CODES):
        raw = v if isinstance(v, bytes | bytearray) else str(v).encode("utf-8", "surrogateescape")
        text = bytes(raw).hex() if config.binary_encoding == "hex" else base64.b64encode(bytes(raw)).decode()
        return _quoted(text, config)
    if isinstance(v, Decimal):
        return _quoted(values.format_decimal(v), config)
    if isinstance(v, dt.datetime):
        return _quoted(values.format_datetime(v, tz if t == TypeCode.TIMESTAMP else None), config)
    if isinstance(v, dt.date):
        return _quoted(values.format_date(v), config)
    return _quoted(str(v), config)


def _record(op: str, row: RowChange, image: Sequence[Column], config: CsvConfig, is_update: bool | None,
            tz: dt.tzinfo, labels: Labels | None) -> str:
    head = [op, _quoted(row.table, config), _quoted(row.schema, config)]
    if config.include_commit_ts:
        head.append(str(row.commit_ts))
    if config.output_old_value:
        head.append("true" if is_update else "false")
    head[0] = _quoted(op, config)
    return config.delimiter.join([*head, *(value_text(c, config, tz, labels) for c in image)])


def encode_row(row: RowChange, config: CsvConfig, *, tz: dt.tzinfo = dt.UTC, labels: Labels | None = None) -> list[str]:
    """A row change -> its records (without terminators); the image's columns in schema-file order."""
    if row.op is Op.INSERT:
        return [_record("I", row, row.columns, config, False, tz, labels)]
    if row.op is Op.DELETE:
        return [_record("D", row, row.old_columns, config, False, tz, labels)]
    if config.output_old_value and row.old_columns:
        return [_record("D", row, row.old_columns, config, True, tz, labels),
                _record("I", row, row.columns, config, True, tz, labels)]
    return [_record("U", row, row.columns, config, None, tz, labels)]
