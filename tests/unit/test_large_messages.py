"""TiCDC large messages (issue 30 part 4): value compression, claim-check envelopes and references,
handle-key-only rows, and their settings, for the Open Protocol, canal-json and Simple.

Vectors are built by hand from the formats TiCDC uses (tiflow pkg/compression/compress.go):
- snappy = klauspost/compress/snappy `Encode`, the raw *block* format: uvarint decoded length, then
  elements; a literal of n <= 60 bytes is the tag byte (n-1)<<2 followed by the bytes.
- lz4 = pierrec/lz4/v4 `NewWriter`, the *frame* format with its defaults (4 MiB blocks,
  independent blocks, content checksum): magic 04 22 4D 18, FLG 0x64, BD 0x70, header checksum
  0xB9; a block whose size has the high bit set is stored uncompressed; end mark 0; then the
  content's xxh32 (seed 0), little-endian: 0x02CC5D05 for no bytes, 0xFB0077F9 for b"hello".
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.cli import build_parser
from replicator.cli.common import settings_from
from replicator.cli.run import run_options
from replicator.cli.settings import DecodeCommand, options
from replicator.codec import canal_json, codec_for, simple
from replicator.codec.large import (
    claim_check_envelope,
    claim_check_name,
    compress,
    decompress,
    parse_claim_check,
)
from replicator.codec.limits import MessageTooLargeError
from replicator.codec.open_protocol import decode, encode_ddl, encode_resolved, encode_rows
from replicator.codec.state import CodecState
from replicator.codec.values import DecodeOptions
from replicator.errors import ClaimCheckError, ConfigError, DecodeError, UnsupportedError
from replicator.events import Column, DdlEvent, Event, Flag, Op, Position, Resolved, RowChange, TypeCode
from replicator.sim.simulate import SimConfig, Simulation
from replicator.sources.claimcheck import ClaimChecks, storage_reader
from replicator.sources.executor import check_row

SNAPPY_HELLO = bytes.fromhex("05" "10" "68656c6c6f")
LZ4_EMPTY = bytes.fromhex("04224d18" "6470b9" "00000000" "055dcc02")
LZ4_HELLO = bytes.fromhex("04224d18" "6470b9" "05000080" "68656c6c6f" "00000000" "f97700fb")
POS = Position("cdc", 2, 41)
PK = int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY)


pytestmark = pytest.mark.usefixtures("no_replicator_env")  # settings read REPLICATOR_* from the environment


def row(ts: int = 415508878783938562, ident: int = 1, text: str = "x", op: Op = Op.INSERT) -> RowChange:
    cols = (Column("id", int(TypeCode.LONG), PK, ident), Column("v", int(TypeCode.VARCHAR), 0, text))
    if op is Op.DELETE:
        return RowChange(ts, "test", "t1", op, old_columns=cols)
    return RowChange(ts, "test", "t1", op, columns=cols)


# -- compression ------------------------------------------------------------------------------


def test_snappy_is_the_block_format() -> None:
    assert decompress("snappy", SNAPPY_HELLO) == b"hello"
    data = b"large message " * 100
    packed = compress("snappy", data)
    assert packed[:2] == bytes([0x80 | (1400 & 0x7F), 1400 >> 7])  # uvarint(1400): a block, not the sNaPpY stream
    assert not packed.startswith(b"\xff\x06\x00\x00sNaPpY")
    assert len(packed) < len(data) and decompress("snappy", packed) == data


def test_lz4_is_the_frame_format_pierrec_writes() -> None:
    assert decompress("lz4", LZ4_HELLO) == b"hello"
    assert decompress("lz4", LZ4_EMPTY) == b""
    data = b"large message " * 100
    packed = compress("lz4", data)
    assert packed[:4] == bytes.fromhex("04224d18") and len(packed) < len(data)
    assert decompress("lz4", packed) == data


@pytest.mark.parametrize("codec", ["lz4", "snappy"])
def test_not_compressed_is_a_decode_error(codec: str) -> None:
    with pytest.raises(DecodeError, match=f"not {codec}-compressed.*--compression"):
        decompress(codec, b'{"u":{}}')
    assert compress("none", b"abc") == decompress("none", b"abc") == b"abc"
    with pytest.raises(ConfigError):
        compress("zstd", b"")


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(["lz4", "snappy"]), data=st.binary(max_size=300))
def test_decompress_any_bytes_is_bytes_or_decode_error(codec: str, data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decompress(codec, data)
    assert decompress(codec, compress(codec, data)) == data


# -- Open Protocol with compressed values ------------------------------------------------------


@pytest.mark.parametrize("codec", ["lz4", "snappy"])
def test_open_protocol_compresses_every_value_entry(codec: str) -> None:
    rows = [row(ident=i, text="y" * i) for i in range(1, 4)] + [row(ident=2, op=Op.DELETE)]
    opts = DecodeOptions(compression=codec)
    ((key, value),) = encode_rows(rows, compression=codec)
    assert key == encode_rows(rows)[0][0]  # keys are never compressed
    assert decode(key, value, options=opts) == rows
    with pytest.raises(DecodeError, match="value entry 0"):
        decode(key, value)  # compressed, read as plain JSON
    ddl = DdlEvent(415508856908021766, "test", "t1", 3, "CREATE TABLE t1 (id INT PRIMARY KEY)")
    assert decode(*encode_ddl(ddl, compression=codec), options=opts) == [ddl]
    # A resolved event's value entry is empty: nothing to compress, decodes under any setting.
    assert decode(*encode_resolved(9), options=opts) == [Resolved(9)]
    with pytest.raises(DecodeError, match=f"not {codec}-compressed"):
        decode(*encode_rows(rows)[0], options=opts)


@settings(max_examples=300, deadline=None)
@given(codec=st.sampled_from(["lz4", "snappy"]), key=st.binary(max_size=80), value=st.binary(max_size=200))
def test_any_bytes_decode_to_events_or_decode_error(codec: str, key: bytes, value: bytes) -> None:
    opts = DecodeOptions(compression=codec)
    with contextlib.suppress(DecodeError):
        codec_for("open").decode(b"\x00" * 7 + b"\x01" + key, value, options=opts, position=POS)
    # A well-formed row key with any value entry: the decompression path itself.
    row_key = b'{"ts":1,"scm":"s","tbl":"t","t":1}'
    framed_key = b"\x00" * 7 + b"\x01" + len(row_key).to_bytes(8, "big") + row_key
    for entry in (value, compress(codec, value)):
        with contextlib.suppress(DecodeError):
            codec_for("open").decode(framed_key, len(entry).to_bytes(8, "big") + entry, options=opts, position=POS)


# -- claim-check files ------------------------------------------------------------------------


def test_claim_check_envelope_round_trip_and_go_shapes() -> None:
    env = claim_check_envelope(b"\x00\x01k", b"v\xff")
    assert env == b'{"key":"AAFr","value":"dv8="}'  # Go: []byte as standard base64 with padding
    assert parse_claim_check(env) == (b"\x00\x01k", b"v\xff")
    assert parse_claim_check(b'{"key":null,"value":"dv8="}') == (b"", b"v\xff")  # a nil []byte


@pytest.mark.parametrize("data, match", [
    (b"", "not JSON"), (b"[1]", "not a"), (b'{"key":"AA=="}', "not a"), (b'{"value":7}', "'value'"),
    (b'{"value":"@@"}', "not valid base64"), (b"\xff", "not JSON"),
])
def test_claim_check_envelope_errors(data: bytes, match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        parse_claim_check(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=100) | st.text(max_size=60).map(str.encode))
def test_claim_check_any_bytes_parse_or_decode_error(data: bytes) -> None:
    try:
        key, value = parse_claim_check(data)
    except DecodeError:
        return
    assert isinstance(key, bytes) and isinstance(value, bytes)


def test_claim_check_name_is_the_base_name() -> None:
    assert claim_check_name("s3://bkt/prefix/0b5d.json") == "0b5d.json"
    assert claim_check_name("file:///tmp/cc/0b5d.json") == "0b5d.json"
    assert claim_check_name("0b5d.json") == "0b5d.json"
    for bad in ("", "s3://b/p/", "s3://b/..", "a\\..\\b"):
        with pytest.raises(DecodeError, match="names no file"):
            claim_check_name(bad)


# -- references: encoded as TiCDC does, resolved at the edge -----------------------------------


def _stream(tmp_path: Path, codec: str) -> tuple[list[RowChange], list[tuple[bytes, bytes]], Path]:
    store = tmp_path / "cc"
    store.mkdir()
    names = iter(f"{i:04d}.json" for i in range(100))

    def write(key: bytes, value: bytes) -> str:
        name = next(names)
        (store / name).write_bytes(claim_check_envelope(key, value))
        return f"s3://upstream-bucket/cc/{name}"

    noise = "".join(hashlib.sha256(bytes([i])).hexdigest() for i in range(20))  # 1280 bytes lz4 cannot shrink
    rows = [row(ident=1), row(ident=2, text=noise), row(ident=3), row(ident=2, op=Op.DELETE)]
    return rows, encode_rows(rows, compression=codec, max_message_bytes=1000, claim_check=write), store


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_claim_check_reference_resolves_from_a_local_directory(tmp_path: Path, codec: str) -> None:
    rows, messages, store = _stream(tmp_path, codec)
    assert sorted(p.name for p in store.iterdir()) == ["0000.json"]
    opts = DecodeOptions(compression=codec)
    decoded = [ev for k, v in messages for ev in decode(k, v, options=opts)]
    refs = [ev for ev in decoded if isinstance(ev, RowChange) and ev.claim_check]
    assert [r.claim_check for r in refs] == ["s3://upstream-bucket/cc/0000.json"]
    assert refs[0].columns == (rows[1].columns[0],) and not refs[0].only_handle_key  # handle key only
    with pytest.raises(ClaimCheckError, match="--reader spark does not resolve"):
        check_row(refs[0])
    checks = ClaimChecks(str(store), codec_for("open"), opts)
    resolved = [ev for k, v in messages for ev in checks.resolve(decode(k, v, options=opts, position=POS), POS)]
    assert resolved == rows and checks.resolved == 1


def test_missing_claim_check_file_and_no_storage_stop_with_position_and_url(tmp_path: Path) -> None:
    _rows, messages, store = _stream(tmp_path, "snappy")
    opts = DecodeOptions(compression="snappy")
    events = [ev for k, v in messages for ev in decode(k, v, options=opts, position=POS)]
    (store / "0000.json").unlink()
    with pytest.raises(ClaimCheckError) as err:
        ClaimChecks(str(store), codec_for("open"), opts).resolve(events, POS)
    text = str(err.value)
    assert "topic 'cdc' partition 2 offset 41" in text and str(store / "0000.json") in text and "restore" in text
    with pytest.raises(ClaimCheckError, match=r"partition 2 offset 41.*no --claim-check-storage is set"):
        ClaimChecks(None, codec_for("open"), opts).resolve(events, POS)
    (store / "0000.json").write_bytes(b"not json")
    with pytest.raises(ClaimCheckError, match="does not hold a message that decodes"):
        ClaimChecks(str(store), codec_for("open"), opts).resolve(events, POS)
    (store / "0000.json").write_bytes(claim_check_envelope(*encode_rows([row(ts=5, ident=2)], compression="snappy")[0]))
    with pytest.raises(ClaimCheckError, match="not the referenced one"):
        ClaimChecks(str(store), codec_for("open"), opts).resolve(events, POS)


def test_storage_reader_reads_by_name(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b"{}")
    read, url_of = storage_reader(str(tmp_path))
    assert read("a.json") == b"{}" and read("b.json") is None and url_of("b.json") == str(tmp_path / "b.json")


def test_handle_key_only_row_is_refused_with_the_remedy() -> None:
    key = b'{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1,"ohk":true}'
    value = b'{"u":{"id":{"t":3,"h":true,"f":11,"v":1}}}'
    (ev,) = decode(b"\x00" * 7 + b"\x01" + len(key).to_bytes(8, "big") + key, len(value).to_bytes(8, "big") + value)
    assert isinstance(ev, RowChange) and ev.only_handle_key
    assert ClaimChecks(None, codec_for("open"), DecodeOptions()).resolve([ev], POS) == [ev]  # not a reference
    with pytest.raises(UnsupportedError, match=r"handle-key-only.*snapshot read.*claim-check"):
        check_row(ev)


# -- settings ----------------------------------------------------------------------------------


def test_settings_flags_env_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["--warehouse", "/wh", "--protocol", "open"]

    def opts(*argv: str) -> tuple[str, str | None]:
        o = run_options(settings_from(build_parser().parse_args(["run", *base, *argv])))
        return o.decode.compression, o.claim_check_storage

    assert opts() == ("none", None)
    assert opts("--compression", "lz4", "--claim-check-storage", "s3a://b/cc") == ("lz4", "s3a://b/cc")
    monkeypatch.setenv("REPLICATOR_COMPRESSION", "snappy")
    monkeypatch.setenv("REPLICATOR_CLAIM_CHECK_STORAGE", str(tmp_path))
    assert opts() == ("snappy", str(tmp_path))
    monkeypatch.delenv("REPLICATOR_COMPRESSION")
    cfg = tmp_path / "r.toml"
    cfg.write_text('compression = "lz4"\nclaim-check-storage = "/cc"\n')
    assert opts("--config", str(cfg)) == ("lz4", str(tmp_path))  # env beats the file
    monkeypatch.setenv("REPLICATOR_COMPRESSION", "zstd")
    with pytest.raises(ConfigError, match="REPLICATOR_COMPRESSION"):
        opts()
    monkeypatch.delenv("REPLICATOR_COMPRESSION")
    with pytest.raises(ConfigError, match="--claim-check-storage needs --reader driver"):
        opts("--reader", "spark")
    cmd = options(DecodeCommand, vars(build_parser().parse_args(
        ["decode", "--protocol", "open", "--value", "-", "--compression", "snappy"])))
    assert cmd.compression == "snappy"


# -- the simulator emits such streams ----------------------------------------------------------


def _decoded(messages: list[tuple[int, bytes | None, bytes]], checks: ClaimChecks) -> list[Event]:
    out: list[Event] = []
    for p, key, value in messages:
        pos = Position("t", p, 0)
        out += checks.resolve(checks.codec.decode(key, value, options=checks.options, position=pos), pos)
    return out


@pytest.mark.parametrize("protocol", ["open", "canal-json", "simple"])
@pytest.mark.parametrize("codec", ["none", "lz4", "snappy"])
def test_simulated_large_messages_decode_to_the_plain_stream(tmp_path: Path, codec: str, protocol: str) -> None:
    base = SimConfig(protocol=protocol, seed=3, events=300, partitions=2, tables=4, ddl="auto")  # type: ignore[arg-type]
    plain = _decoded(list(Simulation(base).messages()),
                     ClaimChecks(None, codec_for(protocol), DecodeOptions(state=CodecState())))
    sim = Simulation(dataclasses.replace(base, compression=codec, claim_check_dir=str(tmp_path),
                                         max_message_bytes=700))
    messages = list(sim.messages())
    checks = ClaimChecks(str(tmp_path), codec_for(protocol), DecodeOptions(compression=codec, state=CodecState()))
    assert _decoded(messages, checks) == plain
    assert checks.resolved == sim.claim_check_files == len(list(tmp_path.iterdir())) > 3
    if codec != "none" and protocol != "open":  # every value compressed: none reads as plain JSON
        assert not any(v.startswith(b"{") for _p, _k, v in messages)


def test_craft_has_no_large_message_handling() -> None:
    with pytest.raises(ConfigError, match="none for craft"):
        SimConfig(protocol="craft", compression="lz4")
    with pytest.raises(ConfigError, match=r"no large-message handling.*for craft"):
        codec_for("craft").encode_rows([row()], compression="snappy")
    argv = ["run", "--warehouse", "/wh", "--protocol", "craft", "--compression", "lz4"]
    with pytest.raises(ConfigError, match=r"no large-message handling.*for craft"):
        run_options(settings_from(build_parser().parse_args(argv)))
    for protocol in ("canal-json", "simple"):
        argv = ["run", "--warehouse", "/wh", "--protocol", protocol, "--compression", "lz4",
                "--claim-check-storage", "/cc"]
        o = run_options(settings_from(build_parser().parse_args(argv)))
        assert (o.decode.compression, o.claim_check_storage) == ("lz4", "/cc")


# -- canal-json and Simple: vectors written from TiCDC's encoders (tiflow canal_json_row_event_encoder.go,
# simple/encoder.go + message.go): the reference is the row with only its handle-key columns plus
# canal-json `_tidb.claimCheckLocation` / Simple `claimCheckLocation` and `handleKeyOnly`; the file is
# {"key": null, "value": <the original value, compressed like every value>}. ------------------------


def snappy_literal(data: bytes) -> bytes:
    """snappy's block format with the whole input as one literal: the uvarint length, then the tag
    (n-1)<<2 up to 60 bytes, or 60<<2 and one byte n-1 for 61..256 bytes."""
    n = len(data)
    assert 0 < n <= 256
    length = bytes([n]) if n < 128 else bytes([0x80 | (n & 0x7F), n >> 7])
    head = bytes([(n - 1) << 2]) if n <= 60 else bytes([60 << 2, n - 1])
    return length + head + data


BIG_TEXT = "".join(hashlib.sha256(bytes([i])).hexdigest() for i in range(3))  # 192 bytes snappy cannot shrink
CANAL_FULL = (b'{"id":0,"database":"test","table":"t1","pkNames":["id"],"isDdl":false,"type":"INSERT",'
              b'"es":1585040583740,"ts":1585040583740,"sql":"","sqlType":{"id":4,"v":12},'
              b'"mysqlType":{"id":"int","v":"varchar"},"old":null,"data":[{"id":"2","v":"' + BIG_TEXT.encode() + b'"}],'
              b'"_tidb":{"commitTs":415508878783938562}}')
CANAL_REF = (b'{"id":0,"database":"test","table":"t1","pkNames":["id"],"isDdl":false,"type":"INSERT",'
             b'"es":1585040583740,"ts":1585040583740,"sql":"","sqlType":{"id":4},"mysqlType":{"id":"int"},'
             b'"old":null,"data":[{"id":"2"}],'
             b'"_tidb":{"commitTs":415508878783938562,"claimCheckLocation":"s3://bkt/cc/0b5d.json"}}')
CANAL_KEY_ONLY = CANAL_REF.replace(b'"claimCheckLocation":"s3://bkt/cc/0b5d.json"', b'"onlyHandleKey":true')
CANAL_WATERMARK = (b'{"id":0,"database":"","table":"","pkNames":null,"isDdl":false,"type":"TIDB_WATERMARK",'
                   b'"es":0,"ts":0,"sql":"","sqlType":null,"mysqlType":null,"data":null,"old":null,'
                   b'"_tidb":{"watermarkTs":9}}')


def test_canal_json_reference_and_file_are_what_ticdc_writes(tmp_path: Path) -> None:
    big = row(ident=2, text=BIG_TEXT)
    files: dict[str, bytes] = {}

    def write(key: bytes | None, value: bytes) -> str:
        files["0b5d.json"] = claim_check_envelope(key, value)
        return "s3://bkt/cc/0b5d.json"

    assert canal_json.encode_rows([big]) == [CANAL_FULL]
    # 36 bytes of record overhead: the full message does not fit, the reference just does
    limit = len(CANAL_REF) + 36
    (ref,) = canal_json.encode_rows([big], max_message_bytes=limit, claim_check=write)
    assert ref == CANAL_REF
    assert files == {"0b5d.json": b'{"key":null,"value":"' + base64.b64encode(CANAL_FULL) + b'"}'}
    (packed,) = canal_json.encode_rows([big], max_message_bytes=len(compress("snappy", CANAL_REF)) + 36,
                                       claim_check=write, compression="snappy")
    assert parse_claim_check(files["0b5d.json"]) == (b"", compress("snappy", CANAL_FULL))
    assert decompress("snappy", packed) == CANAL_REF
    with pytest.raises(MessageTooLargeError, match="max-message-bytes"):
        canal_json.encode_rows([big], max_message_bytes=limit)
    with pytest.raises(MessageTooLargeError, match="max-message-bytes"):  # not even the reference fits
        canal_json.encode_rows([big], max_message_bytes=limit - 1, claim_check=write)


@pytest.mark.parametrize("codec", ["none", "lz4", "snappy"])
def test_canal_json_reference_resolves_and_a_missing_file_stops(tmp_path: Path, codec: str) -> None:
    opts = DecodeOptions(compression=codec)
    (ref,) = canal_json.decode(None, compress(codec, CANAL_REF), options=opts, position=POS)
    assert isinstance(ref, RowChange) and ref.claim_check == "s3://bkt/cc/0b5d.json" and not ref.only_handle_key
    assert ref.columns == (Column("id", int(TypeCode.LONG), int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY | Flag.BINARY),
                                  2),)
    with pytest.raises(ClaimCheckError, match="--reader spark does not resolve"):
        check_row(ref)
    checks = ClaimChecks(str(tmp_path), codec_for("canal-json"), opts)
    with pytest.raises(ClaimCheckError) as err:
        checks.resolve([ref], POS)
    assert "topic 'cdc' partition 2 offset 41" in str(err.value) and str(tmp_path / "0b5d.json") in str(err.value)
    (tmp_path / "0b5d.json").write_bytes(claim_check_envelope(None, compress(codec, CANAL_FULL)))
    (full,) = checks.resolve([ref], POS)
    assert full == canal_json.decode(None, CANAL_FULL, position=POS)[0]
    assert isinstance(full, RowChange) and full.columns[1].value == BIG_TEXT and not full.claim_check
    check_row(full)


def test_canal_json_handle_key_only_is_refused_with_the_remedy() -> None:
    (ev,) = canal_json.decode(None, CANAL_KEY_ONLY)
    assert isinstance(ev, RowChange) and ev.only_handle_key and not ev.claim_check and len(ev.columns) == 1
    assert ClaimChecks(None, codec_for("canal-json"), DecodeOptions()).resolve([ev], POS) == [ev]  # no file to read
    with pytest.raises(UnsupportedError, match=r"handle-key-only.*snapshot read.*claim-check"):
        check_row(ev)


@pytest.mark.parametrize("protocol", ["canal-json", "simple"])
def test_compressed_values_hand_packed(protocol: str) -> None:
    """Every value compressed: a watermark as snappy's literal block, decoded only with the setting."""
    plain = CANAL_WATERMARK if protocol == "canal-json" else (
        b'{"version":1,"type":"WATERMARK","commitTs":9,"buildTs":0}')
    packed = snappy_literal(plain)
    assert codec_for(protocol).decode(None, packed, options=DecodeOptions(compression="snappy")) == [Resolved(9)]
    assert decompress("snappy", compress("snappy", plain)) == plain
    with pytest.raises(DecodeError, match=r"UTF-8|JSON"):
        codec_for(protocol).decode(None, packed)
    with pytest.raises(DecodeError, match="not lz4-compressed") as err:
        codec_for(protocol).decode(None, plain, options=DecodeOptions(compression="lz4"), position=POS)
    assert "partition 2 offset 41" in str(err.value)
    assert codec_for(protocol).encode_event(Resolved(9), compression="snappy")[1] != codec_for(protocol).encode_event(
        Resolved(9))[1]


