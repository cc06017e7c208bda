"""Open Protocol decoder: one Kafka (key, value) message -> its events, exact to the wire.

See the package docstring for the value typing. Every malformed input raises `DecodeError`
(what, entry index, byte offset, field), never anything else and never a partial result.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Callable, Iterable
from typing import Any, Final

from replicator.codec import values
from replicator.codec.jsontext import FloatText, json_kind, load_object, str_field, uint64_field
from replicator.codec.large import decompress
from replicator.codec.open_protocol.common import (
    _BINARY,
    _DDL,
    _HANDLE_KEY,
    _INT64_LIMIT,
    _INT64_MIN,
    _RESOLVED,
    _ROW,
    _STRING_CODES,
    _U64,
    _UINT64_LIMIT,
    _UNSIGNED,
    BATCH_VERSION,
    Buffer,
    _short,
)
from replicator.codec.open_protocol.golang import (
    go_unquote,
)
from replicator.codec.values import DEFAULT_DECODE_OPTIONS, DecodeOptions
from replicator.errors import DecodeError
from replicator.events import (
    Column,
    DdlEvent,
    Event,
    Op,
    Position,
    Resolved,
    RowChange,
    TypeCode,
    Value,
)

__all__ = ["decode"]


class _ReplacedText(str):
    """A TEXT value whose bytes were not UTF-8, decoded with U+FFFD: `_columns` notes its column
    (for `DecodeOptions.invalid_text`) and stores it as a plain str."""

    __slots__ = ()


def _bad(value: object, expected: str) -> DecodeError:
    shown = _short(value) if isinstance(value, str) else json_kind(value)
    return DecodeError(f"value {shown} is not {expected}", where="field 'v'")


# Converters: (JSON value, flags, legacy, options) -> Python value; the value is never None here.
_Converter = Callable[[Any, int, bool, DecodeOptions], Value]


def _conv_int(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    if type(v) is FloatText and v == "-0":  # an integer zero, however written
        return 0
    if type(v) is int:
        if flags & _UNSIGNED:
            if 0 <= v < _UINT64_LIMIT:
                return v
            raise DecodeError(f"unsigned integer {v} outside 0..2^64-1", where="field 'v'")
        if _INT64_MIN <= v < (_UINT64_LIMIT if legacy else _INT64_LIMIT):
            return v
        raise DecodeError(f"signed integer {v} outside the 64-bit range", where="field 'v'")
    if legacy and type(v) is str:
        return v
    raise _bad(v, "an integer")


def _conv_uint(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    if type(v) is FloatText and v == "-0":
        return 0
    if type(v) is int:
        if 0 <= v < _UINT64_LIMIT:
            return v
        raise DecodeError(f"integer {v} outside 0..2^64-1", where="field 'v'")
    if legacy and type(v) is str:
        return v
    raise _bad(v, "an unsigned integer")


def _conv_float(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    if type(v) is FloatText or type(v) is int:
        try:
            result = float(v)
        except OverflowError:
            result = math.inf
        if math.isfinite(result):
            return result
        raise DecodeError(f"number {_short(str(v))} is outside the float64 range", where="field 'v'")
    if legacy and type(v) is str:
        return v
    raise _bad(v, "a number")


def _conv_null(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    raise _bad(v, "null (column type NULL)")


def _text(v: Any, expected: str) -> str:
    if type(v) is str:
        return v
    raise _bad(v, expected)


def _conv_date(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    return values.parse_date(_text(v, "a DATE string"), opts.zero_dates)


def _conv_datetime(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    return values.parse_datetime(_text(v, "a DATETIME string"), opts.zero_dates)


def _conv_timestamp(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    return values.parse_timestamp(_text(v, "a TIMESTAMP string"), opts.timezone, opts.zero_dates)


def _conv_time(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    return values.parse_time(_text(v, "a TIME string"))


def _conv_decimal(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    # TiCDC writes a string; a JSON number is accepted too, exactly (its text is kept).
    if type(v) is str or type(v) is FloatText or type(v) is int:
        return values.parse_sql_decimal(str(v))
    raise _bad(v, "a DECIMAL string")


def _conv_text(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    return _text(v, "a string")


def _b64(v: Any) -> bytes:
    text = _text(v, "a base64 string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise DecodeError(f"value {_short(text)} is not valid base64", where="field 'v'") from None


def _conv_blob(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    raw = _b64(v)
    if flags & _BINARY or legacy:
        return raw
    text, replaced = values.decode_text(raw)
    return _ReplacedText(text) if replaced else text


def _conv_string(v: Any, flags: int, legacy: bool, opts: DecodeOptions) -> Value:
    text = _text(v, "a string")
    if legacy:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise DecodeError(
                f"value {_short(text)} of a column without 'f' is not base64 (pre-v4.0.6 producers "
                "base64-encode CHAR/VARCHAR; decode with legacy='modern' if this producer does not)",
                where="field 'v'",
            ) from None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    if flags & _BINARY:
        return go_unquote(text)
    return text


_CONVERTERS: Final[dict[int, _Converter]] = {
    TypeCode.DECIMAL: _conv_decimal,
    TypeCode.NEWDECIMAL: _conv_decimal,
    TypeCode.TINY: _conv_int,
    TypeCode.SHORT: _conv_int,
    TypeCode.LONG: _conv_int,
    TypeCode.LONGLONG: _conv_int,
    TypeCode.INT24: _conv_int,
    TypeCode.YEAR: _conv_int,
    TypeCode.FLOAT: _conv_float,
    TypeCode.DOUBLE: _conv_float,
    TypeCode.NULL: _conv_null,
    TypeCode.TIMESTAMP: _conv_timestamp,
    TypeCode.DATE: _conv_date,
    TypeCode.NEWDATE: _conv_date,
    TypeCode.DATETIME: _conv_datetime,
    TypeCode.TIME: _conv_time,
    TypeCode.BIT: _conv_uint,
    TypeCode.ENUM: _conv_uint,
    TypeCode.SET: _conv_uint,
    TypeCode.JSON: _conv_text,
    TypeCode.VECTOR: _conv_text,
    TypeCode.TINY_BLOB: _conv_blob,
    TypeCode.MEDIUM_BLOB: _conv_blob,
    TypeCode.LONG_BLOB: _conv_blob,
    TypeCode.BLOB: _conv_blob,
    TypeCode.VARCHAR: _conv_string,
    TypeCode.VAR_STRING: _conv_string,
    TypeCode.STRING: _conv_string,
}
_CONVERTERS_BY_INT: Final[dict[int, _Converter]] = {int(k): v for k, v in _CONVERTERS.items()}
_KNOWN_CODES: Final = frozenset(int(c) for c in TypeCode)


def _column(name: str, col: Any, legacy: bool, opts: DecodeOptions, replaced: list[str]) -> Column:
    if type(col) is not dict:
        raise DecodeError(f"column is {json_kind(col)}, not an object")
    t = col.get("t")
    if type(t) is not int or not 0 <= t <= 255:
        raise DecodeError(f"type code {json_kind(t) if type(t) is not int else t} is not 0..255", where="field 't'")
    flags = col.get("f", 0)
    if type(flags) is not int or not 0 <= flags < _UINT64_LIMIT:
        shown = json_kind(flags) if type(flags) is not int else flags
        raise DecodeError(f"flags {shown} not a uint64", where="field 'f'")
    handle = col.get("h")
    if handle is True:
        flags |= _HANDLE_KEY
    elif handle is not None and handle is not False:
        raise DecodeError(f"'h' is {json_kind(handle)}, not a boolean", where="field 'h'")
    v = col.get("v")
    if v is None:
        return Column(name, t, flags, None)
    conv = _CONVERTERS_BY_INT.get(t)
    if conv is None:
        known = f" ({TypeCode(t).name})" if t in _KNOWN_CODES else ""
        raise DecodeError(f"unsupported column type code {t}{known}", where="field 't'")
    value = conv(v, flags, legacy, opts)
    if type(value) is _ReplacedText:
        replaced.append(name)
        value = str(value)
    return Column(name, t, flags, value)


_FAST_INT_CODES: Final = frozenset(
    int(c)
    for c in (
        TypeCode.TINY,
        TypeCode.SHORT,
        TypeCode.LONG,
        TypeCode.LONGLONG,
        TypeCode.INT24,
        TypeCode.YEAR,
        TypeCode.BIT,
        TypeCode.ENUM,
        TypeCode.SET,
    )
)
_FAST_TEXT_CODES: Final = frozenset((int(TypeCode.JSON), int(TypeCode.VECTOR)))


def _columns(image: Any, field: str, legacy: bool, opts: DecodeOptions, replaced: list[str]) -> tuple[Column, ...]:
    """Decode one image. The loop inlines the common cases (0 <= int < 2^63, which every integer
    type accepts whatever its flags; plain text); everything else, including every error, goes
    through `_column`, which has the exact checks and messages. Columns whose TEXT was not UTF-8
    are appended to `replaced`."""
    out: list[Column] = []
    append = out.append
    converters = _CONVERTERS_BY_INT
    for name, col in image.items():
        try:
            if type(col) is dict:
                t = col.get("t")
                flags = col.get("f", 0)
                handle = col.get("h")
                if (
                    type(t) is int
                    and t in converters
                    and type(flags) is int
                    and 0 <= flags < _UINT64_LIMIT
                    and (handle is None or handle is True or handle is False)
                ):
                    if handle:
                        flags |= _HANDLE_KEY
                    v = col.get("v")
                    if v is not None and not (
                        (type(v) is int and t in _FAST_INT_CODES and 0 <= v < _INT64_LIMIT)
                        or (
                            type(v) is str
                            and (t in _FAST_TEXT_CODES or (t in _STRING_CODES and not legacy and not flags & _BINARY))
                        )
                    ):
                        v = converters[t](v, flags, legacy, opts)
                        if type(v) is _ReplacedText:
                            replaced.append(name)
                            v = str(v)
                    append(Column(name, t, flags, v))
                    continue
            append(_column(name, col, legacy, opts, replaced))
        except DecodeError as exc:
            where = f"field '{field}' column {_short(name)}"
            raise DecodeError(exc.what, where=f"{where} {exc.where}" if exc.where else where) from None
    return tuple(out)


def _image(obj: dict[str, Any], field: str) -> dict[str, Any] | None:
    image = obj.get(field)
    if image is None:
        return None
    if type(image) is not dict:
        raise DecodeError(f"'{field}' is {json_kind(image)}, not an object", where=f"field '{field}'")
    return image or None


def _is_legacy(images: Iterable[dict[str, Any] | None], mode: str) -> bool:
    if mode == "modern":
        return False
    if mode == "legacy":
        return True
    for image in images:
        if image:
            for col in image.values():
                if type(col) is dict and "f" in col:
                    return False
    return True


def _row(key: dict[str, Any], obj: dict[str, Any], opts: DecodeOptions, replaced: list[str]) -> RowChange:
    upd, pre, dele = _image(obj, "u"), _image(obj, "p"), _image(obj, "d")
    # The reference decoder's rule: a non-empty "d" is a delete; otherwise "u" is the new image
    # and "p" the old one (an update when both are there).
    if dele is not None:
        legacy = _is_legacy((dele,), opts.legacy)
        return _row_change(key, Op.DELETE, (), _columns(dele, "d", legacy, opts, replaced))
    if pre is not None:
        legacy = _is_legacy((upd, pre), opts.legacy)
        old = _columns(pre, "p", legacy, opts, replaced)
        if upd is None:
            return _row_change(key, Op.DELETE, (), old)
        return _row_change(key, Op.UPDATE, _columns(upd, "u", legacy, opts, replaced), old)
    if upd is not None:
        legacy = _is_legacy((upd,), opts.legacy)
        return _row_change(key, Op.INSERT, _columns(upd, "u", legacy, opts, replaced), ())
    raise DecodeError("row event has no columns: none of 'u', 'p', 'd' is a non-empty object")


def _row_change(key: dict[str, Any], op: Op, new: tuple[Column, ...], old: tuple[Column, ...]) -> RowChange:
    return RowChange(
        commit_ts=key["ts"],
        schema=key["scm"],
        table=key["tbl"],
        op=op,
        columns=new,
        old_columns=old,
        partition_id=key["ptn"],
        row_id=key["rid"],
        only_handle_key=key["ohk"],
        claim_check=key["ccl"],
        position=key["pos"],
    )


def _opt_int64(obj: dict[str, Any], field: str) -> int | None:
    value = obj.get(field)
    if value is None:
        return None
    if type(value) is not int or not _INT64_MIN <= value < _INT64_LIMIT:
        raise DecodeError(f"'{field}' is {json_kind(value)}, not an int64", where=f"field '{field}'")
    return value


def _parse_key(obj: dict[str, Any]) -> dict[str, Any]:
    """Validate a key object; returns it normalised (every field present, typed)."""
    ts = uint64_field(obj, "ts", required=True)
    kind = obj.get("t")
    if kind not in (_ROW, _DDL, _RESOLVED) or type(kind) is not int:
        shown = kind if type(kind) is int else json_kind(kind)
        raise DecodeError(f"event type {shown} is not 1 (row), 2 (DDL) or 3 (resolved)", where="field 't'")
    ohk = obj.get("ohk", False)
    if ohk is None:
        ohk = False
    if type(ohk) is not bool:
        raise DecodeError(f"'ohk' is {json_kind(ohk)}, not a boolean", where="field 'ohk'")
    ccl = str_field(obj, "ccl")
    return {
        "ts": ts,
        "t": kind,
        "scm": str_field(obj, "scm"),
        "tbl": str_field(obj, "tbl"),
        "rid": _opt_int64(obj, "rid"),
        "ptn": _opt_int64(obj, "ptn"),
        "ohk": ohk,
        "ccl": ccl or None,
    }


def _ddl(key: dict[str, Any], obj: dict[str, Any]) -> DdlEvent:
    query = obj.get("q")
    if type(query) is not str:
        raise DecodeError(f"DDL query 'q' is {json_kind(query)}, not a string", where="field 'q'")
    ddl_type = obj.get("t")
    if type(ddl_type) is not int or not 0 <= ddl_type <= 255:
        shown = ddl_type if type(ddl_type) is int else json_kind(ddl_type)
        raise DecodeError(f"DDL type {shown} is not a TiDB action type 0..255", where="field 't'")
    return DdlEvent(
        commit_ts=key["ts"],
        schema=key["scm"],
        table=key["tbl"],
        ddl_type=ddl_type,
        query=query,
        position=key["pos"],
    )


def _entry_bounds(buf: bytes, pos: int, side: str, index: int) -> tuple[int, int]:
    """(start, end) of the entry whose 8-byte length sits at `pos`; lengths are checked, not trusted."""
    left = len(buf) - pos
    if left < 8:
        raise DecodeError(
            f"truncated {side} entry length: {left} bytes left, 8 needed",
            offset=pos,
            where=f"{side} entry {index} length",
        )
    size = _U64.unpack_from(buf, pos)[0]
    start = pos + 8
    if size > len(buf) - start:
        raise DecodeError(
            f"{side} entry declares {size} bytes but only {len(buf) - start} remain",
            offset=pos,
            where=f"{side} entry {index} length",
        )
    return start, start + size


_INTERNAL_ERRORS: Final = (
    KeyError,
    TypeError,
    ValueError,
    IndexError,
    AttributeError,
    RecursionError,
    OverflowError,
    struct.error,
)


def _value(value: bytes, start: int, end: int, where: str, opts: DecodeOptions) -> Any:
    """A row or DDL value entry's JSON; decompressed first when TiCDC compressed values (each entry
    on its own; a resolved event's empty entry is not compressed)."""
    if opts.compression == "none":
        return load_object(value, start, end, where)
    try:
        plain = decompress(opts.compression, value[start:end])
    except DecodeError as exc:
        raise DecodeError(exc.what, offset=start, where=where) from None
    return load_object(plain, 0, len(plain), where)


