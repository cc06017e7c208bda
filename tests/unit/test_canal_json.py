"""canal-json (TiCDC with enable-tidb-extension=true): vectors in the shape of TiCDC's documented
examples and of what its encoder writes (the facts from tiflow's canal_json_* code and the TiCDC
docs, the messages written here), every type against the Open Protocol's typing, both `old` shapes,
key-only deletes, watermarks, the refusal without the extension, DDL on partition 0 only through
the windower (restart cursors included), the differential with Open and Craft, and any bytes ->
events or a DecodeError."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.changes import collapse
from replicator.cli import main
from replicator.codec import CODECS, codec_for, open_protocol
from replicator.codec.canal_json import NO_EXTENSION, decode, encode_row
from replicator.codec.state import CodecState
from replicator.codec.values import DecodeOptions
from replicator.delta.ddl.scope import ddl_scope
from replicator.engine.window import Windower
from replicator.errors import DecodeError
from replicator.events import TP, Column, DdlEvent, Event, Flag, Op, Position, Resolved, RowChange, TypeCode
from replicator.formats.archive import read_archive
from replicator.sim.columns import f32
from replicator.sim.model import SimConfig
from replicator.sim.simcheck import compare_tables
from replicator.sim.stream import Simulation
from tests.unit.test_simulate import MemoryWarehouse

TSO = 429918007904436226
KEY = int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY)
BIN, UNS = int(Flag.BINARY), int(Flag.UNSIGNED)
POS = Position("orders", 2, 17)


def message(**fields: Any) -> bytes:
    """A canal-json message as TiCDC lays it out (fields in its order), overridden by `fields`."""
    base: dict[str, Any] = {"id": 0, "database": "test", "table": "tp_int", "pkNames": ["id"], "isDdl": False,
                            "type": "INSERT", "es": TSO >> 18, "ts": (TSO >> 18) + 1800, "sql": "",
                            "sqlType": None, "mysqlType": None, "old": None, "data": None,
                            "_tidb": {"commitTs": TSO}}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...}, ensure_ascii=False).encode()


def cols(event: Event) -> dict[str, Any]:
    assert isinstance(event, RowChange)
    return {c.name: c.value for c in event.columns}


# ---------------------------------------------------------------------------------------------
# The documented shapes: DDL, DML (insert, update with a full and with a partial old), WATERMARK

INT_TYPES = {"c_bigint": "bigint", "c_int": "int", "c_mediumint": "mediumint", "c_smallint": "smallint",
             "c_tinyint": "tinyint", "id": "int"}
INT_SQL_TYPES = {"c_bigint": -5, "c_int": 4, "c_mediumint": 4, "c_smallint": 5, "c_tinyint": -6, "id": 4}
INT_ROW = {"c_bigint": "9223372036854775807", "c_int": "2147483647", "c_mediumint": "8388607",
           "c_smallint": "32767", "c_tinyint": "127", "id": "2"}


def test_documented_ddl_event() -> None:
    value = message(table="", pkNames=None, isDdl=True, type="QUERY", sql="drop database if exists test")
    assert decode(None, value) == [DdlEvent(TSO, "test", "", 2, "drop database if exists test")]


def test_documented_insert_event() -> None:
    value = message(sqlType=INT_SQL_TYPES, mysqlType=INT_TYPES, data=[INT_ROW])
    [row] = decode(None, value)
    assert isinstance(row, RowChange)
    assert (row.commit_ts, row.schema, row.table, row.op, row.old_columns) == (TSO, "test", "tp_int", Op.INSERT, ())
    assert cols(row) == {"c_bigint": 2**63 - 1, "c_int": 2**31 - 1, "c_mediumint": 8388607, "c_smallint": 32767,
                         "c_tinyint": 127, "id": 2}
    flags = {c.name: c.flags for c in row.columns}
    assert flags["id"] == KEY | BIN and flags["c_int"] == BIN  # ints have TiDB's binary charset


def test_documented_update_with_every_old_column_and_with_only_the_changed_ones() -> None:
    new = {**INT_ROW, "c_int": "0", "c_tinyint": "0"}
    full = message(type="UPDATE", sqlType=INT_SQL_TYPES, mysqlType=INT_TYPES, data=[new], old=[INT_ROW])
    partial = message(type="UPDATE", sqlType=INT_SQL_TYPES, mysqlType=INT_TYPES, data=[new],
                      old=[{"c_int": "2147483647", "c_tinyint": "127"}])
    [a], [b] = decode(None, full), decode(None, partial)
    assert a == b
    assert isinstance(a, RowChange) and a.op is Op.UPDATE
    assert {c.name: c.value for c in a.old_columns} == {k: int(v) for k, v in INT_ROW.items()}
    assert [c.name for c in a.old_columns] == [c.name for c in a.columns]


def test_documented_watermark_event() -> None:
    value = message(database="", table="", pkNames=None, type="TIDB_WATERMARK", _tidb={"watermarkTs": TSO})
    assert decode(None, value, position=POS) == [Resolved(TSO)]


def test_encoder_writes_the_documented_layout() -> None:
    row = RowChange(TSO, "test", "tp_int", Op.INSERT,
                    (Column("id", TypeCode.LONG, KEY | BIN, 2), Column("c_bigint", TypeCode.LONGLONG, BIN, 2**63 - 1)))
    obj = json.loads(encode_row(row))
    assert list(obj) == ["id", "database", "table", "pkNames", "isDdl", "type", "es", "ts", "sql", "sqlType",
                         "mysqlType", "old", "data", "_tidb"]
    assert obj["pkNames"] == ["id"] and obj["type"] == "INSERT" and obj["es"] == TSO >> 18
    assert obj["mysqlType"] == {"id": "int", "c_bigint": "bigint"} and obj["sqlType"] == {"id": 4, "c_bigint": -5}
    assert obj["data"] == [{"id": "2", "c_bigint": "9223372036854775807"}]
    assert obj["old"] is None and obj["_tidb"] == {"commitTs": TSO}
    watermark = json.loads(codec_for("canal-json").encode_event(Resolved(TSO))[1])
    assert watermark["type"] == "TIDB_WATERMARK" and watermark["_tidb"] == {"watermarkTs": TSO}
    ddl = json.loads(codec_for("canal-json").encode_event(DdlEvent(TSO, "test", "t", 3, "CREATE TABLE t (a INT)"))[1])
    assert (ddl["isDdl"], ddl["type"], ddl["sql"], ddl["_tidb"]) == (True, "CREATE", "CREATE TABLE t (a INT)",
                                                                    {"commitTs": TSO})


# ---------------------------------------------------------------------------------------------
# Every type: canal's strings decode to what the Open Protocol path decodes, with the same flags

# (name, mysqlType, sqlType, canal string, Open Protocol type code, Open flags, Open JSON value)
EVERY_TYPE: list[tuple[str, str, int, str | None, int, int, Any]] = [
    ("id", "bigint", -5, "1", TypeCode.LONGLONG, KEY | BIN, 1),
    ("c_tiny", "tinyint", -6, "-128", TypeCode.TINY, BIN, -128),
    ("c_utiny", "tinyint unsigned", 5, "255", TypeCode.TINY, BIN | UNS, 255),
    ("c_small", "smallint", 5, "-32768", TypeCode.SHORT, BIN, -32768),
    ("c_medium", "mediumint unsigned", 4, "16777215", TypeCode.INT24, BIN | UNS, 16777215),
    ("c_int", "int", 4, "-2147483648", TypeCode.LONG, BIN, -2147483648),
    ("c_ubig", "bigint unsigned", 3, "18446744073709551615", TypeCode.LONGLONG, BIN | UNS, 2**64 - 1),
    ("c_ubig63", "bigint unsigned", 3, "9223372036854775808", TypeCode.LONGLONG, BIN | UNS, 2**63),
    ("c_float", "float", 7, "3.1415", TypeCode.FLOAT, BIN, 3.1415),
    ("c_double", "double", 8, "-0", TypeCode.DOUBLE, BIN, "-0"),
    ("c_double2", "double", 8, "0.000001", TypeCode.DOUBLE, BIN, 1e-06),
    ("c_decimal", "decimal", 3, "-12345678901234567890.123456789", TypeCode.NEWDECIMAL, BIN,
     "-12345678901234567890.123456789"),
    ("c_year", "year", 12, "2155", TypeCode.YEAR, BIN | UNS, 2155),
    ("c_date", "date", 91, "2024-02-29", TypeCode.DATE, BIN, "2024-02-29"),
    ("c_datetime", "datetime", 93, "2024-02-29 23:59:59.999999", TypeCode.DATETIME, BIN,
     "2024-02-29 23:59:59.999999"),
    ("c_timestamp", "timestamp", 93, "2024-01-01 08:00:00.5", TypeCode.TIMESTAMP, BIN, "2024-01-01 08:00:00.5"),
    ("c_time", "time", 92, "-838:59:59.000000", TypeCode.TIME, BIN, "-838:59:59.000000"),
    ("c_time2", "time", 92, "12:34:56.789", TypeCode.TIME, BIN, "12:34:56.789"),
    ("c_bit", "bit", -7, "255", TypeCode.BIT, BIN, 255),
    ("c_enum", "enum", 4, "2", TypeCode.ENUM, 0, 2),
    ("c_set", "set", -7, "5", TypeCode.SET, 0, 5),
    ("c_json", "json", 12, '{"a": [1, "é"]}', TypeCode.JSON, BIN, '{"a": [1, "é"]}'),
    ("c_char", "char", 1, "abc", TypeCode.STRING, 0, "abc"),
    ("c_varchar", "varchar", 12, "naïve \x00 text", TypeCode.VARCHAR, 0, "naïve \x00 text"),
    ("c_text", "text", 2005, "a TEXT value", TypeCode.BLOB, 0, "YSBURVhUIHZhbHVl"),
    ("c_tinytext", "tinytext", 2005, "tiny", TypeCode.TINY_BLOB, 0, "dGlueQ=="),
    # The docs' VARBINARY example: bytes 5 7 10 15 36 50 43 99 120 60 38 255 254 45 55 70, as ISO-8859-1.
    ("c_varbinary", "varbinary", 2004, "\x05\x07\n\x0f$2+cx<&\xff\xfe-7F", TypeCode.VARCHAR, BIN,
     "\\x05\\a\\n\\x0f$2+cx<&\\xff\\xfe-7F"),
    ("c_binary", "binary", 2004, "\x00\x01", TypeCode.STRING, BIN, "\\x00\\x01"),
    ("c_blob", "blob", 2004, "\x00\xff", TypeCode.BLOB, BIN, "AP8="),
    ("c_longblob", "longblob", 2004, "", TypeCode.LONG_BLOB, BIN, ""),
    ("c_null", "int", 4, None, TypeCode.LONG, BIN, None),
    ("c_vstr_bin", "var_string", 2004, "\x80", TypeCode.VAR_STRING, BIN, "\\x80"),
]


def _open_row() -> RowChange:
    """The same row through the Open Protocol decoder."""
    image = {name: {"t": int(t), "f": f, "v": (json.loads(v) if name == "c_double" else v)}
             for name, _, _, _, t, f, v in EVERY_TYPE}
    image["c_double"]["v"] = "__NEG0__"
    text = json.dumps({"u": image}, ensure_ascii=False).replace('"__NEG0__"', "-0")
    key, _ = open_protocol.encode_resolved(0)  # for its version header
    frame_key = json.dumps({"ts": TSO, "scm": "test", "tbl": "every", "t": 1}).encode()
    key = key[:8] + len(frame_key).to_bytes(8, "big") + frame_key
    body = text.encode()
    [row] = open_protocol.decode(key, len(body).to_bytes(8, "big") + body, options=DecodeOptions(timezone=UTC8))
    assert isinstance(row, RowChange)
    return row


UTC8 = dt.timezone(dt.timedelta(hours=8))


def test_every_type_decodes_to_the_open_protocol_value_type_and_flags() -> None:
    value = message(table="every", pkNames=["id"], mysqlType={n: m for n, m, *_ in EVERY_TYPE},
                    sqlType={n: s for n, _, s, *_ in EVERY_TYPE}, data=[{n: v for n, _, _, v, *_ in EVERY_TYPE}])
    [row] = decode(None, value, options=DecodeOptions(timezone=UTC8))
    assert isinstance(row, RowChange)
    expected = _open_row()
    assert row.columns == expected.columns  # names, type codes, flags, values
    got = cols(row)
    assert got["c_varbinary"] == bytes([5, 7, 10, 15, 36, 50, 43, 99, 120, 60, 38, 255, 254, 45, 55, 70])
    assert math.copysign(1.0, got["c_double"]) == -1.0
    assert got["c_ubig"] == 2**64 - 1 and got["c_decimal"] == Decimal("-12345678901234567890.123456789")
    assert got["c_timestamp"] == dt.datetime(2024, 1, 1, 8, 0, 0, 500000, tzinfo=UTC8)
    assert got["c_datetime"] == dt.datetime(2024, 2, 29, 23, 59, 59, 999999)
    assert got["c_text"] == "a TEXT value" and got["c_blob"] == b"\x00\xff"
    # ... and back: the encoder writes the same strings and types.
    again = json.loads(encode_row(row, timezone=UTC8))
    assert again["data"] == [{n: v for n, _, _, v, *_ in EVERY_TYPE}]
    assert again["mysqlType"] == {n: m for n, m, *_ in EVERY_TYPE}
    assert again["sqlType"] == {n: s for n, _, s, *_ in EVERY_TYPE}


def test_content_compatible_type_names_with_parameters() -> None:
    types = {"id": "int(11) unsigned zerofill", "d": "decimal(10,4)", "e": "enum('a unsigned','b(c)')",
             "v": "varbinary(16)", "s": "varchar(16)"}
    value = message(mysqlType=types, data=[{"id": "7", "d": "1.5000", "e": "1", "v": "\xff", "s": "x"}])
    [row] = decode(None, value)
    assert isinstance(row, RowChange)
    shapes = {c.name: (c.type_code, c.flags, c.value) for c in row.columns}
    assert shapes == {"id": (TypeCode.LONG, KEY | BIN | UNS, 7), "d": (TypeCode.NEWDECIMAL, BIN, Decimal("1.5000")),
                      "e": (TypeCode.ENUM, 0, 1), "v": (TypeCode.VARCHAR, BIN, b"\xff"),
                      "s": (TypeCode.VARCHAR, 0, "x")}


# ---------------------------------------------------------------------------------------------
# Extension fields, key-only deletes, key changes, the refusal without the extension


def _row(op: Op, ts: int, key: int, val: str | None, old: tuple[int, str | None] | None = None) -> RowChange:
    def image(k: int, v: str | None) -> tuple[Column, ...]:
        return (Column("id", TypeCode.LONG, KEY | BIN, k), Column("v", TypeCode.VARCHAR, 0, v),
                Column("n", TypeCode.LONGLONG, BIN, 7))
    new = image(key, val) if op is not Op.DELETE else ()
    before = image(*old) if old is not None else (image(key, val) if op is Op.DELETE else ())
    return RowChange(ts, "s", "t", op, new, before)


def test_key_only_delete_decodes_to_the_key_and_collapses_like_a_full_one() -> None:
    full = _row(Op.DELETE, 9, 3, "x")
    value = encode_row(full, delete_only_handle_key_columns=True)
    obj = json.loads(value)
    assert obj["data"] == [{"id": "3"}] and obj["mysqlType"] == {"id": "int"} and "onlyHandleKey" not in obj["_tidb"]
    [row] = decode(None, value)
    assert isinstance(row, RowChange) and row.op is Op.DELETE and [c.name for c in row.old_columns] == ["id"]
    assert collapse([row], ["id"]) == collapse([decode(None, encode_row(full))[0]], ["id"])  # type: ignore[list-item]


def test_only_updated_columns_round_trip_to_the_full_old_image() -> None:
    row = _row(Op.UPDATE, 9, 3, "new", old=(3, "old"))
    value = encode_row(row, only_output_updated_columns=True)
    assert json.loads(value)["old"] == [{"v": "old"}]
    assert decode(None, value) == decode(None, encode_row(row))
    unchanged = _row(Op.UPDATE, 9, 3, "same", old=(3, "same"))
    assert json.loads(encode_row(unchanged, only_output_updated_columns=True))["old"] == [{}]
    assert decode(None, encode_row(unchanged, only_output_updated_columns=True)) == decode(None, encode_row(unchanged))


def test_key_change_keeps_the_old_key_so_the_merge_deletes_it() -> None:
    row = _row(Op.UPDATE, 9, 4, "v", old=(3, "v"))
    [decoded] = decode(None, encode_row(row, only_output_updated_columns=True))
    assert isinstance(decoded, RowChange)
    assert [c.value for c in decoded.old_columns if c.name == "id"] == [3]
    changes = collapse([decoded], ["id"])
    assert [(c.key, c.delete) for c in changes] == [((3,), True), ((4,), False)]


def test_a_multi_clause_alter_table_may_say_alter_whatever_its_clauses() -> None:
    query = "ALTER TABLE t ADD INDEX a (x), ADD INDEX b (y)"  # TiDB type 61: TiCDC writes canal type ALTER
    [ddl] = decode(None, message(isDdl=True, type="ALTER", sql=query))
    assert isinstance(ddl, DdlEvent) and ddl.ddl_type == 7
    with pytest.raises(DecodeError, match="says CREATE"):
        decode(None, message(isDdl=True, type="CREATE", sql=query))


def test_large_message_extension_fields_are_carried_for_the_engine_to_refuse() -> None:
    ext = {"commitTs": TSO, "onlyHandleKey": True}
    [a] = decode(None, message(mysqlType={"id": "int"}, data=[{"id": "1"}], _tidb=ext))
    ext = {"commitTs": TSO, "claimCheckLocation": "s3://bkt/prefix/7b.json"}
    [b] = decode(None, message(mysqlType={"id": "int"}, data=[{"id": "1"}], _tidb=ext))
    assert isinstance(a, RowChange) and a.only_handle_key and a.claim_check is None
    assert isinstance(b, RowChange) and b.claim_check == "s3://bkt/prefix/7b.json" and not b.only_handle_key


@pytest.mark.parametrize("kind", ["row", "ddl", "watermark"])
def test_a_message_without_the_extension_is_refused_saying_to_enable_it(kind: str) -> None:
    fields: dict[str, Any] = {"_tidb": ...}
    if kind == "row":
        fields |= {"mysqlType": {"id": "int"}, "data": [{"id": "1"}]}
    elif kind == "ddl":
        fields |= {"isDdl": True, "type": "CREATE", "sql": "CREATE TABLE t (id INT)"}
    else:
        fields |= {"type": "TIDB_WATERMARK"}
    with pytest.raises(DecodeError) as info:
        decode(None, message(**fields), position=POS)
    text = str(info.value)
    assert "enable-tidb-extension=true" in text and "exactly-once" in text and "not applied" in text
    assert "topic 'orders' partition 2 offset 17" in text
    assert NO_EXTENSION in text


@pytest.mark.parametrize(
    ("fields", "what"),
    [
        ({"isDdl": True, "type": "ERASE", "sql": "CREATE TABLE t (a INT)"}, "canal type CREATE.*says ERASE"),
        ({"isDdl": True, "type": "QUERY", "sql": "ALTER TABLE t ADD c INT, ADD INDEX (c)"}, "different DDL types"),
        ({"isDdl": True, "type": "QUERY", "sql": "GRANT ALL ON *.* TO u"}, "cannot classify|can classify"),
        ({"type": "REPLACE", "mysqlType": {"id": "int"}, "data": [{"id": "1"}]}, "is not INSERT"),
        ({"mysqlType": {"id": "int"}, "data": [{"id": 1}]}, "strings or null"),
        ({"mysqlType": {"id": "int"}, "data": [{"id": "x"}]}, "not an integer"),
        ({"mysqlType": {"id": "int"}, "data": [{"id": "99999999999999999999"}]}, "outside the 64-bit range"),
        ({"mysqlType": {"id": "geometry"}, "data": [{"id": "x"}]}, "unsupported column type"),
        ({"mysqlType": {"id": "blob"}, "data": [{"id": "\u20ac"}]}, "ISO-8859-1"),
        ({"mysqlType": {}, "data": [{"id": "1"}]}, "'mysqlType' has null for column 'id'"),
        ({"mysqlType": {"id": "int"}, "data": []}, "non-empty array"),
        ({"type": "UPDATE", "mysqlType": {"id": "int", "x": "int"}, "data": [{"id": "1"}], "old": [{"x": "1"}]},
         "'old' names column 'x'"),
        ({"mysqlType": {"id": "int"}, "data": [{"id": "1"}], "_tidb": {}}, "commitTs"),
        ({"isDdl": True, "type": "CREATE", "sql": "CREATE TABLE t (a INT)", "_tidb": {}}, "commitTs"),
        ({"mysqlType": {"id": "int"}, "data": [{"id": "1"}], "_tidb": {"commitTs": -1}}, "not a uint64"),
    ],
)
def test_malformed_messages_name_what_and_where(fields: dict[str, Any], what: str) -> None:
    with pytest.raises(DecodeError, match=what) as info:
        decode(None, message(**fields), position=POS)
    assert "partition 2 offset 17" in str(info.value)


# ---------------------------------------------------------------------------------------------
# DDL on partition 0 only: the barrier holds every partition's rows of the table, across restarts


def _t_row(ts: int, key: int) -> RowChange:
    return RowChange(ts, "s", "t", Op.INSERT, (Column("id", TypeCode.LONG, KEY | BIN, key),))


ADD = DdlEvent(20, "s", "t", 5, "ALTER TABLE `s`.`t` ADD COLUMN `c` INT")
# (partition, events of one record): rows of s.t on every partition before and after the DDL,
# which only partition 0 carries; partitions 1 and 2 resolve past it before partition 0 is read.
RECORDS: list[tuple[int, list[Event]]] = [
    (1, [_t_row(15, 1)]), (1, [_t_row(25, 2)]), (1, [Resolved(40)]),
    (2, [_t_row(18, 3)]), (2, [_t_row(30, 4)]), (2, [Resolved(40)]),
    (0, [_t_row(12, 5)]), (0, [ADD]), (0, [_t_row(22, 6)]), (0, [Resolved(40)]),
]


def _feed(windower: Windower, records: Iterable[tuple[int, list[Event]]], start: dict[int, int]) -> None:
    offsets = {0: 0, 1: 0, 2: 0}
    for p, events in records:
        if offsets[p] >= start.get(p, 0):
            windower.offer(TP("sim", p), offsets[p], events)
        offsets[p] += 1


def _ts(step: Any) -> list[int]:
    return sorted(r.commit_ts for rows in step.rows.values() for r in rows)


def test_ddl_on_partition_zero_only_is_an_exact_barrier_for_every_partition() -> None:
    w = Windower([TP("sim", 0), TP("sim", 1), TP("sim", 2)], scope_of=ddl_scope)
    _feed(w, RECORDS[:6], {})
    assert w.next_step() is None  # partitions 1 and 2 are at 40, partition 0 unread: nothing is complete
    _feed(w, RECORDS, {1: 3, 2: 3})
    first = w.next_step()
    assert first is not None and first.ddls == (ADD,) and _ts(first) == [12, 15, 18] and first.hi == 21
    w.commit(first)
    second = w.next_step()
    assert second is not None and second.ddls == () and _ts(second) == [22, 25, 30] and second.hi == 40


def test_restart_cursors_around_a_ddl_seen_on_partition_zero_only() -> None:
    w = Windower([TP("sim", 0), TP("sim", 1), TP("sim", 2)], scope_of=ddl_scope)
    _feed(w, RECORDS, {})
    assert w.checkpoint()
    # Nothing applied yet: every partition restarts at its first record (partition 0 at its row before the DDL).
    assert {p.partition: c.offset for p, c in w.progress.cursors.items()} == {0: 0, 1: 0, 2: 0}
    first = w.next_step()
    assert first is not None
    w.commit(first)
    w.checkpoint()
    # The DDL is applied: partition 0 restarts after it, at its next row; 1 and 2 at their rows after 21.
    assert {p.partition: c.offset for p, c in w.progress.cursors.items()} == {0: 2, 1: 1, 2: 1}
    restarted = Windower([TP("sim", 0), TP("sim", 1), TP("sim", 2)], progress=w.progress, scope_of=ddl_scope)
    _feed(restarted, RECORDS, {p.partition: c.offset for p, c in w.progress.cursors.items()})
    again = restarted.next_step()
    assert again is not None and again.ddls == () and _ts(again) == [22, 25, 30]
    # A kill before the first step's commit: re-reading from the first cursors gives the same first step.
    fresh = Windower([TP("sim", 0), TP("sim", 1), TP("sim", 2)], scope_of=ddl_scope)
    _feed(fresh, RECORDS, {})
    replay = fresh.next_step()
    assert replay is not None and replay.ddls == (ADD,) and _ts(replay) == [12, 15, 18]


# ---------------------------------------------------------------------------------------------
# Differential: one simulated upstream in Open, Craft and canal-json gives identical tables


def _records(stream: list[tuple[int, Event]], protocol: str) -> list[tuple[int, bytes | None, bytes]]:
    codec = codec_for(protocol)
    out = []
    for p, ev in stream:
        if isinstance(ev, DdlEvent) and p != 0 and not codec.broadcasts_ddl:
            continue  # TiCDC's canal-json sends DDL to partition 0 only
        out += [(p, k, v) for k, v in codec.encode([ev])]
    return out


def _replicate(records: list[tuple[int, bytes | None, bytes]], protocol: str, partitions: int) -> Any:
    codec = codec_for(protocol)
    options = DecodeOptions(state=CodecState())  # Simple: the run's schema cache
    windower = Windower([TP("sim", p) for p in range(partitions)], scope_of=ddl_scope)
    wh = MemoryWarehouse()
    offsets = [0] * partitions
    for i, (p, key, value) in enumerate(records):
        windower.offer(TP("sim", p), offsets[p], codec.decode(key, value, options=options,
                                                   position=Position("sim", p, offsets[p])))
        offsets[p] += 1
        if i % 29 == 0 or i == len(records) - 1:
            while (step := windower.next_step()) is not None:
                wh.apply(step)
                windower.commit(step)
    return wh.tables(), windower


def _as_stored(row: dict[str, Any], types: dict[str, str]) -> dict[str, Any]:
    return {c: f32(v) if types[c] == "FLOAT" and isinstance(v, float) else v for c, v in row.items()}


@pytest.mark.parametrize("seed", [3, 8])
def test_one_upstream_in_open_craft_and_canal_json_gives_identical_tables(seed: int) -> None:
    sim = Simulation(SimConfig(protocol="open", events=1200, seed=seed, partitions=3, ddl="all"))
    stream = list(sim.events())
    assert any(isinstance(ev, DdlEvent) for _, ev in stream[len(stream) // 3:])  # DDL mid-stream
    tables = {}
    for protocol in CODECS:
        got, windower = _replicate(_records(stream, protocol), protocol, 3)
        assert windower.applied_ts == sim.expected.watermark, protocol
        assert windower.stats.replays_dropped > 0, protocol
        assert compare_tables(sim.expected, got) == [], protocol
        # rows (Open Protocol writes an image's columns sorted by name: compare rows, not column order;
        # a FLOAT as the float32 Delta stores, which Craft delivers exactly and the JSON formats as
        # its shortest text), merge keys and Delta column types
        tables[protocol] = {name: (sorted(json.dumps(_as_stored(r, t.types), sort_keys=True) for r in t.rows),
                                   t.key, t.types) for name, t in got.items()}
    assert tables["canal-json"] == tables["open"] == tables["craft"] == tables["simple"]


# ---------------------------------------------------------------------------------------------
# Any bytes: events or a DecodeError, never another exception


def _valid_messages() -> list[bytes]:
    rows = [_row(Op.INSERT, 5, 1, "a"), _row(Op.UPDATE, 6, 1, "b", old=(1, "a")), _row(Op.DELETE, 7, 1, "b")]
    out = [encode_row(r) for r in rows]
    out.append(codec_for("canal-json").encode_event(Resolved(9))[1])
    out.append(codec_for("canal-json").encode_event(ADD)[1])
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300) | st.builds(
    lambda base, cut, junk: base[:cut] + junk + base[cut:],
    st.sampled_from(_valid_messages()), st.integers(0, 400), st.binary(max_size=4)))
def test_any_bytes_give_events_or_a_decode_error(data: bytes) -> None:
    try:
        events = decode(None, data, position=POS)
    except DecodeError as exc:
        assert "partition 2 offset 17" in str(exc)
        return
    assert all(isinstance(e, RowChange | DdlEvent | Resolved) for e in events)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.text(max_size=8)
    | st.sampled_from(["INSERT", "UPDATE", "DELETE", "TIDB_WATERMARK", "int", "blob", "-0", "1.5"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["id", "v", "commitTs", "watermarkTs", "data", "old", "type"]) | st.text(max_size=3),
        inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({}, optional={
    "isDdl": st.booleans() | JSON_VALUES, "type": st.sampled_from(["INSERT", "UPDATE", "DELETE", "TIDB_WATERMARK",
                                                                   "QUERY"]) | JSON_VALUES,
    "sql": st.sampled_from(["CREATE TABLE t (a INT)", ""]) | JSON_VALUES, "pkNames": JSON_VALUES,
    "mysqlType": st.dictionaries(st.sampled_from(["id", "v"]), st.sampled_from(["int", "blob", "double", "bit"])
                                 | JSON_VALUES, max_size=2) | JSON_VALUES,
    "sqlType": JSON_VALUES, "data": JSON_VALUES, "old": JSON_VALUES,
    "_tidb": st.fixed_dictionaries({}, optional={"commitTs": st.integers(-1, 2**64) | JSON_VALUES,
                                                 "watermarkTs": JSON_VALUES, "onlyHandleKey": JSON_VALUES,
                                                 "claimCheckLocation": JSON_VALUES}) | JSON_VALUES}))
def test_any_json_shape_gives_events_or_a_decode_error(obj: dict[str, Any]) -> None:
    with contextlib.suppress(DecodeError):
        decode(None, json.dumps(obj).encode())


def test_the_simulator_puts_canal_json_ddl_on_partition_zero_only_of_the_same_upstream() -> None:
    config = {"events": 400, "seed": 5, "partitions": 3, "ddl": "all"}
    open_sim = Simulation(SimConfig(protocol="open", **config))  # type: ignore[arg-type]
    canal_sim = Simulation(SimConfig(protocol="canal-json", **config))  # type: ignore[arg-type]
    broadcast, canal = list(open_sim.events()), list(canal_sim.events())
    assert canal == [(p, ev) for p, ev in broadcast if p == 0 or not isinstance(ev, DdlEvent)]
    assert {p for p, ev in canal if isinstance(ev, DdlEvent)} == {0}
    assert open_sim.expected.tables == canal_sim.expected.tables
    assert open_sim.expected.schemas == canal_sim.expected.schemas
    assert open_sim.expected.watermark == canal_sim.expected.watermark
    records = list(Simulation(SimConfig(protocol="canal-json", **config)).messages())  # type: ignore[arg-type]
    assert all(key is None for _, key, _ in records)
    ddl_partitions = {p for p, _, value in records if json.loads(value)["isDdl"]}
    assert ddl_partitions == {0}


# ---------------------------------------------------------------------------------------------
# The CLI: simulate --protocol canal-json, decode --protocol canal-json


def test_cli_simulates_and_decodes_canal_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "arch"
    assert main(["simulate", "--protocol", "canal-json", "--out", str(out), "--events", "150", "--seed", "4",
                 "--topic", "cdc"]) == 0
    assert "simulated 150 row changes" in capsys.readouterr().out
    records = list(read_archive(out))
    assert {r.protocol for r in records} == {"canal-json"} and all(r.key is None for r in records)
    assert {r.partition for r in records if r.value and json.loads(r.value)["isDdl"]} == {0}
    ddl = next(r for r in records if r.value and json.loads(r.value)["isDdl"])
    row = next(r for r in records if r.value and json.loads(r.value)["type"] == "INSERT")
    for record, kind in ((ddl, "ddl"), (row, "row")):
        path = tmp_path / f"{kind}.json"
        path.write_bytes(record.value or b"")
        assert main(["decode", "--protocol", "canal-json", "--value", str(path)]) == 0
        [line] = capsys.readouterr().out.splitlines()
        assert json.loads(line)["kind"] == kind
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"isDdl":false,"type":"INSERT","mysqlType":{"id":"int"},"data":[{"id":"1"}]}')
    assert main(["decode", "--protocol", "canal-json", "--value", str(bad)]) != 0
    assert "enable-tidb-extension=true" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The table of TiCDC's own encoder tests (tiflow `NewLargeEvent4Test`): its insert as canal-json


def _latin1(text: str, pad: int = 0) -> str:
    """What TiCDC writes for a binary column holding `text`'s UTF-8 bytes (zero-padded to `pad`)."""
    return text.encode().ljust(pad, b"\x00").decode("latin-1")


