"""TiCDC Craft binary codec: decoder and byte-exact encoder.

The layout is the one the reference Go code writes (notes `ticdc-codec.md` §1), not the seed's
draft: version uvarint, columnar headers, bodies, a term dictionary for schema/table/column
names, delta-zigzag size tables and a trailing reversed uvarint giving the size-tables length.
The Kafka key of a Craft message is empty; only the value is decoded.

Decoding is hardened against hostile input: every count, length, term id and size is checked
against the bytes that remain before it is used, so malformed input raises only `DecodeError`
(with a byte offset), allocation stays proportional to the message size and every loop consumes
at least one byte per step. All reads are offsets into one `bytes`; nothing re-slices the tail.

Value typing is the one shared with the Open Protocol codec (via `values`): the same upstream
value decodes to the same Python value whichever protocol carried it.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable, Sequence
from decimal import Decimal
from itertools import accumulate
from typing import Any, Final, Protocol

from replicator.codec import values as _values
from replicator.errors import ConfigError, DecodeError
from replicator.events import Column, DdlEvent, Event, Op, Position, Resolved, RowChange, Value

__all__ = [
    "DEFAULT_MAX_BATCH_SIZE",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "VERSION",
    "CraftOptions",
    "decode",
    "encode",
    "encode_ddl",
    "encode_resolved",
    "encode_rows",
]

VERSION: Final = 1
DEFAULT_MAX_BATCH_SIZE: Final = 16
DEFAULT_MAX_MESSAGE_BYTES: Final = 10 * 1024 * 1024  # TiCDC >= v6 default (pkg/config/sink.go)

# Header event types (model.MqMessageType) and column group types.
_ROW: Final = 1
_DDL: Final = 2
_RESOLVED: Final = 3
_GROUP_NEW: Final = 1
_GROUP_OLD: Final = 2

_U64: Final = (1 << 64) - 1
_I64_MIN: Final = -(1 << 63)
_I64_MAX: Final = (1 << 63) - 1
_BINARY: Final = 0x01
_UNSIGNED: Final = 0x80


class CraftOptions(Protocol):
    """What the decoder reads from its options: `values.DecodeOptions` satisfies it."""

    @property
    def timezone(self) -> dt.tzinfo: ...

    @property
    def zero_dates(self) -> _values.ZeroDates: ...


# --------------------------------------------------------------------------------------------
# Value kinds: one small int per MySQL type code, so the hot loop branches on a list lookup.

_K_NULL: Final = 0  # NULL, GEOMETRY, unspecified and unknown codes: always None
_K_STR: Final = 1  # CHAR/VARCHAR/BINARY/VARBINARY and the BLOB/TEXT family: bytes if BINARY flag else str
_K_INT: Final = 2  # TINY/SHORT/LONG/LONGLONG/INT24: uvarint if UNSIGNED flag else zigzag varint
_K_YEAR: Final = 3  # always zigzag varint (reference ignores UNSIGNED for YEAR)
_K_FLOAT: Final = 4  # 8-byte little-endian float64
_K_UVAR: Final = 5  # BIT/ENUM/SET: uvarint
_K_DATE: Final = 6
_K_DATETIME: Final = 7
_K_TIMESTAMP: Final = 8
_K_TIME: Final = 9
_K_DECIMAL: Final = 10
_K_TEXT: Final = 11  # JSON, VECTOR: their text as str

_KIND: Final[list[int]] = [_K_NULL] * 256
for _codes, _kind in (
    ((15, 253, 254, 249, 250, 251, 252), _K_STR),
    ((1, 2, 3, 8, 9), _K_INT),
    ((13,), _K_YEAR),
    ((4, 5), _K_FLOAT),
    ((16, 247, 248), _K_UVAR),
    ((10, 14), _K_DATE),
    ((12,), _K_DATETIME),
    ((7,), _K_TIMESTAMP),
    ((11,), _K_TIME),
    # 0 is both MySQL DECIMAL and "unspecified"; TiDB sends NEWDECIMAL (246). A value under 0 is
    # read (and written) as decimal text so it is never lost.
    ((0, 246), _K_DECIMAL),
    ((245, 0xE1), _K_TEXT),
):
    for _code in _codes:
        _KIND[_code] = _kind
del _codes, _kind, _code

_F64: Final = struct.Struct("<d")
_unpack_f64 = _F64.unpack_from
_pack_f64 = _F64.pack

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


def _date(text: str, zero_dates: _values.ZeroDates) -> dt.date | None:
    iso = text if text[4:5] == "-" else _relaxed_to_iso(text)
    if len(iso) == 10 and iso[4] == "-" and iso[7] == "-" and iso.isascii():
        try:
            return _date_fromiso(iso)
        except ValueError:
            pass
    return _values.parse_date(text, zero_dates)


def _naive_datetime(text: str, zero_dates: _values.ZeroDates) -> dt.datetime | None:
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
# Primitive readers. Each takes (buf, pos, end) and returns (value(s), new pos); `end` bounds
# the region being parsed, never the whole buffer, so a field cannot read into its neighbour.
# Everything Craft stores outside values is a run of uvarints. Most are one byte, so runs are
# read by locating multi-byte varints in `marks` (buf translated to 1 = continuation byte, else 0)
# with C-level `find` and copying the single-byte stretches between them wholesale.

_MARKS: Final = bytes(0 if i < 0x80 else 1 for i in range(256))


def _uvarint(buf: bytes, p: int, end: int, what: str) -> tuple[int, int]:
    """LEB128 uvarint as Go's binary.Uvarint: at most 10 bytes, the 10th at most 1."""
    x = 0
    shift = 0
    for b in buf[p : end if end - p < 10 else p + 10]:
        if b < 0x80:
            if shift == 63 and b > 1:
                raise DecodeError(f"{what}: uvarint overflows 64 bits", offset=p)
            return x | (b << shift), p + 1 + shift // 7
        x |= (b & 0x7F) << shift
        shift += 7
    if shift == 70:
        raise DecodeError(f"{what}: uvarint longer than 10 bytes", offset=p)
    raise DecodeError(f"{what}: truncated uvarint", offset=p)