def _as_bytes(data: Buffer | None) -> bytes:
    if data is None:
        return b""
    return data if type(data) is bytes else bytes(data)


def decode(
    key: Buffer | None,
    value: Buffer | None,
    *,
    options: DecodeOptions | None = None,
    position: Position | None = None,
) -> list[Event]:
    """Decode one Kafka message (key, value) into its events, in wire order.

    Raises `DecodeError` (with `position` attached when given) for anything malformed; a message
    never decodes partially. A key holding only the version header decodes to no events.
    """
    try:
        return _decode(key, value, options or DEFAULT_DECODE_OPTIONS, position)
    except DecodeError as exc:
        if position is not None:
            exc.at(str(position))
        raise


def _decode(
    key_in: Buffer | None, value_in: Buffer | None, opts: DecodeOptions, position: Position | None
) -> list[Event]:
    if key_in is None:
        raise DecodeError("open protocol message has no Kafka key", where="key")
    key = _as_bytes(key_in)
    value = _as_bytes(value_in)
    if len(key) < 8:
        raise DecodeError(f"key is {len(key)} bytes, shorter than its 8-byte version", offset=0, where="key version")
    version = _U64.unpack_from(key, 0)[0]
    if version != BATCH_VERSION:
        raise DecodeError(f"unsupported batch version {version} (expected 1)", offset=0, where="key version")
    events: list[Event] = []
    replaced: list[str] = []  # of the row being decoded
    invalid: list[tuple[str, str, str]] = []  # of the message, reported once it has decoded
    kpos, vpos, index = 8, 0, 0
    klen, vlen = len(key), len(value)
    while kpos < klen:
        kstart, kpos = _entry_bounds(key, kpos, "key", index)
        if vpos >= vlen:
            raise DecodeError(
                f"key entry {index} has no value entry (value holds {index})",
                offset=vpos,
                where=f"value entry {index}",
            )
        vstart, vpos = _entry_bounds(value, vpos, "value", index)
        where, base = f"key entry {index}", kstart
        try:
            k = _parse_key(load_object(key, kstart, kpos, where))
            k["pos"] = position
            kind = k["t"]
            where, base = f"value entry {index}", vstart
            event: Event | None
            if kind == _ROW and opts.skip_row is not None and opts.skip_row(k["scm"], k["tbl"], k["ts"], position):
                event = None  # another shard's table (--shard): its value entry is never parsed
            elif kind == _ROW:
                event = _row(k, _value(value, vstart, vpos, where, opts), opts, replaced)
                if replaced:
                    invalid += [(event.schema, event.table, column) for column in replaced]
                    replaced.clear()
            elif kind == _DDL:
                event = _ddl(k, _value(value, vstart, vpos, where, opts))
            else:  # resolved: the value entry is empty; the reference ignores its content
                event = Resolved(ts=k["ts"], position=position)
        except DecodeError as exc:
            if exc.where and exc.where.startswith(where):
                raise
            full = f"{where} {exc.where}" if exc.where else where
            raise DecodeError(
                exc.what, offset=base if exc.byte_offset is None else exc.byte_offset, where=full
            ) from None
        except _INTERNAL_ERRORS as exc:
            raise DecodeError(f"malformed entry ({type(exc).__name__}: {exc})", offset=base, where=where) from None
        if event is not None:
            events.append(event)
        index += 1
    if vpos < vlen:
        raise DecodeError(f"value holds more entries than key ({index})", offset=vpos, where=f"value entry {index}")
    if invalid and opts.invalid_text is not None:
        for schema, table, column in invalid:
            opts.invalid_text.add(schema, table, column, position)
    return events
