"""Events -> the JSON-lines shape of `replicator decode` (a CLI contract: the shape must not change).

One object per event: {"kind", "commit_ts", "schema", "table", "op", "columns", "old_columns",
"ddl_type", "query"}, fields that do not apply omitted (resolved: kind + commit_ts = the resolved
ts; DDL: no op/columns; insert: no old_columns; delete: no columns). Values: null, JSON numbers for
ints and floats, strings for decimals (plain notation), dates ('YYYY-MM-DD'), datetimes (TiDB text
'YYYY-MM-DD HH:MM:SS[.ffffff]'; a TIMESTAMP, being zone-aware, gets its offset appended, e.g.
'+00:00', so the reader sees which upstream zone the decoder applied), TIME and text; bytes as
{"base64": "..."}. Columns keep the message's order.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from replicator.codec import values
from replicator.events import Column, DdlEvent, Event, Op, Resolved, RowChange, Value

__all__ = ["event_to_json", "render_lines", "value_to_json"]

_PLAIN_DECIMAL_LIMIT = 100  # beyond this exponent plain notation would be absurdly long


def _decimal_text(value: Decimal) -> str:
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= -_PLAIN_DECIMAL_LIMIT and value.adjusted() <= _PLAIN_DECIMAL_LIMIT:
        return values.format_decimal(value)
    return str(value)


def _offset_text(value: dt.datetime) -> str:
    offset = value.utcoffset()
    if offset is None:
        return ""
    sign = "-" if offset < dt.timedelta(0) else "+"
    seconds = int(abs(offset).total_seconds())
    text = f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"
    return text + (f":{seconds % 60:02d}" if seconds % 60 else "")


def value_to_json(value: Value) -> Any:
    """One column value -> its JSON-ready form (see module docstring)."""
    if value is None or isinstance(value, str | int | float):
        return value  # bool is not a column value; ints and floats stay JSON numbers
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Decimal):
        return _decimal_text(value)
    if isinstance(value, dt.datetime):
        return values.format_datetime(value) + _offset_text(value)
    if isinstance(value, dt.date):
        return values.format_date(value)
    raise TypeError(f"not a column value: {type(value).__name__}")


def _columns(columns: tuple[Column, ...]) -> dict[str, Any]:
    return {col.name: value_to_json(col.value) for col in columns}


def event_to_json(event: Event) -> dict[str, Any]:
    """One event -> the CLI's JSON object (a dict ready for `json.dumps`)."""
    if isinstance(event, RowChange):
        out: dict[str, Any] = {
            "kind": "row",
            "commit_ts": event.commit_ts,
            "schema": event.schema,
            "table": event.table,
            "op": event.op.value,
        }
        if event.op is not Op.DELETE:
            out["columns"] = _columns(event.columns)
        if event.op is not Op.INSERT:
            out["old_columns"] = _columns(event.old_columns)
        return out
    if isinstance(event, DdlEvent):
        return {
            "kind": "ddl",
            "commit_ts": event.commit_ts,
            "schema": event.schema,
            "table": event.table,
            "ddl_type": event.ddl_type,
            "query": event.query,
        }
    if isinstance(event, Resolved):
        return {"kind": "resolved", "commit_ts": event.ts}
    raise TypeError(f"not an event: {type(event).__name__}")


def render_lines(events: Iterable[Event]) -> Iterator[str]:
    """One JSON text per event, without a trailing newline (print each one).

    Non-ASCII text is written as is (UTF-8 output); NaN/Infinity cannot occur in decoded events
    and are refused rather than written as invalid JSON.
    """
    for event in events:
        yield json.dumps(event_to_json(event), ensure_ascii=False, allow_nan=False)