def _uvarints(buf: bytes, marks: bytes, p: int, end: int, n: int, what: str) -> tuple[list[int], int]:
    """n consecutive uvarints starting at p."""
    out: list[int] = []
    while True:
        q = p + n
        if q > end:  # every element needs at least one byte: a huge count cannot allocate
            raise DecodeError(f"{what}: {n} more elements do not fit in {end - p} bytes", offset=p)
        j = marks.find(1, p, q)
        if j < 0:
            out += buf[p:q]
            return out, q
        if j > p:
            out += buf[p:j]
            n -= j - p
        if j + 1 < end and buf[j + 1] < 0x80:
            out.append((buf[j] & 0x7F) | (buf[j + 1] << 7))
            p = j + 2
        else:
            v, p = _uvarint(buf, j, end, what)
            out.append(v)
        n -= 1
        if n == 0:
            return out, p


def _uvarints_to(buf: bytes, marks: bytes, p: int, end: int, what: str) -> list[int]:
    """All uvarints of the region [p, end), which must end exactly on a varint boundary."""
    out: list[int] = []
    while p < end:
        j = marks.find(1, p, end)
        if j < 0:
            out += buf[p:end]
            break
        out += buf[p:j]
        v, p = _uvarint(buf, j, end, what)
        out.append(v)
    return out


def _wrap_i64(x: int) -> int:
    return ((x - _I64_MIN) & _U64) + _I64_MIN


def _delta_zigzag(raw: list[int]) -> list[int]:
    """Delta varint chunk from its raw uvarints: zigzag, then prefix sums in int64 (Go wraps)."""
    out: list[int] = []
    append = out.append
    acc = 0
    for u in raw:
        acc += (u >> 1) ^ -(u & 1)
        if not _I64_MIN <= acc <= _I64_MAX:
            acc = _wrap_i64(acc)
        append(acc)
    return out


def _reversed_uvarint(buf: bytes, floor: int) -> tuple[int, int]:
    """The trailing size-tables length: a uvarint stored back to front; returns (value, bytes)."""
    p = len(buf) - 1
    x = 0
    shift = 0
    i = 0
    while p >= floor:
        b = buf[p]
        if b < 0x80:
            if i == 9 and b > 1:
                raise DecodeError("size-tables length overflows 64 bits", offset=p)
            return x | (b << shift), i + 1
        if i == 9:
            raise DecodeError("size-tables length longer than 10 bytes", offset=p)
        x |= (b & 0x7F) << shift
        shift += 7
        i += 1
        p -= 1
    raise DecodeError("truncated size-tables length at the end of the message", offset=floor)