# column -> (mysqlType, sqlType, canal string, decoded value)
LARGE: dict[str, tuple[str, int, str | None, Any]] = {
    "t": ("tinyint", -6, "127", 127),
    "tu1": ("tinyint unsigned", -6, "127", 127),
    "tu2": ("tinyint unsigned", 5, "128", 128),
    "tu4": ("tinyint unsigned", -6, None, None),
    "su3": ("smallint unsigned", 4, "32768", 32768),
    "mu3": ("mediumint unsigned", 4, "8388608", 8388608),
    "iu3": ("int unsigned", -5, "2147483648", 2147483648),
    "bi": ("bigint", -5, "9223372036854775807", 2**63 - 1),
    "biu3": ("bigint unsigned", 3, "9223372036854775808", 2**63),
    "floatT": ("float", 7, "3.14", 3.14),
    "doubleT": ("double", 8, "2.71", 2.71),
    "decimalT": ("decimal", 3, "2333.654321", Decimal("2333.654321")),
    "floatTu": ("float unsigned", 7, "3.14", 3.14),
    "decimalTu2": ("decimal unsigned", 3, "1.7371", Decimal("1.7371")),
    "varcharT": ("varchar", 12, "测试Varchar", "测试Varchar"),
    "charT": ("char", 1, "测试String", "测试String"),
    "binaryT": ("binary", 2004, _latin1("测试Binary", 255), "测试Binary".encode().ljust(255, b"\x00")),
    "varbinaryT": ("varbinary", 2004, _latin1("测试varbinary"), "测试varbinary".encode()),
    "tinytextT": ("tinytext", 2005, "测试Tinytext", "测试Tinytext"),
    "longtextT": ("longtext", 2005, "测试longtext", "测试longtext"),
    "tinyblobT": ("tinyblob", 2004, _latin1("测试tinyblob"), "测试tinyblob".encode()),
    "blobT": ("blob", 2004, _latin1("测试blob"), "测试blob".encode()),
    "dateT": ("date", 91, "2020-02-20", dt.date(2020, 2, 20)),
    "datetimeT": ("datetime", 93, "2020-02-20 02:20:20", dt.datetime(2020, 2, 20, 2, 20, 20)),
    "timestampT": ("timestamp", 93, "2020-02-20 10:20:20", dt.datetime(2020, 2, 20, 10, 20, 20, tzinfo=dt.UTC)),
    "timestampT2": ("timestamp", 93, "2024-03-11 08:51:01.461270", dt.datetime(2024, 3, 11, 8, 51, 1, 461270,
                                                                              tzinfo=dt.UTC)),
    "timeT": ("time", 92, "02:20:20", "02:20:20"),
    "yearT": ("year", 12, "2020", 2020),
    "enumT": ("enum", 4, "1", 1),
    "setT": ("set", -7, "2", 2),
    "bitT": ("bit", -7, "65", 65),
    "vectorT": ("vector", 12, "[1,2,3,4,5]", "[1,2,3,4,5]"),
    "jsonT": ("json", 12, '{"key1": "value1"}', '{"key1": "value1"}'),
}


