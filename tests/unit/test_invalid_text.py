"""Non-binary text whose bytes are not UTF-8: both codecs decode it with U+FFFD (the same value),
report each value to `DecodeOptions.invalid_text`, which logs once per table and column, and the
engine's run summary shows the count."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pytest

from replicator.codec import CODECS, codec_for
from replicator.codec.state import CodecState
from replicator.codec.values import DecodeOptions, InvalidText, decode_text
from replicator.engine.pipeline import Engine, RunOptions, RunSummary
from replicator.errors import DecodeError
from replicator.events import Column, Op, Position, Record, RowChange, TypeCode

BAD = b"ok\xff\xfe bad \xc3("  # two invalid sequences: a stray byte run and a truncated 2-byte char
EXPECTED = BAD.decode("utf-8", "replace")
TEXT_TYPES = [TypeCode.BLOB, TypeCode.TINY_BLOB, TypeCode.MEDIUM_BLOB, TypeCode.LONG_BLOB]
# canal-json cannot carry the bad bytes at all: TiCDC's JSON writer already wrote U+FFFD for them, so
# its decoder sees valid text (the same value) and has nothing to report. Simple likewise (JSON).
REPORTING = [p for p in CODECS if p not in ("canal-json", "simple")]


def text_row(ts: int, table: str, columns: dict[str, bytes | str], type_code: int = TypeCode.BLOB) -> RowChange:
    cols = (Column("id", TypeCode.LONG, 0b11, ts), *(Column(n, type_code, 0, v) for n, v in columns.items()))
    return RowChange(ts, "s", table, Op.INSERT, cols)


def decoded_value(protocol: str, raw: bytes, type_code: int, options: DecodeOptions | None = None) -> object:
    codec = codec_for(protocol)
    *schemas, (key, value) = codec.encode_rows([text_row(1, "t", {"c": raw}, type_code)])  # Simple: a BOOTSTRAP
    options = dataclasses.replace(options or DecodeOptions(), state=CodecState())
    for message in schemas:
        assert codec.decode(*message, options=options) == []
    [event] = codec.decode(key, value, options=options)
    assert isinstance(event, RowChange)
    return {c.name: c.value for c in event.columns}["c"]


@pytest.mark.parametrize("type_code", TEXT_TYPES)
def test_craft_and_open_protocol_decode_invalid_text_to_the_same_value(type_code: int) -> None:
    via_craft = decoded_value("craft", BAD, type_code)
    via_open = decoded_value("open", BAD, type_code)
    assert via_craft == via_open == EXPECTED
    assert "\ufffd" in EXPECTED and EXPECTED.startswith("ok")


@pytest.mark.parametrize("type_code", [*TEXT_TYPES, TypeCode.VARCHAR, TypeCode.STRING])
def test_canal_json_carries_invalid_text_as_tidb_wrote_it_the_same_value(type_code: int) -> None:
    sink = InvalidText()
    assert decoded_value("canal-json", BAD, type_code, DecodeOptions(invalid_text=sink)) == EXPECTED
    assert sink.total == 0


@pytest.mark.parametrize("type_code", [TypeCode.VARCHAR, TypeCode.STRING, TypeCode.VAR_STRING])
def test_craft_varchar_with_invalid_utf8_decodes_with_replacement(type_code: int) -> None:
    # Open Protocol cannot carry these bytes in a JSON string: the reference writes U+FFFD there.
    assert decoded_value("craft", BAD, type_code) == EXPECTED


def test_valid_text_and_binary_columns_are_not_replaced() -> None:
    sink = InvalidText()
    for protocol in CODECS:
        assert decoded_value(protocol, "façade".encode(), TypeCode.BLOB, DecodeOptions(invalid_text=sink)) == "façade"
    binary = RowChange(1, "s", "t", Op.INSERT, (Column("b", TypeCode.BLOB, 0x01, BAD),))
    for codec in CODECS.values():
        *schemas, (key, value) = codec.encode_rows([binary])
        options = DecodeOptions(invalid_text=sink, state=CodecState())
        for message in schemas:
            codec.decode(*message, options=options)
        [event] = codec.decode(key, value, options=options)
        assert isinstance(event, RowChange) and event.columns[0].value == BAD
    assert sink.counts == {} and sink.total == 0


def test_decode_text_is_the_shared_rule() -> None:
    assert decode_text(BAD) == (EXPECTED, True)
    assert decode_text("é".encode()) == ("é", False)


@pytest.mark.parametrize("protocol", REPORTING)
def test_counted_per_value_and_logged_once_per_table_and_column(
    protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    codec = codec_for(protocol)
    rows = [text_row(ts, "t", {"c": BAD, "d": "fine"}) for ts in range(1, 6)]
    rows += [text_row(6, "t", {"c": "fine", "d": BAD}), text_row(7, "u", {"c": BAD, "d": BAD})]
    sink = InvalidText()
    options = DecodeOptions(invalid_text=sink)
    caplog.set_level(logging.WARNING, logger="replicator")
    decoded = []
    for i, (key, value) in enumerate(codec.encode_rows(rows, max_batch_size=2)):
        decoded += codec.decode(key, value, options=options, position=Position("topic", 0, i))
    assert len(decoded) == 7
    assert sink.counts == {("s", "t", "c"): 5, ("s", "t", "d"): 1, ("s", "u", "c"): 1, ("s", "u", "d"): 1}
    assert sink.total == 8
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4  # one per table and column, not one per row
    assert any("s.t column 'c'" in w and "topic 'topic' partition 0 offset 0" in w for w in warnings), warnings
    assert any("s.t column 'd'" in w for w in warnings)
    assert all("U+FFFD" in w for w in warnings)


@pytest.mark.parametrize("protocol", REPORTING)
def test_a_message_that_fails_to_decode_reports_nothing(protocol: str) -> None:
    codec = codec_for(protocol)
    [(key, value)] = codec.encode_rows([text_row(1, "t", {"c": BAD}), text_row(2, "t", {"c": BAD})])
    sink = InvalidText()
    with pytest.raises(DecodeError):
        codec.decode(key, value[:-1], options=DecodeOptions(invalid_text=sink))
    assert sink.total == 0


class _NamedSource:
    """Just enough of a source for the engine's constructor and decoding step (nothing is read)."""

    name = "topic"


def test_engine_counts_replaced_text_in_its_run_summary(tmp_path: Path) -> None:
    engine = Engine(_NamedSource(), RunOptions(warehouse=str(tmp_path / "wh"), protocol="craft"))  # type: ignore[arg-type]
    codec = codec_for("craft")
    messages = codec.encode_rows([text_row(ts, "t", {"c": BAD}) for ts in range(1, 4)], max_batch_size=1)
    for offset, (key, value) in enumerate(messages):
        engine.decode_record(Record("topic", 0, offset, -1, key, value))
    assert engine.summary.invalid_utf8 == 3
    assert engine.summary.to_json()["invalid_utf8"] == 3
    assert "invalid UTF-8     3 text values" in engine.summary.render()
    assert RunSummary().to_json()["invalid_utf8"] == 0
    assert "invalid UTF-8" not in RunSummary().render()