def _decode_size_tables(buf: bytes, p: int, end: int) -> list[list[int]]:
    """Each table: element count, then a delta varint chunk (the region is all uvarints).

    Sizes are summed without Go's int64 wraparound: a real size never comes near 2**63, and any
    value that is not a plausible size is rejected by the callers' range checks anyway.
    """
    tables: list[list[int]] = []
    while p < end:
        n = buf[p]
        if n < 0x80:
            p += 1
        else:
            n, p = _uvarint(buf, p, end, "size table element count")
        if n == 0 or n > end - p:  # the reference cannot write an empty delta chunk
            raise DecodeError(f"size table {len(tables)}: bad element count {n}", offset=p)
        table: list[int] = []
        append = table.append
        acc = 0
        for _ in range(n):
            b = buf[p] if p < end else 0x80
            if b < 0x80:
                p += 1
            elif p + 1 < end and buf[p + 1] < 0x80:
                b = (b & 0x7F) | (buf[p + 1] << 7)
                p += 2
            else:
                b, p = _uvarint(buf, p, end, "size table element")
            acc += (b >> 1) ^ -(b & 1)
            append(acc)
        tables.append(table)
    return tables


# Consecutive messages of one table carry byte-identical term dictionaries: memoize the decoded
# terms by content (bounded in entry size and count, so it cannot grow with hostile input).
_TERMS_CACHE: dict[bytes, list[str]] = {}
_TERMS_CACHE_ENTRIES: Final = 256
_TERMS_CACHE_MAX_BYTES: Final = 4096


def _decode_terms(buf: bytes, marks: bytes, p: int, end: int) -> list[str]:
    key = buf[p:end]
    terms = _TERMS_CACHE.get(key)
    if terms is not None:
        return terms
    start = p
    n, p = _uvarint(buf, p, end, "term dictionary count")
    lengths, p = _uvarints(buf, marks, p, end, n, "term dictionary lengths") if n else ([], p)
    terms = []
    append = terms.append
    for i, ln in enumerate(lengths):
        q = p + ln
        if q > end:
            raise DecodeError(f"term {i} ({ln} bytes) overruns the term dictionary", offset=p)
        try:
            append(buf[p:q].decode())
        except UnicodeDecodeError:
            raise DecodeError(f"term {i} is not valid UTF-8", offset=p) from None
        p = q
    if p != end:
        raise DecodeError(f"{end - p} stray bytes after the term dictionary", offset=p)
    if end - start <= _TERMS_CACHE_MAX_BYTES:
        if len(_TERMS_CACHE) >= _TERMS_CACHE_ENTRIES:
            _TERMS_CACHE.clear()
        _TERMS_CACHE[key] = terms
    return terms


def _nullable_term(ident: int, terms: list[str], offset: int, what: str) -> str:
    """Header schema/table id: -1 = null (read as ""), otherwise an index into the dictionary."""
    if 0 <= ident < len(terms):
        return terms[ident]
    if ident == -1:
        return ""
    raise DecodeError(f"{what}: term id {ident} outside the dictionary of {len(terms)}", offset=offset)


# --------------------------------------------------------------------------------------------
# Decoder


# Building a frozen dataclass costs one `object.__setattr__` call per field. The decoder instead
# fills a plain slotted twin with the same slot layout (fast attribute stores) and then retypes
# it with `__class__ =`, which CPython permits exactly when the layouts are identical; the
# result is an ordinary Column / RowChange. If the model's layout ever changes, the import-time
# probe below fails and the decoder falls back to the public constructors.
class _ColumnTwin:
    __slots__ = ("flags", "name", "type_code", "value")
    name: str
    type_code: int
    flags: int
    value: Value


