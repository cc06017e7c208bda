"""Craft decoder: one Kafka message value -> its events, hardened against hostile input.

Every count, length, term id and size is checked against the bytes that remain before it is
used, so malformed input raises only `DecodeError` (with a byte offset), allocation stays
proportional to the message size and every loop consumes at least one byte per step. All reads
are offsets into one `bytes`; nothing re-slices the tail.

Non-binary text (CHAR/VARCHAR/TEXT without the binary flag) whose bytes are not UTF-8 decodes
with U+FFFD as `values.decode_text` does, exactly as Open Protocol delivers it; such values are
reported to `options.invalid_text` once the whole message has decoded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from itertools import accumulate
from typing import Any, Protocol

from replicator.codec import values as _values
from replicator.codec.craft.common import (
    _BINARY,
    _DDL,
    _F64,
    _GROUP_NEW,
    _GROUP_OLD,
    _KIND,
    _RESOLVED,
    _ROW,
    _U64,
    _UNSIGNED,
    VERSION,
    _wrap_i64,
)
from replicator.codec.craft.wire import (
    MARKS,
    _nullable_term,
    _uvarints_to,
    decode_size_tables,
    decode_terms,
    delta_zigzag,
    reversed_uvarint,
    uvarint,
    uvarints,
)
from replicator.codec.fastbuild import COLUMN_CLS, ROW_CLS, ColumnTwin, RowTwin, new_object
from replicator.errors import DecodeError
from replicator.events import Column, DdlEvent, Event, Op, Position, Resolved, RowChange

__all__ = ["CraftOptions", "date", "decode", "decode_group", "naive_datetime"]


class CraftOptions(Protocol):
    """What the decoder reads from its options: `values.DecodeOptions` satisfies it."""

    @property
    def timezone(self) -> dt.tzinfo: ...

    @property
    def zero_dates(self) -> _values.ZeroDates: ...

    @property
    def invalid_text(self) -> _values.InvalidText | None: ...

    @property
    def skip_row(self) -> Callable[[str, str, int, Position | None], bool] | None: ...


_unpack_f64 = _F64.unpack_from

# --------------------------------------------------------------------------------------------
# Fast text parsers. They defer to `values` for anything but the canonical TiDB shape, so the
# result is always exactly what `values.parse_*` returns (same value or same DecodeError).

_date_fromiso = dt.date.fromisoformat
_datetime_fromiso = dt.datetime.fromisoformat


def _relaxed_to_iso(text: str) -> str:
    """MySQL's relaxed 'YYYY/MM/DD...' or 'YYYY.MM.DD...' (the reference's own case-0 data writes
    them) as 'YYYY-MM-DD...', so that it takes the fast path too; anything else unchanged."""
    if len(text) >= 10 and text[4] == text[7] and text[4] in "/.":
        return f"{text[:4]}-{text[5:7]}-{text[8:]}"
    return text


def date(text: str, zero_dates: _values.ZeroDates) -> dt.date | None:
    """A DATE value's text ('YYYY-MM-DD', or MySQL's relaxed separators) as `values.parse_date` reads it."""
    iso = text if text[4:5] == "-" else _relaxed_to_iso(text)
    if len(iso) == 10 and iso[4] == "-" and iso[7] == "-" and iso.isascii():
        try:
            return _date_fromiso(iso)
        except ValueError:
            pass
    return _values.parse_date(text, zero_dates)


def naive_datetime(text: str, zero_dates: _values.ZeroDates) -> dt.datetime | None:
    """A DATETIME/TIMESTAMP value's wall-clock text as `values.parse_datetime` reads it (naive)."""
    iso = text if text[4:5] == "-" else _relaxed_to_iso(text)
    n = len(iso)
    if (
        (n == 19 or (21 <= n <= 26 and iso[19] == "." and iso[20:].isdigit()))
        and iso[4] == "-"
        and iso[7] == "-"
        and (iso[10] == " " or iso[10] == "T")
        and iso[13] == ":"
        and iso[16] == ":"
        and iso.isascii()
    ):
        try:
            value = _datetime_fromiso(iso)
        except ValueError:
            pass
        else:
            if value.tzinfo is None:
                return value
    return _values.parse_datetime(text, zero_dates)


# --------------------------------------------------------------------------------------------
# Decoder


