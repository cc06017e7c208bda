"""TiCDC's Simple protocol (JSON encoding) and its row checksums.

Vectors: the messages of TiCDC's docs (ticdc/ticdc-simple-protocol.md: the TableSchema definition as
a BOOTSTRAP, INSERT / UPDATE / DELETE of `simple.user` at schema version 447984074911121426,
WATERMARK, a RENAME DDL with both schemas); every column type through the codec contract
(tests/unit/test_codec_contract.py runs every codec, Simple included). Checksums: byte layouts
written out from tiflow's `buildChecksumBytes` (pkg/sink/codec/common/verify_checksum.go).
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.cli import main
from replicator.codec import codec_for, simple
from replicator.codec.checksum import ChecksumError, column_bytes, row_checksum, timestamp_utc_text
from replicator.codec.simple import SchemaNotArrivedError
from replicator.codec.state import CodecState
from replicator.codec.values import DecodeOptions
from replicator.delta.ddl.scope import ddl_scope
from replicator.engine.window import Windower
from replicator.errors import DecodeError
from replicator.events import TP, Column, DdlEvent, Event, Flag, Op, Position, Record, Resolved, RowChange, TypeCode
from replicator.formats.archive import read_archive
from replicator.sim.model import SimConfig
from replicator.sim.simcheck import compare_tables
from replicator.sim.stream import Simulation
from tests.unit.test_loop import Clock, FakeApplier, FakeSource, loop_of
from tests.unit.test_simulate import MemoryWarehouse

POS = Position("cdc", 2, 17)
VERSION = 447984074911121426


def _col(name: str, mysql_type: str, nullable: bool, length: int, charset: str = "binary") -> dict[str, Any]:
    return {"name": name, "dataType": {"mysqlType": mysql_type, "charset": charset,
                                       "collate": "binary" if charset == "binary" else "utf8mb4_bin",
                                       "length": length}, "nullable": nullable, "default": None}


def user_schema(table: str = "user") -> dict[str, Any]:
    """The docs' TableSchema definition."""
    return {"schema": "simple", "table": table, "tableID": 148, "version": VERSION,
            "columns": [_col("id", "int", False, 11), _col("name", "varchar", True, 255, "utf8mb4"),
                        _col("age", "int", True, 11), _col("score", "float", True, 12)],
            "indexes": [{"name": "primary", "unique": True, "primary": True, "nullable": False, "columns": ["id"]}]}


def msg(**fields: Any) -> bytes:
    return json.dumps({"version": 1, **fields}).encode()


BOOT = msg(type="BOOTSTRAP", commitTs=0, buildTs=1708924603278, tableSchema=user_schema())
ROW = {"age": "25", "id": "1", "name": "John Doe", "score": "90.5"}
ROW2 = {**ROW, "score": "95"}
DML = {"database": "simple", "table": "user", "tableID": 148, "schemaVersion": VERSION}
INSERT = msg(**DML, type="INSERT", commitTs=447984084414103554, buildTs=1708923662983, data=ROW)
UPDATE = msg(**DML, type="UPDATE", commitTs=447984099186180098, buildTs=1708923719184, data=ROW2, old=ROW)
DELETE = msg(**DML, type="DELETE", commitTs=447984114259722243, buildTs=1708923776484, old=ROW2)
WATERMARK = msg(type="WATERMARK", commitTs=447984124732375041, buildTs=1708923816911)

KEY = int(Flag.PRIMARY_KEY | Flag.HANDLE_KEY | Flag.BINARY)
NUL = int(Flag.NULLABLE)


def user(score: float) -> tuple[Column, ...]:
    return (Column("id", TypeCode.LONG, KEY, 1), Column("name", TypeCode.VARCHAR, NUL, "John Doe"),
            Column("age", TypeCode.LONG, NUL | Flag.BINARY, 25),
            Column("score", TypeCode.FLOAT, NUL | Flag.BINARY, score))


def decoder() -> tuple[DecodeOptions, CodecState]:
    state = CodecState()
    return DecodeOptions(state=state), state


def test_documented_bootstrap_insert_update_delete_and_watermark() -> None:
    opts, state = decoder()
    assert simple.decode(None, BOOT, options=opts) == []  # a BOOTSTRAP is no event: it teaches the schema
    assert list(state.schemas) == [("simple", "user", VERSION)]
    assert simple.decode(None, INSERT, options=opts) == [
        RowChange(447984084414103554, "simple", "user", Op.INSERT, user(90.5))]
    assert simple.decode(None, UPDATE, options=opts) == [
        RowChange(447984099186180098, "simple", "user", Op.UPDATE, user(95.0), user(90.5))]
    assert simple.decode(None, DELETE, options=opts) == [
        RowChange(447984114259722243, "simple", "user", Op.DELETE, (), user(95.0))]
    assert simple.decode(None, WATERMARK, options=opts) == [Resolved(447984124732375041)]