class _RowTwin:
    __slots__ = (
        "claim_check",
        "columns",
        "commit_ts",
        "old_columns",
        "only_handle_key",
        "op",
        "partition_id",
        "position",
        "row_id",
        "schema",
        "table",
    )
    commit_ts: int
    schema: str
    table: str
    op: Op
    columns: tuple[Column, ...]
    old_columns: tuple[Column, ...]
    partition_id: int | None
    row_id: int | None
    only_handle_key: bool
    claim_check: str | None
    position: Position | None


_new = object.__new__


def _retype_probe() -> tuple[type[Any], type[Any]]:
    """(class decoded columns get, class decoded rows get): the model's, or the twins if refused."""
    column_cls: type[Any] = Column
    row_cls: type[Any] = RowChange
    col: Any = _new(_ColumnTwin)
    col.name, col.type_code, col.flags, col.value = "c", 1, 0, None
    try:
        col.__class__ = Column
        if col != Column("c", 1, 0, None):
            column_cls = _ColumnTwin
    except TypeError:
        column_cls = _ColumnTwin
    row: Any = _new(_RowTwin)
    row.commit_ts, row.schema, row.table, row.op = 1, "s", "t", Op.INSERT
    row.columns = row.old_columns = ()
    row.partition_id = row.row_id = row.claim_check = row.position = None
    row.only_handle_key = False
    try:
        row.__class__ = RowChange
        if row != RowChange(1, "s", "t", Op.INSERT):
            row_cls = _RowTwin
    except TypeError:
        row_cls = _RowTwin
    return column_cls, row_cls


_COLUMN_CLS, _ROW_CLS = _retype_probe()


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
    if _ROW_CLS is not RowChange:
        return RowChange(commit_ts, schema, table, op, columns, old_columns, partition_id, position=position)
    row: Any = _new(_RowTwin)
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


def _decode_group(
    buf: bytes,
    marks: bytes,
    p: int,
    end: int,
    terms: list[str],
    tz: dt.tzinfo,
    zero: _values.ZeroDates,
) -> tuple[int, tuple[Column, ...]]:
    """One column group in [p, end): type byte, count c, then 4c uvarints (name ids as a delta
    varint chunk, types, flags, zigzag value lengths), then the non-null values back to back."""
    gtype = buf[p]  # p < end: callers pass non-empty groups only
    b = buf[p + 1] if p + 1 < end else 0x80
    if b < 0x80:
        c = b
        p += 2
    else:
        c, p = _uvarint(buf, p + 1, end, "column count")
    if c == 0:
        raise DecodeError("column group without columns", offset=p)
    meta_at = p
    meta, p = _uvarints(buf, marks, p, end, 4 * c, "column group")
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
    new = _new
    twin = _ColumnTwin
    column_cls = _COLUMN_CLS
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
                    col.value = buf[p:q] if f & _BINARY else buf[p:q].decode()
                elif kind == 2 or kind == 3 or kind == 5:  # _K_INT, _K_YEAR, _K_UVAR
                    if q == p + 1 and buf[p] < 0x80:
                        u = buf[p]
                    elif q == p + 2 and buf[p] >= 0x80 and buf[p + 1] < 0x80:
                        u = (buf[p] & 0x7F) | (buf[p + 1] << 7)
                    else:
                        u, r = _uvarint(buf, p, q, "integer value")
                        if r != q:
                            raise DecodeError(f"{q - r} stray bytes after the integer", offset=r)
                    if kind == 5 or (kind == 2 and f & _UNSIGNED):
                        col.value = u
                    else:
                        col.value = (u >> 1) ^ -(u & 1)
                elif kind == 7:  # _K_DATETIME
                    col.value = _naive_datetime(buf[p:q].decode(), zero)
                elif kind == 8:  # _K_TIMESTAMP
                    v = _naive_datetime(buf[p:q].decode(), zero)
                    col.value = v if v is None else _combine(v, v.time(), tz)
                elif kind == 4:  # _K_FLOAT
                    if q != p + 8:
                        raise DecodeError(f"float value of {q - p} bytes (want 8)", offset=p)
                    col.value = _unpack_f64(buf, p)[0]
                elif kind == 6:  # _K_DATE
                    col.value = _date(buf[p:q].decode(), zero)
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
        version, _ = _uvarint(buf, 0, n, "version")
        raise DecodeError(f"unsupported Craft version {version} (only {VERSION} exists)", offset=0)
    p = 1
    marks = buf.translate(_MARKS)

    size_len = buf[-1]
    if size_len < 0x80:
        k = 1
    else:
        size_len, k = _reversed_uvarint(buf, p)
    tables_end = n - k
    tables_at = tables_end - size_len
    if tables_at < p:
        raise DecodeError(f"size tables of {size_len} bytes do not fit in the message", offset=tables_end)
    tables = _decode_size_tables(buf, tables_at, tables_end)
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
    terms = _decode_terms(buf, marks, dict_at, tables_at) if dict_size else []

    # Headers: five columnar chunks of `count` uvarints each, and nothing else.
    count = len(bodies)
    if 5 * count > header_size:
        raise DecodeError(f"{count} event headers do not fit in {header_size} bytes", offset=p)
    if count == 1 and marks.find(1, bodies_at - 4, bodies_at) < 0:
        # One event whose four small fields are single bytes: only the ts needs a varint read.
        ts, r = _uvarint(buf, p, bodies_at, "header commit ts")
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
        partitions = _delta_zigzag(hdr[c2:c3])
        schemas = [_nullable_term(x, terms, p, "header schema") for x in _delta_zigzag(hdr[c3:c4])]
        names = [_nullable_term(x, terms, p, "header table") for x in _delta_zigzag(hdr[c4:])]

    tz = options.timezone if options is not None else dt.UTC
    zero: _values.ZeroDates = options.zero_dates if options is not None else "error"
    events: list[Event] = []
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
            new: tuple[Column, ...] | None = None
            old: tuple[Column, ...] | None = None
            for size in group_sizes:
                group_end = q + size
                if size <= 0 or group_end > body_end:
                    raise DecodeError(f"event {i}: column group of {size} bytes overruns the body", offset=q)
                gtype, cols = _decode_group(buf, marks, q, group_end, terms, tz, zero)
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
        elif kind == _DDL:
            ddl_type, r = _uvarint(buf, q, body_end, "DDL type")
            length, r = _uvarint(buf, r, body_end, "DDL query length")
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