def _simple_state(big: RowChange) -> tuple[DecodeOptions, dict[str, Any]]:
    schema = simple.table_schema(big.schema, big.table, big.image)
    opts = DecodeOptions(state=CodecState())
    assert simple.decode(None, simple.encode_bootstrap(schema), options=opts) == []
    return opts, schema


def test_simple_reference_carries_handle_key_only_and_the_full_rows_checksum(tmp_path: Path) -> None:
    big = row(ident=2, text="large " * 40)
    opts, schema = _simple_state(big)
    full = simple.encode_row(big, schema, checksum=True)
    files: dict[str, bytes] = {}

    def write(key: bytes | None, value: bytes) -> str:
        files["0b5d.json"] = claim_check_envelope(key, value)
        return "s3://bkt/cc/0b5d.json"

    bootstrap, ref = simple.encode_rows([big], checksum=True, max_message_bytes=400, claim_check=write)
    assert bootstrap == simple.encode_bootstrap(schema)
    msg, original = json.loads(ref), json.loads(full)
    assert msg["claimCheckLocation"] == "s3://bkt/cc/0b5d.json" and msg["handleKeyOnly"] is True
    assert msg["data"] == {"id": "2"} and msg["checksum"] == original["checksum"] != {}
    assert {k: v for k, v in msg.items() if k not in ("claimCheckLocation", "handleKeyOnly", "data")} == {
        k: v for k, v in original.items() if k != "data"}
    assert parse_claim_check(files["0b5d.json"]) == (b"", full)
    (ev,) = simple.decode(None, ref, options=opts, position=POS)  # the checksum is not checked on a reference
    assert isinstance(ev, RowChange) and ev.claim_check and ev.only_handle_key and len(ev.columns) == 1
    with pytest.raises(ClaimCheckError, match="--reader spark does not resolve"):
        check_row(ev)  # a reference first: its row exists, in the file
    (tmp_path / "0b5d.json").write_bytes(files["0b5d.json"])
    verified = opts.state.checksums_verified if opts.state else 0
    (resolved,) = ClaimChecks(str(tmp_path), codec_for("simple"), opts).resolve([ev], POS)
    assert opts.state is not None and opts.state.checksums_verified == verified + 1  # the file's row is verified
    assert isinstance(resolved, RowChange) and [c.value for c in resolved.columns] == [c.value for c in big.columns]
    assert resolved == simple.decode(None, full, options=opts, position=POS)[0] and not resolved.claim_check
    (tmp_path / "0b5d.json").unlink()
    with pytest.raises(ClaimCheckError, match=r"partition 2 offset 41.*no file .*0b5d\.json"):
        ClaimChecks(str(tmp_path), codec_for("simple"), opts).resolve([ev], POS)