def test_a_row_whose_schema_has_not_arrived_is_refused_never_guessed() -> None:
    opts, _ = decoder()
    with pytest.raises(SchemaNotArrivedError, match=r"simple\.user version 447984074911121426 has not arrived.*"
                                                    r"partition 2 offset 17"):
        simple.decode(None, INSERT, options=opts, position=POS)
    other = copy.deepcopy(user_schema())
    other["version"] = VERSION - 1  # another version of the same table does not do
    simple.decode(None, msg(type="BOOTSTRAP", commitTs=0, tableSchema=other), options=opts)
    with pytest.raises(SchemaNotArrivedError):
        simple.decode(None, INSERT, options=opts)
    # without a per-run state nothing is remembered between messages
    simple.decode(None, BOOT)
    with pytest.raises(SchemaNotArrivedError):
        simple.decode(None, INSERT)


def test_a_ddl_carries_its_schemas_and_names_its_table_after_it() -> None:
    opts, state = decoder()
    new = user_schema("new_user")
    ddl = msg(type="RENAME", sql="RENAME TABLE `simple`.`user` TO `simple`.`new_user`", commitTs=447984094000000000,
              buildTs=1, tableSchema=new, preTableSchema=user_schema())
    assert simple.decode(None, ddl, options=opts) == [
        DdlEvent(447984094000000000, "simple", "new_user", 14, "RENAME TABLE `simple`.`user` TO `simple`.`new_user`")]
    assert set(state.schemas) == {("simple", "user", VERSION), ("simple", "new_user", VERSION)}
    assert simple.decode(None, INSERT, options=opts)[0].columns == user(90.5)


def test_key_flags_from_indexes_and_binary_values_as_base64() -> None:
    schema = {"schema": "s", "table": "t", "tableID": 7, "version": 3, "columns": [
        _col("k", "varbinary", False, 16), _col("u", "bigint", True, 20), _col("m", "varchar", True, 8, "utf8mb4"),
        {**_col("y", "year", True, 4)}, _col("ts", "timestamp", True, 19)],
        "indexes": [{"name": "uk", "unique": True, "primary": False, "nullable": False, "columns": ["k"]},
                    {"name": "i", "unique": False, "primary": False, "nullable": True, "columns": ["m"]}]}
    schema["columns"][1]["dataType"]["unsigned"] = True
    opts, _ = decoder()
    simple.decode(None, msg(type="BOOTSTRAP", commitTs=0, tableSchema=schema), options=opts)
    row = {"k": "AP8=", "u": "18446744073709551615", "m": None, "y": "2024",
           "ts": {"location": "Asia/Shanghai", "value": "2024-01-01 08:00:00.5"}}
    [ev] = simple.decode(None, msg(database="s", table="t", tableID=9, type="INSERT", commitTs=5, schemaVersion=3,
                                   data=row), options=opts)
    assert isinstance(ev, RowChange)
    k, u, m, y, ts = ev.columns
    assert (k.value, k.flags) == (b"\x00\xff", Flag.UNIQUE_KEY | Flag.HANDLE_KEY | Flag.BINARY)
    assert (u.value, u.flags) == (2**64 - 1, Flag.UNSIGNED | Flag.NULLABLE | Flag.BINARY)
    assert (m.value, m.flags) == (None, Flag.MULTIPLE_KEY | Flag.NULLABLE)
    assert y.flags & Flag.UNSIGNED and y.value == 2024
    assert ts.value == dt.datetime(2024, 1, 1, 0, 0, 0, 500000, tzinfo=dt.UTC)  # the instant, from its location
    assert ev.partition_id == 9  # tableID != the schema's: a partition of a partitioned table


@pytest.mark.parametrize(("fields", "what"), [
    ({"version": 2, "type": "WATERMARK", "commitTs": 1}, "version is 2"),
    ({"type": "WATERMARK"}, "'commitTs' is null"),
    ({"type": "NOPE", "commitTs": 1}, "not a Simple type"),
    ({"type": "BOOTSTRAP", "tableSchema": {"schema": "s", "table": "t", "columns": [
        {"name": "a", "dataType": {"mysqlType": "widget"}}]}}, "unsupported mysqlType 'widget'"),
    ({"type": "QUERY", "sql": "", "commitTs": 1}, "classify"),
])
def test_malformed_messages_name_what_and_where(fields: dict[str, Any], what: str) -> None:
    with pytest.raises(DecodeError, match=what):
        simple.decode(None, json.dumps({"version": 1, **fields}).encode(), position=POS)