# --------------------------------------------------------------------------------------------
# Encoder


def _put_uvarint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _put_uvarint_list(out: bytearray, values: list[int]) -> None:
    """A uvarint chunk; all-small chunks (the usual case) are copied in one C call."""
    if max(values) < 0x80:
        out += bytes(values)
        return
    for v in values:
        if v < 0x80:
            out.append(v)
        else:
            _put_uvarint(out, v)


def _put_string_chunk(out: bytearray, items: list[bytes]) -> None:
    """All lengths as uvarints, then all payloads."""
    _put_uvarint_list(out, [len(b) for b in items])
    out += b"".join(items)


def _put_nullable_bytes_chunk(out: bytearray, items: list[bytes | None]) -> None:
    """All lengths as zigzag varints (-1 = NULL), then the non-null payloads."""
    _put_uvarint_list(out, [1 if b is None else len(b) << 1 for b in items])
    out += b"".join([b for b in items if b is not None])


_SMALL_UVARINTS: Final = [bytes((i,)) for i in range(0x80)]


def _uvarint_bytes(v: int) -> bytes:
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    _put_uvarint(out, v)
    return bytes(out)


def _zigzag(v: int) -> int:
    """Go's PutVarint mapping: 0, -1, 1, -2, ... -> 0, 1, 2, 3, ..."""
    return v << 1 if v >= 0 else ((-v) << 1) - 1


def _put_delta_varint_chunk(out: bytearray, data: Sequence[int]) -> None:
    """First value, then differences (int64, wrapping like Go), all zigzag varints."""
    zigzags: list[int] = []
    last = 0
    for v in data:
        d = v - last
        if not _I64_MIN <= d <= _I64_MAX:
            d = _wrap_i64(d)
        zigzags.append(d << 1 if d >= 0 else ((-d) << 1) - 1)
        last = v
    if not zigzags:  # the reference indexes data[0]: an empty chunk cannot be written
        raise ValueError("empty delta chunk")
    _put_uvarint_list(out, zigzags)


def _put_delta_uvarint_chunk(out: bytearray, data: Sequence[int]) -> None:
    last = data[0]
    _put_uvarint(out, last)
    for v in data[1:]:
        _put_uvarint(out, (v - last) & _U64)
        last = v