def _make_row(
    commit_ts: int,
    schema: str,
    table: str,
    op: Op,
    columns: tuple[Column, ...],
    old_columns: tuple[Column, ...],
    partition_id: int | None,
    position: Position | None,
) -> RowChange:
    if ROW_CLS is not RowChange:
        return RowChange(commit_ts, schema, table, op, columns, old_columns, partition_id, position=position)
    row: Any = new_object(RowTwin)
    row.commit_ts = commit_ts
    row.schema = schema
    row.table = table
    row.op = op
    row.columns = columns
    row.old_columns = old_columns
    row.partition_id = partition_id
    row.row_id = None
    row.only_handle_key = False
    row.claim_check = None
    row.position = position
    row.__class__ = RowChange
    return row  # type: ignore[no-any-return]


_combine = dt.datetime.combine
_parse_time = _values.parse_time
_parse_decimal = _values.parse_sql_decimal


def decode_group(
    buf: bytes,
    marks: bytes,
    p: int,
    end: int,
    terms: list[str],
    tz: dt.tzinfo,
    zero: _values.ZeroDates,
    replaced: list[str],
) -> tuple[int, tuple[Column, ...]]:
    """One column group in [p, end): type byte, count c, then 4c uvarints (name ids as a delta
    varint chunk, types, flags, zigzag value lengths), then the non-null values back to back.

    The name of each non-binary text column whose bytes were not UTF-8 is appended to `replaced`."""
    gtype = buf[p]  # p < end: callers pass non-empty groups only
    b = buf[p + 1] if p + 1 < end else 0x80
    if b < 0x80:
        c = b
        p += 2
    else:
        c, p = uvarint(buf, p + 1, end, "column count")
    if c == 0:
        raise DecodeError("column group without columns", offset=p)
    meta_at = p
    meta, p = uvarints(buf, marks, p, end, 4 * c, "column group")
    c2 = c + c
    c3 = c2 + c
    nterms = len(terms)
    first = meta[0] >> 1
    if not meta[0] & 1 and first + c <= nterms and meta[1:c].count(2) == c - 1:
        names = terms[first : first + c]  # ids first, first+1, ...: columns in table order
    else:
        # Name ids: a delta varint chunk summed in int64 (Go wraps), each checked against the
        # dictionary.
        ids = list(accumulate([(u >> 1) ^ -(u & 1) for u in meta[:c]]))
        if min(ids) < 0 or max(ids) >= nterms:
            ids = [_wrap_i64(x) for x in ids]
            if min(ids) < 0 or max(ids) >= nterms:
                raise DecodeError(f"column name id outside the dictionary of {nterms} terms", offset=meta_at)
        names = [terms[x] for x in ids]
    types = meta[c:c2]
    if max(types) > 0xFF:
        raise DecodeError(f"column type code {max(types)} is not a MySQL type", offset=meta_at)

    # The hot loop: kind numbers are literals (see _K_*), common kinds first.
    kinds = _KIND
    new = new_object
    twin = ColumnTwin
    column_cls = COLUMN_CLS
    cols: list[Any] = []
    append = cols.append
    name = ""
    try:
        for name, t, f, raw in zip(names, types, meta[c2:c3], meta[c3:]):  # noqa: B905 (c each)
            col: Any = new(twin)
            col.name = name
            col.type_code = t
            col.flags = f
            if raw == 1:  # zigzag -1: NULL
                col.value = None
            else:
                q = p + (raw >> 1)
                if raw & 1 or q > end:
                    if raw & 1:
                        raise DecodeError(f"bad value length {(raw >> 1) ^ -1}", offset=p)
                    raise DecodeError(f"value of {raw >> 1} bytes overruns the column group", offset=p)
                kind = kinds[t]
                if kind == 1:  # _K_STR
                    if f & _BINARY:
                        col.value = buf[p:q]
                    else:  # values.decode_text, inlined: this is the hottest branch
                        try:
                            col.value = buf[p:q].decode()
                        except UnicodeDecodeError:
                            col.value = buf[p:q].decode("utf-8", "replace")
                            replaced.append(name)
                elif kind == 2 or kind == 3 or kind == 5:  # _K_INT, _K_YEAR, _K_UVAR
                    if q == p + 1 and buf[p] < 0x80:
                        u = buf[p]
                    elif q == p + 2 and buf[p] >= 0x80 and buf[p + 1] < 0x80:
                        u = (buf[p] & 0x7F) | (buf[p + 1] << 7)
                    else:
                        u, r = uvarint(buf, p, q, "integer value")
                        if r != q:
                            raise DecodeError(f"{q - r} stray bytes after the integer", offset=r)
                    if kind == 5 or (kind == 2 and f & _UNSIGNED):
                        col.value = u
                    else:
                        col.value = (u >> 1) ^ -(u & 1)
                elif kind == 7:  # _K_DATETIME
                    col.value = naive_datetime(buf[p:q].decode(), zero)
                elif kind == 8:  # _K_TIMESTAMP
                    v = naive_datetime(buf[p:q].decode(), zero)
                    col.value = v if v is None else _combine(v, v.time(), tz)
                elif kind == 4:  # _K_FLOAT
                    if q != p + 8:
                        raise DecodeError(f"float value of {q - p} bytes (want 8)", offset=p)
                    col.value = _unpack_f64(buf, p)[0]
                elif kind == 6:  # _K_DATE
                    col.value = date(buf[p:q].decode(), zero)
                elif kind == 10:  # _K_DECIMAL
                    col.value = _parse_decimal(buf[p:q].decode())
                elif kind == 9:  # _K_TIME
                    col.value = _parse_time(buf[p:q].decode())
                elif kind == 11:  # _K_TEXT
                    col.value = buf[p:q].decode()
                else:  # _K_NULL: the reference reads these as nil whatever the bytes
                    col.value = None
                p = q
            col.__class__ = column_cls
            append(col)
    except UnicodeDecodeError:
        raise DecodeError("value is not valid UTF-8", offset=p, where=f"column {name!r}") from None
    except DecodeError as exc:
        if exc.where is not None:
            raise
        offset = p if exc.byte_offset is None else exc.byte_offset
        raise DecodeError(exc.what, offset=offset, where=f"column {name!r}") from None
    if p != end:
        raise DecodeError(f"{end - p} stray bytes after the column group", offset=p)
    if column_cls is not Column:
        return gtype, tuple(Column(c.name, c.type_code, c.flags, c.value) for c in cols)
    return gtype, tuple(cols)


