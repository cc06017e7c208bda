"""canal-json decoder: one Kafka message value -> its events, exact to the wire.

See the package docstring for the format. Every malformed input raises `DecodeError` (what, field,
Kafka position), never anything else and never a partial result.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable
from typing import Any, Final

from replicator.codec import values
from replicator.codec.canal_json.common import (
    BINARY_BASE_NAMES,
    BINARY_CHARSET_CODES,
    BLOB_CODES,
    CODES,
    INT64_LIMIT,
    INT64_MIN,
    INT_CODES,
    JAVA_BINARY_TYPES,
    ROW_TYPES,
    STRING_CODES,
    UINT64_LIMIT,
    UINT_CODES,
    WATERMARK_TYPE,
)
from replicator.codec.fastbuild import COLUMN_CLS, ColumnTwin, new_object
from replicator.codec.jsontext import json_kind, load_object, str_field, uint64_field
from replicator.codec.large import decompress_value
from replicator.codec.values import DEFAULT_DECODE_OPTIONS, DecodeOptions
from replicator.errors import DecodeError
from replicator.events import Column, DdlEvent, Event, Flag, Op, Position, Resolved, RowChange, TypeCode, Value
from replicator.mysql.classify import CANAL_EVENT_TYPES, classify_ddl, is_alter_table

__all__ = ["NO_EXTENSION", "decode"]

NO_EXTENSION: Final = (
    "canal-json message has no '_tidb' field: TiCDC writes it only with enable-tidb-extension=true, and "
    "without its commit ts and WATERMARK events exactly-once replication is impossible, so the message is "
    "not applied; create the changefeed with enable-tidb-extension=true in its sink URI"
)
_FLOAT_RE: Final = re.compile(r"-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\Z", re.ASCII)
_HANDLE_PK: Final = int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY)
_INTERNAL_ERRORS: Final = (KeyError, TypeError, ValueError, IndexError, AttributeError, RecursionError,
                           OverflowError, struct.error)


def _short(text: str, limit: int = 60) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit]) + "..."


def decode(
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
    *,
    options: DecodeOptions | None = None,
    position: Position | None = None,
) -> list[Event]:
    """Decode one canal-json message (the key is not used: TiCDC writes none) into its events.

    Raises `DecodeError` (with `position` attached when given) for anything malformed, and for a
    message without the TiDB extension (`NO_EXTENSION`).
    """
    opts = options or DEFAULT_DECODE_OPTIONS
    try:
        data = b"" if value is None else bytes(value)
        if not data:
            raise DecodeError("canal-json message value is empty, not a JSON object", offset=0, where="value")
        if opts.compression != "none":  # TiCDC compresses every value (large-message-handle-compression)
            data = decompress_value(opts.compression, data)
        try:
            return _decode(load_object(data, 0, len(data), "value"), opts, position)
        except _INTERNAL_ERRORS as exc:
            raise DecodeError(f"malformed canal-json message ({type(exc).__name__}: {exc})", where="value") from None
    except DecodeError as exc:
        if position is not None:
            exc.at(str(position))
        raise


def _tso(ext: dict[str, Any], field: str, required: bool) -> int:
    return uint64_field(ext, field, required=required, path=f"_tidb.{field}", what="a uint64 TSO")


def _decode(obj: dict[str, Any], opts: DecodeOptions, position: Position | None) -> list[Event]:
    is_ddl = obj.get("isDdl")
    if is_ddl is None:
        is_ddl = False
    if type(is_ddl) is not bool:
        raise DecodeError(f"'isDdl' is {json_kind(is_ddl)}, not a boolean", where="field 'isDdl'")
    kind = str_field(obj, "type")
    ext = obj.get("_tidb")
    if ext is None:
        raise DecodeError(NO_EXTENSION, where="field '_tidb'")
    if type(ext) is not dict:
        raise DecodeError(f"'_tidb' is {json_kind(ext)}, not an object", where="field '_tidb'")
    if is_ddl:
        return [_ddl(obj, kind, ext, position)]
    if kind == WATERMARK_TYPE:
        return [Resolved(_tso(ext, "watermarkTs", False), position=position)]
    if kind not in ROW_TYPES:
        raise DecodeError(
            f"event type {_short(kind)} is not INSERT, UPDATE, DELETE or {WATERMARK_TYPE} (and 'isDdl' is false)",
            where="field 'type'",
        )
    return _rows(obj, Op(kind.lower()), ext, opts, position)


def _ddl(obj: dict[str, Any], kind: str, ext: dict[str, Any], position: Position | None) -> DdlEvent:
    query = obj.get("sql")
    if type(query) is not str:
        raise DecodeError(f"DDL 'sql' is {json_kind(query)}, not a string", where="field 'sql'")
    try:
        code = classify_ddl(query)
    except DecodeError as exc:
        raise DecodeError(exc.what, where="field 'sql'") from None
    expected = CANAL_EVENT_TYPES[code]
    # TiCDC types a multi-clause ALTER TABLE (TiDB's multi-schema change) ALTER whatever its clauses.
    if kind in CANAL_EVENT_TYPES.values() and kind != expected and not (kind == "ALTER" and is_alter_table(query)):
        raise DecodeError(
            f"DDL statement {_short(query)} reads as TiDB DDL type {code}, which TiCDC sends as canal type "
            f"{expected}, but the message says {kind}: not applied (the statement is not what it seems)",
            where="field 'type'",
        )
    return DdlEvent(
        commit_ts=_tso(ext, "commitTs", True),  # a DDL without one would read as ts 0: already applied
        schema=str_field(obj, "database"),
        table=str_field(obj, "table"),
        ddl_type=code,
        query=query,
        position=position,
    )


def _images(obj: dict[str, Any], field: str, required: bool) -> list[dict[str, Any]] | None:
    images = obj.get(field)
    if images is None and not required:
        return None
    if type(images) is not list or not images:
        raise DecodeError(f"'{field}' is {json_kind(images)}, not a non-empty array of rows", where=f"field '{field}'")
    for i, image in enumerate(images):
        if type(image) is not dict:
            raise DecodeError(f"row {i} is {json_kind(image)}, not an object", where=f"field '{field}'")
    return images


def _rows(
    obj: dict[str, Any], op: Op, ext: dict[str, Any], opts: DecodeOptions, position: Position | None
) -> list[Event]:
    commit_ts = _tso(ext, "commitTs", True)
    only_handle_key = ext.get("onlyHandleKey", False)
    if type(only_handle_key) is not bool:
        raise DecodeError(f"'_tidb.onlyHandleKey' is {json_kind(only_handle_key)}, not a boolean",
                          where="field '_tidb.onlyHandleKey'")
    claim_check = str_field(ext, "claimCheckLocation") or None
    schema, table = str_field(obj, "database"), str_field(obj, "table")
    types = obj.get("mysqlType")
    if type(types) is not dict:
        raise DecodeError(f"'mysqlType' is {json_kind(types)}, not an object", where="field 'mysqlType'")
    java = obj.get("sqlType")
    if java is None:
        java = {}
    if type(java) is not dict:
        raise DecodeError(f"'sqlType' is {json_kind(java)}, not an object", where="field 'sqlType'")
    pk_names = obj.get("pkNames")
    if pk_names is None:
        pk_names = []
    if type(pk_names) is not list or any(type(n) is not str for n in pk_names):
        raise DecodeError(f"'pkNames' is {json_kind(pk_names)}, not an array of names", where="field 'pkNames'")
    shapes = _shapes_for(types, java, pk_names)
    data = _images(obj, "data", True)
    assert data is not None
    old = _images(obj, "old", False) if op is Op.UPDATE else None
    if old is not None and len(old) != len(data):
        raise DecodeError(f"'old' holds {len(old)} rows but 'data' {len(data)}", where="field 'old'")
    events: list[Event] = []
    for i, image in enumerate(data):
        cols = _columns(image, shapes, opts, f"field 'data' row {i}")
        new: tuple[Column, ...] = ()
        before: tuple[Column, ...] = ()
        if op is Op.DELETE:
            before = cols
        else:
            new = cols
        if old is not None:
            old_cols = _columns(old[i], shapes, opts, f"field 'old' row {i}")
            # every column, in the same order (TiCDC's default): the old image as it is
            before = old_cols if list(old[i]) == list(image) else _old_image(cols, old_cols, i)
        events.append(RowChange(commit_ts, schema, table, op, new, before, only_handle_key=only_handle_key,
                                claim_check=claim_check, position=position))
    return events


def _old_image(new: tuple[Column, ...], old: tuple[Column, ...], row: int) -> tuple[Column, ...]:
    """The full old image: `old` holds every column (TiCDC's default) or only the changed ones
    (only-output-updated-columns, content-compatible); an unchanged column's old value is its new one."""
    if len(old) == len(new) and all(a.name == b.name for a, b in zip(old, new, strict=True)):
        return old
    by_name = {c.name: c for c in old}
    names = {c.name for c in new}
    extra = [name for name in by_name if name not in names]
    if extra:
        raise DecodeError(f"'old' names column {_short(extra[0])}, which 'data' does not hold",
                          where=f"field 'old' row {row}")
    return tuple(by_name.get(c.name, c) for c in new)


Converter = Callable[[str, DecodeOptions], Value]
"""A column's string form -> its value (`DecodeError` when malformed)."""
Shape = tuple[int, int, Converter | None]
"""A column's type code, flags and converter (None: the text is the value)."""


class _Shapes:
    """Column name -> (type code, flags, converter), from `mysqlType`, `sqlType` and `pkNames`, worked
    out per column on first use: one object per distinct shape of message (`_shapes_for`)."""

    __slots__ = ("cache", "java", "pk", "plans", "types")

    def __init__(self, types: dict[str, Any], java: dict[str, Any], pk: frozenset[str]) -> None:
        self.types, self.java, self.pk = types, java, pk
        self.cache: dict[str, Shape] = {}
        # a row image's column names in order -> their (name, code, flags, converter)
        self.plans: dict[tuple[str, ...], tuple[tuple[str, int, int, Converter | None], ...]] = {}

    def of(self, name: str) -> Shape:
        shape = self.cache.get(name)
        if shape is None:
            code, flags = self._shape(name)
            shape = self.cache[name] = (code, flags, converter(code, flags))
        return shape

    def _shape(self, name: str) -> tuple[int, int]:
        text = self.types.get(name)
        if type(text) is not str:
            raise DecodeError(f"'mysqlType' has {json_kind(text)} for column {_short(name)}, not its type name",
                              where="field 'mysqlType'")
        base, modifiers = _split_type(text.strip().lower())
        code = CODES.get(base)
        if code is None:
            raise DecodeError(f"unsupported mysqlType {_short(text)} of column {_short(name)}",
                              where="field 'mysqlType'")
        flags = 0
        if name in self.pk:
            flags |= _HANDLE_PK
        if "unsigned" in modifiers or code == TypeCode.YEAR:  # TiDB's YEAR is unsigned; TiCDC omits the word
            flags |= Flag.UNSIGNED
        if code == TypeCode.BIT:
            flags &= ~Flag.UNSIGNED
        java = self.java.get(name)
        if java is not None and (type(java) is not int or not -(1 << 31) <= java < 1 << 31):
            raise DecodeError(f"'sqlType' of column {_short(name)} is {json_kind(java)}, not a Java SQL type",
                              where="field 'sqlType'")
        if code in BINARY_CHARSET_CODES or base in BINARY_BASE_NAMES or (
            java in JAVA_BINARY_TYPES and (code in STRING_CODES or code in BLOB_CODES)
        ):
            flags |= Flag.BINARY
        return code, int(flags)


_SHAPES: Final[dict[tuple[frozenset[tuple[str, Any]], tuple[tuple[str, Any], ...], tuple[str, ...]], _Shapes]] = {}
_SHAPES_LIMIT: Final = 4096
_STR: Final = frozenset((str,))
_STR_OR_NONE: Final = frozenset((str, type(None)))
_INT: Final = frozenset((int,))


def _shapes_for(types: dict[str, Any], java: dict[str, Any], pk_names: list[str]) -> _Shapes:
    """The `_Shapes` of a message's type fields, shared by every message of the same shape: a table's
    rows repeat them, so each column's type is parsed once per table shape, not once per row.
    `mysqlType` is keyed as a set (TiCDC writes it from a Go map, in any order). Only well-typed
    fields are shared (names to strings, to integers): malformed ones (1 == 1.0 == True as keys) are
    worked out for their own message, to report exactly what is wrong with it."""
    if not (_STR.issuperset(map(type, types.values())) and _INT.issuperset(map(type, java.values()))):
        return _Shapes(types, java, frozenset(pk_names))
    key = (frozenset(types.items()), tuple(java.items()), tuple(pk_names))
    shapes = _SHAPES.get(key)
    if shapes is None:
        if len(_SHAPES) >= _SHAPES_LIMIT:
            _SHAPES.clear()
        shapes = _SHAPES[key] = _Shapes(types, java, frozenset(pk_names))
    return shapes


def _split_type(text: str) -> tuple[str, list[str]]:
    """'int unsigned' -> ('int', ['unsigned']); content-compatible 'decimal(10,2) unsigned zerofill'
    and "enum('a b','c')" too (the words after the parameters, never inside them)."""
    cut = len(text)
    for i, ch in enumerate(text):
        if ch in "( ":
            cut = i
            break
    base, rest = text[:cut], text[cut:]
    if rest.startswith("("):
        rest = rest[rest.rfind(")") + 1:]
    return base, rest.split()


def _columns(image: dict[str, Any], shapes: _Shapes, opts: DecodeOptions, where: str) -> tuple[Column, ...]:
    """A row image's columns. The fast path: the image's names were seen before in this shape of
    message and every value is a string or null; anything else (or a value that does not convert)
    takes the column-by-column path, which says which column is wrong."""
    values = image.values()
    plan = shapes.plans.get(tuple(image))
    if plan is not None and _STR_OR_NONE.issuperset(map(type, values)):
        try:
            if COLUMN_CLS is not Column:  # the model's layout changed: its constructor
                return tuple([Column(name, code, flags, raw if raw is None or conv is None else conv(raw, opts))
                              for (name, code, flags, conv), raw in zip(plan, values, strict=True)])
            out: list[Any] = []
            for (name, code, flags, conv), raw in zip(plan, values, strict=True):
                col: Any = new_object(ColumnTwin)  # a frozen dataclass's __init__ costs a setattr call per field
                col.name = name
                col.type_code = code
                col.flags = flags
                col.value = raw if raw is None or conv is None else conv(raw, opts)
                col.__class__ = Column
                out.append(col)
            return tuple(out)
        except DecodeError:
            pass
    columns = _checked_columns(image, shapes, opts, where)
    if len(shapes.plans) < _SHAPES_LIMIT:
        cache = shapes.cache
        shapes.plans[tuple(image)] = tuple((name, *cache[name]) for name in image)
    return columns


def _checked_columns(image: dict[str, Any], shapes: _Shapes, opts: DecodeOptions,
                     where: str) -> tuple[Column, ...]:
    out: list[Column] = []
    for name, raw in image.items():
        try:
            code, flags, conv = shapes.of(name)
            if raw is None:
                out.append(Column(name, code, flags, None))
            elif type(raw) is not str:
                raise DecodeError(f"value is {json_kind(raw)}; canal-json values are strings or null")
            else:
                out.append(Column(name, code, flags, raw if conv is None else conv(raw, opts)))
        except DecodeError as exc:
            if exc.where is not None and exc.where.startswith("field 'mysqlType'"):
                raise
            raise DecodeError(exc.what, where=f"{where} column {_short(name)}") from None
    return tuple(out)


def text_value(text: str, code: int, flags: int, opts: DecodeOptions) -> Value:
    """A column value from the string form canal-json (and Simple, for most types) writes it in."""
    conv = converter(code, flags)
    return text if conv is None else conv(text, opts)


def _is_int(text: str) -> bool:
    """`-?[0-9]+`, without a regex: the per-column hot path."""
    digits = text[1:] if text[:1] == "-" else text
    return digits.isdigit() and digits.isascii()


def _signed(text: str, opts: DecodeOptions) -> Value:
    if not _is_int(text):
        raise DecodeError(f"value {_short(text)} is not an integer")
    number = int(text)
    if not INT64_MIN <= number < INT64_LIMIT:
        raise DecodeError(f"signed integer {_short(text)} is outside the 64-bit range")
    return number


def _unsigned(text: str, opts: DecodeOptions) -> Value:
    if not _is_int(text):
        raise DecodeError(f"value {_short(text)} is not an integer")
    number = int(text)  # "-0" is 0
    if not 0 <= number < UINT64_LIMIT:
        raise DecodeError(f"unsigned integer {_short(text)} is outside the 64-bit range")
    return number


def _uint(text: str, opts: DecodeOptions) -> Value:
    if not (text.isdigit() and text.isascii()) or int(text) >= UINT64_LIMIT:
        raise DecodeError(f"value {_short(text)} is not an unsigned 64-bit integer")
    return int(text)


def _binary(text: str, opts: DecodeOptions) -> Value:
    try:
        return text.encode("latin-1")  # TiCDC writes each byte as the code point U+0000..U+00FF
    except UnicodeEncodeError as exc:
        raise DecodeError(
            f"binary value holds {text[exc.start]!r} (U+{ord(text[exc.start]):04X}); TiCDC writes "
            "binary bytes as ISO-8859-1 characters U+0000..U+00FF"
        ) from None


def _real(text: str, opts: DecodeOptions) -> Value:
    if not _FLOAT_RE.match(text):
        raise DecodeError(f"value {_short(text)} is not a number")
    real = float(text)
    if not math.isfinite(real):
        raise DecodeError(f"number {_short(text)} is outside the float64 range")
    return real


def _decimal(text: str, opts: DecodeOptions) -> Value:
    return values.parse_sql_decimal(text)


def _date(text: str, opts: DecodeOptions) -> Value:
    return values.parse_date(text, opts.zero_dates)


def _datetime(text: str, opts: DecodeOptions) -> Value:
    return values.parse_datetime(text, opts.zero_dates)


def _timestamp(text: str, opts: DecodeOptions) -> Value:
    return values.parse_timestamp(text, opts.timezone, opts.zero_dates)


def _time(text: str, opts: DecodeOptions) -> Value:
    return values.parse_time(text)


def _null(text: str, opts: DecodeOptions) -> Value:
    raise DecodeError(f"value {_short(text)} is not null (column type NULL)")


_BY_CODE: Final[dict[int, Converter]] = {
    int(TypeCode.FLOAT): _real, int(TypeCode.DOUBLE): _real,
    int(TypeCode.NEWDECIMAL): _decimal, int(TypeCode.DECIMAL): _decimal,
    int(TypeCode.DATE): _date, int(TypeCode.NEWDATE): _date,
    int(TypeCode.DATETIME): _datetime, int(TypeCode.TIMESTAMP): _timestamp, int(TypeCode.TIME): _time,
    int(TypeCode.NULL): _null,
}
_CONVERTERS: dict[tuple[int, int], Converter | None] = {}


def converter(code: int, flags: int) -> Converter | None:
    """How a column of this type code and flags reads its string form; None: the string is the value
    (text, JSON, vectors). An unsupported code gives a converter that raises `DecodeError`."""
    key = (code, flags)
    try:
        return _CONVERTERS[key]
    except KeyError:
        pass
    conv: Converter | None
    if code in INT_CODES:
        conv = _unsigned if flags & Flag.UNSIGNED else _signed
    elif code in UINT_CODES:
        conv = _uint
    elif code in STRING_CODES or code in BLOB_CODES:
        conv = _binary if flags & Flag.BINARY else None
    elif code == TypeCode.JSON or code == TypeCode.VECTOR:
        conv = None
    elif code in _BY_CODE:
        conv = _BY_CODE[code]
    else:
        def conv(text: str, opts: DecodeOptions, code: int = code) -> Value:
            raise DecodeError(f"unsupported column type code {code} ({TypeCode(code).name})")
    if len(_CONVERTERS) < 65536:
        _CONVERTERS[key] = conv
    return conv