def _put_reversed_uvarint(out: bytearray, v: int) -> None:
    tmp = bytearray()
    _put_uvarint(tmp, v)
    tmp.reverse()
    out += tmp


def _put_size_tables(out: bytearray, tables: Sequence[Sequence[int]]) -> None:
    """Each table as count + delta varint chunk, then the region's length as a reversed uvarint."""
    start = len(out)
    for table in tables:
        _put_uvarint(out, len(table))
        _put_delta_varint_chunk(out, table)
    _put_reversed_uvarint(out, len(out) - start)


def _check_u64(v: object, what: str) -> int:
    if not isinstance(v, int):
        raise TypeError(f"{what} must be an int, not {v!r}")
    if not 0 <= v <= _U64:
        raise ValueError(f"{what} must be in 0..2**64-1, not {v}")
    return v


def _check_i64(v: object, what: str) -> int:
    if not isinstance(v, int):
        raise TypeError(f"{what} must be an int, not {v!r}")
    if not _I64_MIN <= v <= _I64_MAX:
        raise ValueError(f"{what} must be in -2**63..2**63-1, not {v}")
    return v


def _format_datetime(value: dt.datetime, tz: dt.tzinfo | None) -> str:
    """`values.format_datetime` via C-level isoformat (tested equal): naive wall-clock text,
    aware values first converted to `tz`, fraction without trailing zeros."""
    if value.tzinfo is None:
        text = value.isoformat(" ")
    else:
        if tz is not None and value.tzinfo is not tz:
            value = value.astimezone(tz)
        text = value.date().isoformat() + " " + value.time().isoformat()  # time(): no offset
    if value.microsecond:
        return text[:26].rstrip("0")
    return text[:19]


def _encode_value(t: int, flags: int, value: Value, tz: dt.tzinfo) -> bytes | None:
    """The reference's EncodeTiDBType over this project's Python values; None = SQL NULL.

    Accepts the same Python values as the Open Protocol encoder: text types also take their
    TiDB text as a str, binary types bytes or str (surrogateescape), DECIMAL a finite Decimal or int.
    """
    if value is None:
        return None
    kind = _KIND[t]
    if kind == _K_STR:
        if isinstance(value, str):
            return value.encode("utf-8", "surrogateescape")
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
    elif kind == _K_INT:
        if isinstance(value, int):
            if flags & _UNSIGNED:
                if 0 <= value <= _U64:
                    return _SMALL_UVARINTS[value] if value < 0x80 else _uvarint_bytes(value)
            elif _I64_MIN <= value <= _I64_MAX:
                u = value << 1 if value >= 0 else ((-value) << 1) - 1
                return _SMALL_UVARINTS[u] if u < 0x80 else _uvarint_bytes(u)
            raise ValueError(f"integer {value} out of range for column type {t} (flags {flags})")
    elif kind == _K_YEAR:
        return _uvarint_bytes(_zigzag(_check_i64(value, "YEAR")))
    elif kind == _K_UVAR:
        return _uvarint_bytes(_check_u64(value, f"BIT/ENUM/SET (type {t})"))
    elif kind == _K_FLOAT:
        if isinstance(value, float | int) and not isinstance(value, bool):
            return _pack_f64(float(value))
    elif kind == _K_NULL:  # NULL, GEOMETRY, unknown codes: the reference writes NULL whatever the value
        return None
    elif isinstance(value, str):  # dates, times, decimals, JSON, vectors as their text
        return value.encode()
    elif kind in (_K_DATETIME, _K_TIMESTAMP):
        if isinstance(value, dt.datetime):
            return _format_datetime(value, tz if kind == _K_TIMESTAMP else None).encode()
    elif kind == _K_DATE:
        if isinstance(value, dt.date):
            return dt.date.isoformat(value).encode()  # = values.format_date, datetimes too
    elif kind == _K_DECIMAL:
        if isinstance(value, Decimal):
            if not value.is_finite():
                raise ValueError(f"DECIMAL value {value} is not finite")
            return _values.format_decimal(value).encode()
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value).encode()
    raise TypeError(f"value {value!r} of type {type(value).__name__} does not fit column type {t}")