def test_a_value_that_does_not_fit_its_schema_is_refused() -> None:
    opts, _ = decoder()
    simple.decode(None, BOOT, options=opts)
    for data, what in (({**ROW, "id": "x"}, "not an integer"), ({**ROW, "zz": "1"}, "'zz' is not in simple.user"),
                       ({**ROW, "age": 25}, "Simple JSON values are strings")):
        with pytest.raises(DecodeError, match=what):
            simple.decode(None, msg(**DML, type="INSERT", commitTs=1, data=data), options=opts)


# ---------------------------------------------------------------------------------------------
# Checksums: TiCDC's CRC32 (tiflow verify_checksum.go), byte layouts written out here


def test_checksum_byte_layout_per_type() -> None:
    assert column_bytes(TypeCode.LONG, 1) == b"\x01" + b"\x00" * 7  # integers: uint64 little-endian
    assert column_bytes(TypeCode.TINY, -1) == b"\xff" * 8  # two's complement
    assert column_bytes(TypeCode.DOUBLE, 1.0) == struct.pack("<d", 1.0)
    assert column_bytes(TypeCode.DOUBLE, float("nan")) == b"\x00" * 8  # NaN / Inf as 0
    assert column_bytes(TypeCode.SET, 5) == b"\x05" + b"\x00" * 7
    assert column_bytes(TypeCode.VARCHAR, "é") == b"\x02\x00\x00\x00\xc3\xa9"  # uint32 length, then the bytes
    assert column_bytes(TypeCode.BLOB, b"\x00\xff") == b"\x02\x00\x00\x00\x00\xff"
    assert column_bytes(TypeCode.NEWDECIMAL, "1.50") == b"\x04\x00\x00\x001.50"  # the text as sent
    assert column_bytes(TypeCode.VECTOR, "[1,2]") == b"\x02\x00\x00\x00" + struct.pack("<ff", 1, 2)
    assert column_bytes(TypeCode.LONG, None) == column_bytes(TypeCode.GEOMETRY, "x") == b""


def test_checksum_of_the_documented_row() -> None:
    """The docs' `simple.user` row (1, 'John Doe', 25, 90.5): crc32.Update over each column in order."""
    layout = (b"\x01" + b"\x00" * 7 + b"\x08\x00\x00\x00John Doe" + b"\x19" + b"\x00" * 7
              + struct.pack("<d", 90.5))
    expected = zlib.crc32(layout)
    assert row_checksum([(TypeCode.LONG, 1), (TypeCode.VARCHAR, "John Doe"), (TypeCode.LONG, 25),
                         (TypeCode.FLOAT, 90.5)]) == expected == 0xB5A20908
    # NULL adds nothing: the same row with a NULL column between has the same checksum
    assert row_checksum([(TypeCode.LONG, 1), (TypeCode.VARCHAR, "John Doe"), (TypeCode.JSON, None),
                         (TypeCode.LONG, 25), (TypeCode.FLOAT, 90.5)]) == expected


def test_timestamp_checksum_text_is_utc_with_its_fraction() -> None:
    assert timestamp_utc_text("2024-01-01 08:00:00.50", "Asia/Shanghai") == "2024-01-01 00:00:00.50"
    assert timestamp_utc_text("2024-01-01 00:00:00", "UTC") == "2024-01-01 00:00:00"
    assert timestamp_utc_text("0000-00-00 00:00:00", "UTC") == "0000-00-00 00:00:00"


def _with_checksum(value: bytes, **checksum: Any) -> bytes:
    obj = json.loads(value)
    obj["checksum"] = {"version": 0, "corrupted": False, **checksum}
    return json.dumps(obj).encode()


def test_checksums_are_verified_and_a_mismatch_is_a_checksum_error_with_its_position() -> None:
    crc90, crc95 = (row_checksum([(TypeCode.LONG, 1), (TypeCode.VARCHAR, "John Doe"), (TypeCode.LONG, 25),
                                  (TypeCode.FLOAT, s)]) for s in (90.5, 95.0))
    opts, state = decoder()
    simple.decode(None, BOOT, options=opts)
    simple.decode(None, _with_checksum(UPDATE, current=crc95, previous=crc90), options=opts)
    simple.decode(None, _with_checksum(INSERT, current=crc90, previous=0), options=opts)  # 0: none sent
    assert (state.checksums_verified, state.checksum_mismatches) == (3, 0)
    with pytest.raises(ChecksumError, match=r"old row of simple\.user has CRC32 .* checksum\.previous is 1: the row "
                                            r"is corrupt .*partition 2 offset 17"):
        simple.decode(None, _with_checksum(UPDATE, current=crc95, previous=1), options=opts, position=POS)
    with pytest.raises(ChecksumError, match="corrupted"):
        simple.decode(None, _with_checksum(INSERT, corrupted=True), options=opts)
    assert state.checksum_mismatches == 2