@pytest.mark.parametrize("op", ["INSERT", "UPDATE", "DELETE"])
def test_ticdc_encoder_test_table_round_trips(op: str) -> None:
    image = {n: v for n, (_, _, v, _) in LARGE.items()}
    value = message(table="t", type=op, pkNames=["tu1"], mysqlType={n: m for n, (m, _, _, _) in LARGE.items()},
                    sqlType={n: s for n, (_, s, _, _) in LARGE.items()}, data=[image],
                    old=[image] if op == "UPDATE" else None)
    [row] = decode(None, value)
    assert isinstance(row, RowChange) and row.op is Op(op.lower())
    got = {c.name: c.value for c in row.image}
    assert got == {n: d for n, (_, _, _, d) in LARGE.items()}
    assert {c.name for c in row.image if c.is_handle_key} == {"tu1"}
    again = json.loads(encode_row(row))
    # The encoder writes fractional seconds without trailing zeros (as the Open Protocol encoder): same value.
    assert again["data"] == [image | {"timestampT2": "2024-03-11 08:51:01.46127"}]
    assert again["type"] == op and again["pkNames"] == ["tu1"]
    assert again["sqlType"] == {n: s for n, (_, s, _, _) in LARGE.items()}  # unsigned promotions included
    assert again["mysqlType"] == {n: m for n, (m, _, _, _) in LARGE.items()}