# A row ready to be written: header fields, estimated size, and its column groups
# (group type, names, type codes, flags, encoded values).
_Group = tuple[int, list[str], list[int], list[int], list[bytes | None]]
_Prepared = tuple[int, int, str, str, list[_Group]]


def _prepare_row(row: RowChange, tz: dt.tzinfo) -> tuple[_Prepared, int]:
    """Encode the values of one row and compute the reference's size estimate for it."""
    commit_ts = _check_u64(row.commit_ts, "commit_ts")
    partition = -1 if row.partition_id is None else _check_i64(row.partition_id, "partition_id")
    estimate = 32 + len(row.schema.encode()) + len(row.table.encode())
    groups: list[_Group] = []
    for gtype, columns in ((_GROUP_NEW, row.columns), (_GROUP_OLD, row.old_columns)):
        if not columns:
            continue
        names: list[str] = []
        types: list[int] = []
        flags: list[int] = []
        encoded: list[bytes | None] = []
        for col in columns:
            name, t, f = col.name, col.type_code, col.flags
            if not isinstance(t, int) or not 0 <= t <= 0xFF:
                raise ValueError(f"column {name!r}: type code {t!r} is not a MySQL type")
            if not isinstance(f, int) or not 0 <= f <= _U64:
                raise ValueError(f"column {name!r}: flags {f!r} are not a uint64")
            value = None if col.value is None else _encode_value(t, f, col.value, tz)
            names.append(name)
            types.append(t)
            flags.append(f)
            encoded.append(value)
            estimate += len(name.encode()) + (0 if value is None else len(value)) + 16
        groups.append((gtype, names, types, flags, encoded))
    if not groups:
        # The reference cannot encode a row without columns either (it panics).
        raise ValueError(f"row change on {row.schema}.{row.table} at {row.commit_ts} has no columns")
    return (commit_ts, partition, row.schema, row.table, groups), estimate


def _finish(out: bytearray, terms: dict[str, int], header_size: int, tables: list[list[int]]) -> bytes:
    """Append term dictionary and size tables; `tables` = [body sizes, group sizes...]."""
    dict_at = len(out)
    if terms:
        _put_uvarint(out, len(terms))
        _put_string_chunk(out, [t.encode() for t in terms])
    _put_size_tables(out, [[header_size, len(out) - dict_at], *tables])
    return bytes(out)


def _encode_headers(
    out: bytearray,
    terms: dict[str, int],
    tss: list[int],
    kinds: list[int],
    partitions: list[int],
    schemas: list[str],
    tables: list[str],
) -> int:
    start = len(out)
    # Empty names are written as null (-1); ids are assigned in first-use order.
    add = terms.setdefault  # id = first-use order: len(terms) is evaluated before inserting
    schema_ids = [add(s, len(terms)) if s else -1 for s in schemas]
    table_ids = [add(s, len(terms)) if s else -1 for s in tables]
    if len(tss) == 1:  # single-element delta chunks are just the values
        _put_uvarint(out, tss[0])
        _put_uvarint(out, kinds[0])
        for v in (partitions[0], schema_ids[0], table_ids[0]):
            _put_uvarint(out, v << 1 if v >= 0 else ((-v) << 1) - 1)
    else:
        _put_delta_uvarint_chunk(out, tss)
        _put_uvarint_list(out, kinds)
        _put_delta_varint_chunk(out, partitions)
        _put_delta_varint_chunk(out, schema_ids)
        _put_delta_varint_chunk(out, table_ids)
    return len(out) - start


def _encode_batch(batch: list[_Prepared]) -> bytes:
    out = bytearray((VERSION,))
    terms: dict[str, int] = {}
    header_size = _encode_headers(
        out,
        terms,
        [r[0] for r in batch],
        [_ROW] * len(batch),
        [r[1] for r in batch],
        [r[2] for r in batch],
        [r[3] for r in batch],
    )
    body_sizes: list[int] = []
    group_tables: list[list[int]] = []
    add = terms.setdefault
    for _, _, _, _, groups in batch:
        body_at = len(out)
        sizes: list[int] = []
        for gtype, names, types, flags, encoded in groups:
            group_at = len(out)
            out.append(gtype)
            _put_uvarint(out, len(names))
            _put_delta_varint_chunk(out, [add(name, len(terms)) for name in names])
            _put_uvarint_list(out, types)
            _put_uvarint_list(out, flags)
            _put_nullable_bytes_chunk(out, encoded)
            sizes.append(len(out) - group_at)
        group_tables.append(sizes)
        body_sizes.append(len(out) - body_at)
    return _finish(out, terms, header_size, [body_sizes, *group_tables])


