"""The Codec contract, for every codec in `CODECS`: events -> encode -> decode gives the same events.

Rows (insert, update, delete) with every column type, DDL and resolved events, any batch size and
upstream time zone. The events are drawn from what both wire formats carry (Craft has no row id,
handle-key-only or claim-check fields, and its partition -1 means none), with column names in byte
order (Open Protocol writes a row image as a Go map, sorted by name).

canal-json carries less, by design of the format: no DDL type code (the statement is classified, so
its DDL events are drawn from statements of known code), one type per column name in a message (an
update's old image has the new image's columns), no partition id, and only the flags its
`mysqlType` / `pkNames` say (`carried`): decoding gives exactly what it carries.

Simple carries its types and key flags in the table schema of a BOOTSTRAP message (its encoder sends
one before each table's rows): like canal-json, DDL is classified and an update's old image has the
new image's columns; the flags are the schema's (key indexes, unsigned, nullable, binary), and rows
decode only with a per-run `CodecState` (the schema cache).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.codec import CODECS, DEFAULT_MAX_BATCH_SIZE, Codec, codec_for, craft, open_protocol
from replicator.codec.canal_json.common import BINARY_CHARSET_CODES, TEXTUAL_CODES
from replicator.codec.open_protocol import go_float_text
from replicator.codec.state import CodecState
from replicator.codec.values import DecodeOptions
from replicator.errors import ConfigError
from replicator.events import Column, DdlEvent, Event, Flag, Op, Resolved, RowChange, TypeCode
from tests.unit.test_ddl_classify import STATEMENTS

UTC8 = dt.timezone(dt.timedelta(hours=8))
MINUS_0330 = dt.timezone(-dt.timedelta(hours=3, minutes=30))
BIN, UNS = int(Flag.BINARY), int(Flag.UNSIGNED)
I64_MIN, I64_MAX, U64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
SIGNED_INTS = [TypeCode.TINY, TypeCode.SHORT, TypeCode.LONG, TypeCode.LONGLONG, TypeCode.INT24]
UNSIGNED_INTS = [TypeCode.BIT, TypeCode.ENUM, TypeCode.SET]
STRINGS = [TypeCode.VARCHAR, TypeCode.VAR_STRING, TypeCode.STRING]
BLOBS = [TypeCode.TINY_BLOB, TypeCode.MEDIUM_BLOB, TypeCode.LONG_BLOB, TypeCode.BLOB]
ALL_TYPES = [
    *SIGNED_INTS,
    *UNSIGNED_INTS,
    *STRINGS,
    *BLOBS,
    TypeCode.YEAR,
    TypeCode.FLOAT,
    TypeCode.DOUBLE,
    TypeCode.DECIMAL,
    TypeCode.NEWDECIMAL,
    TypeCode.DATE,
    TypeCode.NEWDATE,
    TypeCode.DATETIME,
    TypeCode.TIMESTAMP,
    TypeCode.TIME,
    TypeCode.JSON,
    TypeCode.VECTOR,
    TypeCode.NULL,
]

names = st.text(max_size=6)


def _time_text() -> st.SearchStrategy[str]:
    return st.builds(
        lambda neg, h, m, s, frac: f"{'-' if neg else ''}{h:02d}:{m:02d}:{s:02d}{frac}",
        st.booleans(),
        st.integers(0, 837),
        st.integers(0, 59),
        st.integers(0, 59),
        st.sampled_from(["", ".5", ".000001", ".123456"]),
    )


def _decimals() -> st.SearchStrategy[Decimal]:
    return st.builds(
        lambda digits, scale, neg: Decimal(digits).scaleb(-scale) * (-1 if neg else 1),
        st.integers(0, 10**65 - 1),
        st.integers(0, 30),
        st.booleans(),
    )


def _value(t: int, flags: int) -> st.SearchStrategy[Any]:
    """Values of type code `t` as the decoders produce them."""
    if t in SIGNED_INTS:
        return st.integers(0, U64_MAX) if flags & UNS else st.integers(I64_MIN, I64_MAX)
    if t in UNSIGNED_INTS:
        return st.integers(0, U64_MAX) | st.sampled_from([0, U64_MAX])
    if t == TypeCode.YEAR:
        return st.integers(0, 2155) | st.sampled_from([1901, 2155])
    if t == TypeCode.DOUBLE:
        return st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, -0.0])
    if t == TypeCode.FLOAT:  # the float64 of Go's float32 text, which is what Open Protocol delivers
        f32 = st.floats(width=32, allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, -0.0])
        return f32.map(lambda x: float(go_float_text(x, 32)))
    if t in (TypeCode.DECIMAL, TypeCode.NEWDECIMAL):
        return _decimals()
    if t in (TypeCode.DATE, TypeCode.NEWDATE):
        return st.dates(min_value=dt.date(1, 1, 1))
    if t == TypeCode.DATETIME:
        return st.datetimes(min_value=dt.datetime(1, 1, 1))
    if t == TypeCode.TIMESTAMP:
        naive = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2100, 1, 1))
        return st.builds(lambda n, tz: n.replace(tzinfo=tz), naive, st.sampled_from([dt.UTC, UTC8, MINUS_0330]))
    if t == TypeCode.TIME:
        return _time_text()
    if t in STRINGS or t in BLOBS:
        return st.binary() if flags & BIN else st.text()
    if t == TypeCode.NULL:
        return st.none()
    return st.text()  # JSON, VECTOR: their text


@st.composite
def columns(draw: st.DrawFn) -> tuple[Column, ...]:
    chosen = draw(st.dictionaries(names, st.sampled_from(ALL_TYPES), min_size=1, max_size=6))
    out = []
    for name in sorted(chosen):  # code point order = UTF-8 byte order = Go's sorted map keys
        t = chosen[name]
        flags = draw(st.integers(0, 255))
        value = None if draw(st.integers(0, 9)) == 0 else draw(_value(t, flags))
        out.append(Column(name, int(t), flags, value))
    return tuple(out)


@st.composite
def same_columns(draw: st.DrawFn, image: tuple[Column, ...]) -> tuple[Column, ...]:
    """Another image of the same columns (canal-json: one type per column name in a message)."""
    def value(c: Column) -> Any:
        return None if draw(st.integers(0, 9)) == 0 else draw(_value(c.type_code, c.flags))

    return tuple(Column(c.name, c.type_code, c.flags, value(c)) for c in image)


KNOWN_DDL = [(code, query) for code, queries in STATEMENTS.items() for query in queries]


@st.composite
def events(draw: st.DrawFn, protocol: str = "open") -> Event:
    kind = draw(st.sampled_from(["row", "row", "row", "ddl", "resolved"]))
    ts = draw(st.integers(0, U64_MAX))
    if kind == "resolved":
        return Resolved(ts)
    if kind == "ddl":
        if protocol in ("canal-json", "simple"):
            code, query = draw(st.sampled_from(KNOWN_DDL))
            return DdlEvent(ts, draw(names), draw(names), code, query)
        return DdlEvent(ts, draw(names), draw(names), draw(st.integers(0, 255)), draw(st.text()))
    op = draw(st.sampled_from(list(Op)))
    new = draw(columns()) if op is not Op.DELETE else ()
    if op is Op.UPDATE and protocol in ("canal-json", "simple"):
        old = draw(same_columns(new))
    else:
        old = draw(columns()) if op is not Op.INSERT else ()
    return RowChange(
        ts,
        draw(names),
        draw(names),
        op,
        columns=new,
        old_columns=old,
        partition_id=draw(st.none() | st.integers(0, I64_MAX)),
    )


_CANAL_CODES = {int(TypeCode.DECIMAL): int(TypeCode.NEWDECIMAL), int(TypeCode.NEWDATE): int(TypeCode.DATE)}
_KEY = int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY)


def _canal_column(col: Column) -> Column:
    t = _CANAL_CODES.get(col.type_code, col.type_code)
    flags = _KEY if col.flags & Flag.PRIMARY_KEY else 0
    if (col.flags & UNS and t != TypeCode.BIT) or t == TypeCode.YEAR:
        flags |= UNS
    if t in BINARY_CHARSET_CODES or (t in TEXTUAL_CODES and col.flags & BIN):
        flags |= BIN
    return Column(col.name, t, flags, col.value)


def _simple_columns(image: tuple[Column, ...]) -> tuple[Column, ...]:
    """The flags a Simple table schema carries (see the encoder's `table_schema`)."""
    primary = {c.name for c in image if c.flags & Flag.PRIMARY_KEY}
    keyed = primary or {c.name for c in image if c.flags & Flag.HANDLE_KEY}
    out = []
    for c in image:
        t = _CANAL_CODES.get(c.type_code, c.type_code)
        if t == TypeCode.VAR_STRING and c.flags & BIN:
            t = int(TypeCode.VARCHAR)  # written as varbinary
        flags = c.flags & int(Flag.NULLABLE)
        if c.name in keyed:
            flags |= int(Flag.HANDLE_KEY) | int(Flag.PRIMARY_KEY if primary else Flag.UNIQUE_KEY)
        elif c.flags & Flag.UNIQUE_KEY:
            flags |= int(Flag.UNIQUE_KEY)
        elif c.flags & Flag.MULTIPLE_KEY:
            flags |= int(Flag.MULTIPLE_KEY)
        if (c.flags & UNS and t != TypeCode.BIT) or t == TypeCode.YEAR:
            flags |= UNS
        if t in BINARY_CHARSET_CODES or (t in TEXTUAL_CODES and c.flags & BIN):
            flags |= BIN
        out.append(Column(c.name, t, flags, c.value))
    return tuple(out)


def carried(protocol: str, ev: Event) -> Event:
    """What decoding `ev` encoded in `protocol` gives: `ev` itself, except what canal-json or Simple do not carry."""
    if protocol not in ("canal-json", "simple") or not isinstance(ev, RowChange):
        return ev
    op = Op.INSERT if ev.op is Op.UPDATE and not ev.old_columns else ev.op  # TiCDC's rule, as Open's decoder
    if protocol == "simple":
        new = _simple_columns(ev.columns) if op is not Op.DELETE else ()
        old = _simple_columns(ev.old_columns) if op is not Op.INSERT else ()
        return RowChange(ev.commit_ts, ev.schema, ev.table, op, new, old, partition_id=ev.partition_id or None)
    return RowChange(ev.commit_ts, ev.schema, ev.table, op, tuple(map(_canal_column, ev.columns)),
                     tuple(map(_canal_column, ev.old_columns)) if op is not Op.INSERT else ())


def float_signs(evs: list[Event]) -> list[tuple[str, float]]:
    """Every float value's sign (== does not see the sign of a zero)."""
    return [
        (col.name, math.copysign(1.0, col.value))
        for ev in evs
        if isinstance(ev, RowChange)
        for col in (*ev.columns, *ev.old_columns)
        if isinstance(col.value, float)
    ]


def value_types(evs: list[Event]) -> list[type]:
    return [type(c.value) for ev in evs if isinstance(ev, RowChange) for c in (*ev.columns, *ev.old_columns)]


@pytest.mark.parametrize("protocol", list(CODECS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    batch=st.integers(1, 4),
    tz=st.sampled_from([dt.UTC, UTC8, MINUS_0330]),
)
def test_encode_then_decode_gives_the_same_events(protocol: str, data: st.DataObject, batch: int,
                                                   tz: dt.tzinfo) -> None:
    evs = data.draw(st.lists(events(protocol), min_size=1, max_size=8))
    codec = codec_for(protocol)
    messages = codec.encode(evs, max_batch_size=batch, timezone=tz)
    assert all(type(key) is bytes if protocol == "open" else key is None for key, _ in messages)
    options = DecodeOptions(timezone=tz, state=CodecState())
    decoded = [e for key, value in messages for e in codec.decode(key, value, options=options)]
    assert decoded == [carried(protocol, e) for e in evs]
    assert float_signs(decoded) == float_signs(evs)
    assert value_types(decoded) == value_types(evs)


@pytest.mark.parametrize("protocol", list(CODECS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_encode_rows_and_encode_event_agree_with_encode(protocol: str, data: st.DataObject) -> None:
    """`encode` = rows batched by `encode_rows`, each DDL / resolved event alone by `encode_event`."""
    evs = data.draw(st.lists(events("simple" if protocol == "simple" else "open"), min_size=1, max_size=6))
    codec = codec_for(protocol)
    expected: list[tuple[bytes | None, bytes]] = []
    pending: list[RowChange] = []
    for ev in evs:
        if isinstance(ev, RowChange):
            pending.append(ev)
            continue
        expected += codec.encode_rows(pending) if pending else []
        pending = []
        expected.append(codec.encode_event(ev))
    expected += codec.encode_rows(pending) if pending else []
    assert codec.encode(evs) == expected
    # ... and the same bytes as each format's own whole-stream encoder.
    if protocol == "open":
        assert expected == open_protocol.encode_events(evs)
    elif protocol == "craft":
        assert expected == [(None, v) for v in craft.encode(evs)]
    else:  # canal-json, Simple: no whole-stream encoder of their own: one message per event, no key
        # (Simple: plus a BOOTSTRAP before a table's rows)
        events_sent = [v for _, v in expected if b'"type":"BOOTSTRAP"' not in v]
        assert len(events_sent) == len(evs) and all(key is None for key, _ in expected)


@pytest.mark.parametrize("codec", list(CODECS.values()), ids=list(CODECS))
def test_every_column_type_in_one_row(codec: Codec) -> None:
    examples = [
        (TypeCode.LONGLONG, I64_MIN),
        (TypeCode.BIT, U64_MAX),
        (TypeCode.YEAR, 2024),
        (TypeCode.FLOAT, 1.5),
        (TypeCode.DOUBLE, -0.0),
        (TypeCode.NEWDECIMAL, Decimal("-12345678901234567890.123456789")),
        (TypeCode.DATE, dt.date(2024, 2, 29)),
        (TypeCode.DATETIME, dt.datetime(2024, 2, 29, 23, 59, 59, 999999)),
        (TypeCode.TIMESTAMP, dt.datetime(2024, 1, 1, tzinfo=dt.UTC)),
        (TypeCode.TIME, "-838:59:59"),
        (TypeCode.JSON, '{"a": [1, "é"]}'),
        (TypeCode.VARCHAR, "naïve \x00 text"),
        (TypeCode.BLOB, "text in a TEXT column"),
        (TypeCode.NULL, None),
    ]
    cols = tuple(sorted((Column(f"c{t:03d}", int(t), 0, v) for t, v in examples), key=lambda c: c.name))
    binary = (Column("z_bin", TypeCode.VARCHAR, BIN, b"\x00\xff"), Column("z_blob", TypeCode.BLOB, BIN, b"\xfe"))
    row = RowChange(9, "s", "t", Op.UPDATE, cols + binary, cols + binary, partition_id=3)
    *schema, message = codec.encode_rows([row], max_batch_size=DEFAULT_MAX_BATCH_SIZE)
    options = DecodeOptions(state=CodecState())
    assert [codec.decode(*m, options=options) for m in schema] == ([[]] if codec.name == "simple" else [])
    decoded = codec.decode(*message, options=options)
    assert decoded == [carried(codec.name, row)]
    assert float_signs(decoded) == float_signs([row]) and value_types(decoded) == value_types([row])


def test_codec_for_names_the_known_protocols() -> None:
    assert sorted(CODECS) == ["canal-json", "craft", "open", "simple"]
    assert all(codec_for(name).name == name for name in CODECS)
    with pytest.raises(ConfigError, match=r"unknown protocol 'avro'.*open, craft"):
        codec_for("avro")