def _decode(buf: bytes, options: CraftOptions | None, position: Position | None) -> list[Event]:
    n = len(buf)
    if n == 0:
        raise DecodeError("empty Craft message", offset=0)
    if buf[0] != VERSION:
        version, _ = uvarint(buf, 0, n, "version")
        raise DecodeError(f"unsupported Craft version {version} (only {VERSION} exists)", offset=0)
    p = 1
    marks = buf.translate(MARKS)

    size_len = buf[-1]
    if size_len < 0x80:
        k = 1
    else:
        size_len, k = reversed_uvarint(buf, p)
    tables_end = n - k
    tables_at = tables_end - size_len
    if tables_at < p:
        raise DecodeError(f"size tables of {size_len} bytes do not fit in the message", offset=tables_end)
    tables = decode_size_tables(buf, tables_at, tables_end)
    if len(tables) < 2:
        raise DecodeError("missing meta or body size table", offset=tables_at)
    meta, bodies = tables[0], tables[1]
    if len(meta) != 2:
        raise DecodeError(f"meta size table has {len(meta)} elements (want 2)", offset=tables_at)
    header_size, dict_size = meta
    if header_size < 0 or dict_size < 0 or min(bodies) < 0:
        raise DecodeError("negative size in the size tables", offset=tables_at)
    bodies_at = p + header_size
    dict_at = bodies_at + sum(bodies)
    if dict_at + dict_size != tables_at:
        raise DecodeError(
            "size tables do not add up to the message length "
            f"(header {header_size} + bodies {dict_at - bodies_at} + dictionary {dict_size}, "
            f"but {tables_at - p} bytes precede the size tables)",
            offset=tables_at,
        )
    terms = decode_terms(buf, marks, dict_at, tables_at) if dict_size else []

    # Headers: five columnar chunks of `count` uvarints each, and nothing else.
    count = len(bodies)
    if 5 * count > header_size:
        raise DecodeError(f"{count} event headers do not fit in {header_size} bytes", offset=p)
    if count == 1 and marks.find(1, bodies_at - 4, bodies_at) < 0:
        # One event whose four small fields are single bytes: only the ts needs a varint read.
        ts, r = uvarint(buf, p, bodies_at, "header commit ts")
        if r != bodies_at - 4:
            raise DecodeError("malformed event header", offset=r)
        tss = [ts]
        kinds = [buf[r]]
        u = buf[r + 1]
        partitions = [(u >> 1) ^ -(u & 1)]
        u = buf[r + 2]
        schemas = [_nullable_term((u >> 1) ^ -(u & 1), terms, p, "header schema")]
        u = buf[r + 3]
        names = [_nullable_term((u >> 1) ^ -(u & 1), terms, p, "header table")]
    else:
        hdr = _uvarints_to(buf, marks, p, bodies_at, "headers")
        if len(hdr) != 5 * count:
            raise DecodeError(f"headers hold {len(hdr)} fields, want 5 x {count} events", offset=p)
        c2, c3, c4 = 2 * count, 3 * count, 4 * count
        tss = [x & _U64 for x in accumulate(hdr[:count])]
        kinds = hdr[count:c2]
        partitions = delta_zigzag(hdr[c2:c3])
        schemas = [_nullable_term(x, terms, p, "header schema") for x in delta_zigzag(hdr[c3:c4])]
        names = [_nullable_term(x, terms, p, "header table") for x in delta_zigzag(hdr[c4:])]

    tz = options.timezone if options is not None else dt.UTC
    zero: _values.ZeroDates = options.zero_dates if options is not None else "error"
    replaced: list[str] = []  # of the row being decoded
    invalid: list[tuple[str, str, str]] = []  # of the message, reported once it has decoded
    events: list[Event] = []
    skip_row = options.skip_row if options is not None else None
    q = bodies_at
    rows = 0
    for i in range(count):
        body_end = q + bodies[i]
        kind = kinds[i]
        if kind == _ROW:
            if 2 + rows >= len(tables):
                raise DecodeError(f"event {i}: row without a column group size table", offset=tables_at)
            group_sizes = tables[2 + rows]
            rows += 1
            row_schema, row_table = schemas[i], names[i]
            if (skip_row is not None and row_schema is not None and row_table is not None
                    and skip_row(row_schema, row_table, tss[i], position)):
                # another shard's table (--shard): its column groups are only measured, never decoded
                if any(size <= 0 for size in group_sizes) or q + sum(group_sizes) != body_end:
                    raise DecodeError(f"event {i}: column groups do not cover the row body", offset=q)
                q = body_end
                continue
            new: tuple[Column, ...] | None = None
            old: tuple[Column, ...] | None = None
            for size in group_sizes:
                group_end = q + size
                if size <= 0 or group_end > body_end:
                    raise DecodeError(f"event {i}: column group of {size} bytes overruns the body", offset=q)
                gtype, cols = decode_group(buf, marks, q, group_end, terms, tz, zero, replaced)
                if gtype == _GROUP_NEW and new is None:
                    new = cols
                elif gtype == _GROUP_OLD and old is None:
                    old = cols
                else:
                    raise DecodeError(f"event {i}: unexpected or repeated column group type {gtype}", offset=q)
                q = group_end
            if q != body_end:
                raise DecodeError(f"event {i}: column groups do not cover the row body", offset=q)
            partition = partitions[i]
            events.append(
                _make_row(
                    tss[i],
                    schemas[i],
                    names[i],
                    Op.INSERT if old is None else Op.DELETE if new is None else Op.UPDATE,
                    new or (),
                    old or (),
                    partition if partition >= 0 else None,
                    position,
                )
            )
            if replaced:
                invalid += [(schemas[i], names[i], column) for column in replaced]
                replaced.clear()
        elif kind == _DDL:
            ddl_type, r = uvarint(buf, q, body_end, "DDL type")
            length, r = uvarint(buf, r, body_end, "DDL query length")
            if r + length != body_end:
                raise DecodeError(f"event {i}: DDL query of {length} bytes does not fill its body", offset=r)
            try:
                query = buf[r:body_end].decode()
            except UnicodeDecodeError:
                raise DecodeError(f"event {i}: DDL query is not valid UTF-8", offset=r) from None
            events.append(DdlEvent(tss[i], schemas[i], names[i], ddl_type, query, position=position))
        elif kind == _RESOLVED:
            if body_end != q:
                raise DecodeError(f"event {i}: resolved event with a {body_end - q}-byte body", offset=q)
            events.append(Resolved(tss[i], position=position))
        else:
            raise DecodeError(f"event {i}: unknown event type {kind}", offset=p)
        q = body_end
    if len(tables) != 2 + rows:
        raise DecodeError(f"{len(tables) - 2 - rows} size tables belong to no row event", offset=tables_at)
    if invalid and options is not None and options.invalid_text is not None:
        for schema, table, column in invalid:
            options.invalid_text.add(schema, table, column, position)
    return events


def decode(
    value: bytes | bytearray | memoryview,
    *,
    options: CraftOptions | None = None,
    position: Position | None = None,
) -> list[Event]:
    """Events of one Craft Kafka message value (the key is empty for Craft and not needed).

    `options` (a `values.DecodeOptions`) sets the upstream time zone for TIMESTAMP and the
    zero-date policy. `position` is stamped on every event and on any DecodeError raised.
    """
    buf = value if type(value) is bytes else bytes(value)
    try:
        return _decode(buf, options, position)
    except DecodeError as exc:
        if position is not None:
            exc.at(str(position))
        raise