def test_simple_handle_key_only_is_refused_with_the_remedy() -> None:
    big = row(ident=2, text="large")
    opts, schema = _simple_state(big)
    msg = json.loads(simple.encode_row(big, schema))
    msg |= {"handleKeyOnly": True, "data": {"id": "2"}}
    (ev,) = simple.decode(None, json.dumps(msg).encode(), options=opts)
    assert isinstance(ev, RowChange) and ev.only_handle_key and not ev.claim_check
    with pytest.raises(UnsupportedError, match=r"handle-key-only.*snapshot read.*claim-check"):
        check_row(ev)


@settings(max_examples=300, deadline=None)
@given(protocol=st.sampled_from(["canal-json", "simple"]), codec=st.sampled_from(["lz4", "snappy"]),
       value=st.binary(max_size=200) | st.sampled_from([CANAL_REF, CANAL_KEY_ONLY, CANAL_WATERMARK]))
def test_any_bytes_decode_to_events_or_decode_error_one_event_formats(protocol: str, codec: str,
                                                                      value: bytes) -> None:
    opts = DecodeOptions(compression=codec, state=CodecState())
    for data in (value, compress(codec, value)):
        try:
            events = codec_for(protocol).decode(None, data, options=opts, position=POS)
        except DecodeError:
            continue
        assert all(isinstance(ev, RowChange | Resolved | DdlEvent) for ev in events)