# -- decode speed without changed results: type shapes shared across messages, rows by plan ----------


def test_shared_type_shapes_give_the_same_rows_in_any_field_order() -> None:
    types = {"id": "int", "u": "bigint unsigned", "b": "varbinary", "d": "decimal", "t": "datetime"}
    data = [{"id": "1", "u": "18446744073709551615", "b": "\u00ff\u0000", "d": "-1.50", "t": "2000-01-02 03:04:05"}]
    first = decode(None, message(mysqlType=types, sqlType={"id": 4, "u": 3, "b": 2004, "d": 3, "t": 93}, data=data))
    again = decode(None, message(mysqlType=types, sqlType={"id": 4, "u": 3, "b": 2004, "d": 3, "t": 93}, data=data))
    shuffled = dict(reversed(list(types.items())))  # TiCDC writes mysqlType from a Go map: any order
    java = {"id": 4, "u": 3, "b": 2004, "d": 3, "t": 93}
    third = decode(None, message(mysqlType=shuffled, sqlType=java, data=data))
    assert first == again == third
    assert cols(first[0]) == {"id": 1, "u": (1 << 64) - 1, "b": b"\xff\x00", "d": Decimal("-1.50"),
                              "t": dt.datetime(2000, 1, 2, 3, 4, 5)}
    # the same names then a value that does not convert: the column is still named
    with pytest.raises(DecodeError, match=r"outside the 64-bit range at field 'data' row 0 column 'u'"):
        decode(None, message(mysqlType=types, sqlType={"id": 4, "u": 3, "b": 2004, "d": 3, "t": 93},
                             data=[data[0] | {"u": "18446744073709551616"}]))
    with pytest.raises(DecodeError, match=r"strings or null at field 'data' row 0 column 'id'"):
        decode(None, message(mysqlType=types, data=[data[0] | {"id": 1}]))
    # equal as dict keys, not as JSON: a shape learnt from sqlType 4 never admits 4.0 or true
    decode(None, message(mysqlType={"id": "int"}, sqlType={"id": 4}, data=[{"id": "1"}]))
    for bad in ("4.0", "true"):
        with pytest.raises(DecodeError, match="not a Java SQL type"):
            decode(None, message(mysqlType={"id": "int"}, data=[{"id": "1"}]).replace(
                b'"sqlType": null', b'"sqlType": {"id": ' + bad.encode() + b"}"))


@pytest.mark.parametrize("text, value", [("-0", 0), ("0", 0), ("007", 7), ("18446744073709551615", (1 << 64) - 1)])
def test_unsigned_integer_forms(text: str, value: int) -> None:
    (ev,) = decode(None, message(mysqlType={"id": "int unsigned"}, data=[{"id": text}]))
    assert cols(ev) == {"id": value}


@pytest.mark.parametrize("text", ["", "-", "+1", " 1", "1_000", "\u0661", "1.0", "--1", "-1"])
def test_integer_forms_refused(text: str) -> None:
    with pytest.raises(DecodeError, match=r"not an integer|outside the 64-bit range"):
        decode(None, message(mysqlType={"id": "int unsigned"}, data=[{"id": text}]))
    if text != "-1":
        with pytest.raises(DecodeError, match="not an integer"):
            decode(None, message(mysqlType={"id": "int"}, data=[{"id": text}]))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=':,[ \t\r\n-0.e9a"x', max_size=30))
def test_negative_zero_scan_is_the_regex_it_replaces(text: str) -> None:
    import re

    from replicator.codec.jsontext import _has_negative_zero

    assert _has_negative_zero(text) == bool(re.search(r"[:,\[][ \t\r\n]*-0(?![0-9.eE])", text))