def test_the_encoder_writes_the_checksums_the_decoder_verifies() -> None:
    rows = [RowChange(5, "s", "t", Op.INSERT, user(90.5)), RowChange(6, "s", "t", Op.UPDATE, user(95.0), user(90.5)),
            RowChange(7, "s", "t", Op.DELETE, (), user(95.0))]
    opts, state = decoder()
    values = simple.encode_rows(rows, checksum=True)
    assert [e for v in values for e in simple.decode(None, v, options=opts)] == rows
    assert (state.checksums_verified, state.checksum_mismatches) == (4, 0)
    tampered = values[-1].replace(b'"95"', b'"96"')
    with pytest.raises(ChecksumError):
        simple.decode(None, tampered, options=opts)


def _loop_source(clock: Clock, values: list[bytes]) -> FakeSource:
    opts = DecodeOptions(state=CodecState())

    class SimpleSource(FakeSource):
        def decode(self, rec: Record) -> list[Event]:
            return simple.decode(None, rec.value, options=opts, position=Position("cdc", rec.partition, rec.offset))

    return SimpleSource(clock, {0: values})


@pytest.mark.parametrize("on_error", ["stop", "skip"])
def test_a_checksum_mismatch_is_dead_lettered_with_its_position(on_error: str) -> None:
    ok = [RowChange(10, "s", "t", Op.INSERT, user(90.5))]
    bad = [RowChange(20, "s", "t", Op.UPDATE, user(95.0), user(90.5))]
    values = [*simple.encode_rows(ok, checksum=True), simple.encode_resolved(15),
              *simple.encode_rows(bad, checksum=True), simple.encode_resolved(25)]
    assert [json.loads(v)["type"] for v in values] == ["BOOTSTRAP", "INSERT", "WATERMARK", "BOOTSTRAP", "UPDATE",
                                                       "WATERMARK"]
    values[4] = values[4].replace(b'"95"', b'"96"', 1)  # offset 4: the update, corrupted in flight
    clock = Clock()
    source, applier = _loop_source(clock, values), FakeApplier()
    loop = loop_of(source, applier, clock, until_caught_up=True, on_error=on_error)
    if on_error == "stop":
        with pytest.raises(ChecksumError, match="partition 0 offset 4"):
            loop.run()
    else:
        loop.run()
    [(rec, reason)] = applier.dead
    assert (rec.partition, rec.offset) == (0, 4) and reason.startswith("ChecksumError: new row of s.t")
    assert applier.rows() == [(10, 1)]  # never applied


# ---------------------------------------------------------------------------------------------
# Differential: one simulated upstream in Open and Simple gives identical tables


def _replicate(protocol: str, stream: list[tuple[int, Event]], partitions: int) -> Any:
    codec = codec_for(protocol)
    opts = DecodeOptions(state=CodecState())
    windower = Windower([TP("sim", p) for p in range(partitions)], scope_of=ddl_scope)
    wh = MemoryWarehouse()
    offsets = [0] * partitions
    records = [(p, k, v) for p, ev in stream for k, v in codec.encode([ev])]
    for i, (p, key, value) in enumerate(records):
        windower.offer(TP("sim", p), offsets[p],
                       codec.decode(key, value, options=opts, position=Position("sim", p, offsets[p])))
        offsets[p] += 1
        if i % 29 == 0 or i == len(records) - 1:
            while (step := windower.next_step()) is not None:
                wh.apply(step)
                windower.commit(step)
    return wh.tables(), windower


def test_one_upstream_in_open_and_simple_gives_identical_tables() -> None:
    sim = Simulation(SimConfig(protocol="open", events=800, seed=5, partitions=3, ddl="all"))
    stream = list(sim.events())
    tables = {}
    for protocol in ("open", "simple"):
        got, windower = _replicate(protocol, stream, 3)
        assert windower.applied_ts == sim.expected.watermark, protocol
        assert compare_tables(sim.expected, got) == [], protocol
        tables[protocol] = {name: (sorted(json.dumps(r, sort_keys=True, default=str) for r in t.rows), t.key, t.types)
                            for name, t in got.items()}
    assert tables["simple"] == tables["open"]


# ---------------------------------------------------------------------------------------------
# Any bytes: events or a DecodeError, never another exception