def _check_limits(max_batch_size: int, max_message_bytes: int) -> None:
    if not 1 <= max_batch_size <= 65535:
        raise ConfigError(f"max-batch-size must be in 1..65535, not {max_batch_size}")
    if not 1 <= max_message_bytes <= (1 << 31) - 1:
        raise ConfigError(f"max-message-bytes must be in 1..2147483647, not {max_message_bytes}")


class _RowBatcher:
    """The reference batching: flush after a row when estimate > max bytes or rows >= max rows."""

    def __init__(self, max_batch_size: int, max_message_bytes: int, tz: dt.tzinfo) -> None:
        _check_limits(max_batch_size, max_message_bytes)
        self.max_rows = max_batch_size
        self.max_bytes = max_message_bytes
        self.tz = tz
        self.pending: list[_Prepared] = []
        self.estimate = 0

    def add(self, row: RowChange, out: list[bytes]) -> None:
        prepared, size = _prepare_row(row, self.tz)
        self.pending.append(prepared)
        self.estimate += size
        if self.estimate > self.max_bytes or len(self.pending) >= self.max_rows:
            self.flush(out)

    def flush(self, out: list[bytes]) -> None:
        if self.pending:
            out.append(_encode_batch(self.pending))
            self.pending = []
            self.estimate = 0


def encode_rows(
    rows: Iterable[RowChange],
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    timezone: dt.tzinfo = dt.UTC,
) -> list[bytes]:
    """Craft message values for the rows of ONE Kafka partition, batched as the reference does.

    `timezone` is the upstream zone TIMESTAMP text is written in (aware values are converted).
    The new image goes in group 1, the old image in group 2; an update without an old image is
    indistinguishable from an insert on the wire (as in Open Protocol).
    """
    batcher = _RowBatcher(max_batch_size, max_message_bytes, timezone)
    out: list[bytes] = []
    for row in rows:
        batcher.add(row, out)
    batcher.flush(out)
    return out


def encode_ddl(ddl: DdlEvent) -> bytes:
    """A DDL event is always a message of its own (broadcast to every partition upstream)."""
    out = bytearray((VERSION,))
    terms: dict[str, int] = {}
    header_size = _encode_headers(
        out, terms, [_check_u64(ddl.commit_ts, "commit_ts")], [_DDL], [-1], [ddl.schema], [ddl.table]
    )
    body_at = len(out)
    _put_uvarint(out, _check_u64(ddl.ddl_type, "ddl_type"))
    query = ddl.query.encode()
    _put_uvarint(out, len(query))
    out += query
    return _finish(out, terms, header_size, [[len(out) - body_at]])


def encode_resolved(ts: int | Resolved) -> bytes:
    """A resolved-ts message: one header, an empty body, no term dictionary."""
    resolved_ts = ts.ts if isinstance(ts, Resolved) else ts
    out = bytearray((VERSION,))
    header_size = _encode_headers(out, {}, [_check_u64(resolved_ts, "resolved ts")], [_RESOLVED], [-1], [""], [""])
    return _finish(out, {}, header_size, [[0]])


def encode(
    events: Iterable[Event],
    *,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    timezone: dt.tzinfo = dt.UTC,
) -> list[bytes]:
    """Messages for one partition's event stream: rows batched, DDL and resolved events alone.

    Pending rows are flushed before a DDL or resolved event so message order is event order.
    """
    batcher = _RowBatcher(max_batch_size, max_message_bytes, timezone)
    out: list[bytes] = []
    for event in events:
        if isinstance(event, RowChange):
            batcher.add(event, out)
            continue
        batcher.flush(out)
        if isinstance(event, DdlEvent):
            out.append(encode_ddl(event))
        else:
            out.append(encode_resolved(event))
    batcher.flush(out)
    return out