def _valid() -> list[bytes]:
    return [BOOT, INSERT, UPDATE, DELETE, WATERMARK, _with_checksum(UPDATE, current=1, previous=2)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300) | st.builds(
    lambda base, cut, junk: base[:cut] + junk + base[cut:],
    st.sampled_from(_valid()), st.integers(0, 900), st.binary(max_size=4)))
def test_any_bytes_give_events_or_a_decode_error(data: bytes) -> None:
    opts, _ = decoder()
    simple.decode(None, BOOT, options=opts)
    try:
        events = simple.decode(None, data, options=opts, position=POS)
    except DecodeError as exc:
        assert "partition 2 offset 17" in str(exc)
        return
    assert all(isinstance(e, RowChange | DdlEvent | Resolved) for e in events)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.text(max_size=6)
    | st.sampled_from(["INSERT", "BOOTSTRAP", "WATERMARK", "int", "varbinary", "timestamp", "1", "AP8="]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["name", "dataType", "mysqlType", "columns", "indexes", "value", "location", "id"])
        | st.text(max_size=3), inner, max_size=4),
    max_leaves=14,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({"version": st.just(1) | JSON}, optional={
    "type": st.sampled_from(["INSERT", "UPDATE", "DELETE", "BOOTSTRAP", "WATERMARK", "CREATE"]) | JSON,
    "database": st.just("simple") | JSON, "table": st.just("user") | JSON, "schemaVersion": st.just(VERSION) | JSON,
    "commitTs": st.integers(-1, 2**64) | JSON, "tableSchema": JSON, "preTableSchema": JSON, "sql": JSON,
    "data": JSON, "old": JSON, "checksum": JSON, "tableID": JSON, "handleKeyOnly": JSON,
    "claimCheckLocation": JSON}))
def test_any_json_shape_gives_events_or_a_decode_error(obj: dict[str, Any]) -> None:
    opts, _ = decoder()
    simple.decode(None, BOOT, options=opts)
    with contextlib.suppress(DecodeError):
        simple.decode(None, json.dumps(obj).encode(), options=opts)


# ---------------------------------------------------------------------------------------------
# The CLI: simulate --protocol simple, decode --protocol simple [--schema]


def test_cli_simulates_and_decodes_simple(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "arch"
    assert main(["simulate", "--protocol", "simple", "--out", str(out), "--events", "120", "--seed", "4",
                 "--topic", "cdc"]) == 0
    assert "simulated 120 row changes" in capsys.readouterr().out
    records = list(read_archive(out))
    assert {r.protocol for r in records} == {"simple"} and all(r.key is None for r in records)
    types = [json.loads(r.value or b"{}")["type"] for r in records]
    assert {"BOOTSTRAP", "WATERMARK", "INSERT"} <= set(types)
    row = next(r for r in records if r.value and json.loads(r.value)["type"] == "INSERT")
    boot = next(r for r in records if r.value and json.loads(r.value)["type"] == "BOOTSTRAP"
                and json.loads(r.value)["tableSchema"]["version"] == json.loads(row.value or b"")["schemaVersion"]
                and json.loads(r.value)["tableSchema"]["table"] == json.loads(row.value or b"")["table"])
    (tmp_path / "row.json").write_bytes(row.value or b"")
    (tmp_path / "boot.json").write_bytes(boot.value or b"")
    assert main(["decode", "--protocol", "simple", "--value", str(tmp_path / "row.json")]) != 0
    assert "has not arrived" in capsys.readouterr().err
    assert main(["decode", "--protocol", "simple", "--schema", str(tmp_path / "boot.json"),
                 "--value", str(tmp_path / "row.json")]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert json.loads(line)["kind"] == "row"


# ---------------------------------------------------------------------------------------------
# Restart: the schemas read so far are kept in state.json and restored, so a run starting after
# its table's BOOTSTRAP decodes the rows


def test_schemas_kept_in_state_json_let_a_restart_decode_rows_whose_bootstrap_lies_behind_it() -> None:
    from replicator.warehouse import State

    opts, state = decoder()
    simple.decode(None, BOOT, options=opts)
    saved = State(codec_schemas=list(state.schema_objects.values()))
    text = saved.model_dump_json()
    assert json.loads(text)["codec_schemas"] == [user_schema()]
    assert "codec_schemas" not in json.loads(State().model_dump_json())  # other protocols: the same shape as before
    loaded = State.model_validate_json(text)
    restarted = CodecState()
    simple.restore_schemas(restarted, loaded.codec_schemas)
    assert simple.decode(None, INSERT, options=DecodeOptions(state=restarted))[0].columns == user(90.5)
