"""The seed's transport frame: length encoding, CRC, truncation (replicator.formats.framing)."""

from __future__ import annotations

import io
import itertools
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.errors import FrameError, TruncatedFrameError
from replicator.formats.framing import (
    MAX_LENGTH,
    Frame,
    FrameReader,
    encode_frame,
    length_decode,
    length_encode,
    length_prefix_size,
    scan,
)

SEED_EXAMPLES = [(42, "2A"), (767, "00 FF 02"), (66047, "01 FF 01 01 00")]


@pytest.mark.parametrize(("length", "hexbytes"), SEED_EXAMPLES)
def test_seed_examples_encode(length: int, hexbytes: str) -> None:
    assert length_encode(length) == bytes.fromhex(hexbytes)


@pytest.mark.parametrize(("length", "hexbytes"), SEED_EXAMPLES)
def test_seed_examples_decode(length: int, hexbytes: str) -> None:
    buf = b"\xaa" + bytes.fromhex(hexbytes) + b"\xbb"
    assert length_decode(buf, 1) == (length, 1 + len(bytes.fromhex(hexbytes)))


@pytest.mark.parametrize(
    ("length", "size"), [(2, 1), (255, 1), (256, 3), (65535, 3), (65536, 5), (MAX_LENGTH, 5)]
)
def test_boundaries(length: int, size: int) -> None:
    enc = length_encode(length)
    assert len(enc) == size == length_prefix_size(enc[0])
    assert length_decode(enc) == (length, size)


@given(st.integers(min_value=2, max_value=MAX_LENGTH))
def test_length_round_trip(length: int) -> None:
    enc = length_encode(length)
    assert length_decode(enc + b"trailing") == (length, len(enc))
    # canonical: one byte for 2..255, so a first byte of 0 or 1 always announces more bytes
    assert (enc[0] >= 2) == (length < 256)


@pytest.mark.parametrize("bad", [0, 1, -1, 2**32, 2**40])
def test_encode_rejects_out_of_range(bad: int) -> None:
    with pytest.raises(ValueError, match="outside"):
        length_encode(bad)


@pytest.mark.parametrize(
    "encoded",
    [
        "00 00 00",  # 0
        "00 01 00",  # 1
        "00 2A 00",  # 42 has a one-byte form
        "01 FF 02 00 00",  # 767 has a three-byte form
        "01 00 00 00 00",
    ],
)
def test_decode_rejects_impossible_lengths(encoded: str) -> None:
    with pytest.raises(FrameError, match="impossible frame length") as info:
        length_decode(bytes.fromhex(encoded))
    assert not isinstance(info.value, TruncatedFrameError)


def test_decode_truncated_length() -> None:
    with pytest.raises(TruncatedFrameError):
        length_decode(bytes.fromhex("01 FF 01"))
    with pytest.raises(TruncatedFrameError):
        length_decode(b"")


def test_frame_layout() -> None:
    frame = encode_frame(0x03, b"hello")
    body = b"\x03hello"
    assert frame == b"\x05" + body + zlib.crc32(body).to_bytes(4, "little")


def test_frame_rejects_short_message_and_bad_tag() -> None:
    with pytest.raises(ValueError, match="cannot be framed"):
        encode_frame(1, b"")
    with pytest.raises(ValueError, match="cannot be framed"):
        encode_frame(1, b"x")
    for tag in (0, 256, -1):
        with pytest.raises(ValueError, match="type tag"):
            encode_frame(tag, b"xy")


def _sample() -> tuple[bytes, list[tuple[int, bytes]]]:
    items = [(1, b"ab"), (2, b"x" * 300), (3, b"y" * 70000), (255, b"z" * 255)]
    return b"".join(encode_frame(t, p) for t, p in items), items


def test_frame_round_trip_bytes_file_and_stream(tmp_path: Path) -> None:
    data, items = _sample()
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    for source in (data, path, str(path), io.BytesIO(data)):
        frames = list(FrameReader(source))
        assert [(f.tag, f.payload) for f in frames] == items
        assert frames[0].offset == 0
        assert all(a.end == b.offset for a, b in itertools.pairwise(frames))
        assert frames[-1].end == len(data)
        assert all(f.crc_ok for f in frames)


def test_start_offset_resumes_at_a_frame_boundary(tmp_path: Path) -> None:
    data, items = _sample()
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    second = list(FrameReader(path))[1]
    frames = list(FrameReader(path, start_offset=second.offset))
    assert [f.payload for f in frames] == [p for _, p in items[1:]]
    assert frames[0].offset == second.offset


def _offsets(data: bytes) -> list[Frame]:
    return list(FrameReader(data))


def test_crc_corruption_detected_with_file_and_offset(tmp_path: Path) -> None:
    data, _ = _sample()
    victim = _offsets(data)[2]
    corrupt = bytearray(data)
    corrupt[victim.offset + 100] ^= 0x01  # a bit flip inside the 70000-byte message
    path = tmp_path / "archive-000001.rcf"
    path.write_bytes(bytes(corrupt))
    seen: list[Frame] = []
    with pytest.raises(FrameError, match="bad CRC") as info:
        seen.extend(FrameReader(path))
    err = info.value
    assert not isinstance(err, TruncatedFrameError)
    assert err.byte_offset == victim.offset
    assert err.where == str(path)
    assert str(path) in str(err) and f"byte offset {victim.offset}" in str(err)
    assert len(seen) == 2  # the frames before the corrupt one, none after


def test_corrupt_type_tag_detected() -> None:
    data = bytearray(encode_frame(3, b"payload"))
    data[1] = 4  # CRC covers the tag
    with pytest.raises(FrameError, match="bad CRC"):
        list(FrameReader(bytes(data)))


def test_unchecked_reader_reports_bad_crc_and_continues() -> None:
    data, items = _sample()
    corrupt = bytearray(data)
    corrupt[-1] ^= 0xFF  # last frame's CRC
    frames = list(FrameReader(bytes(corrupt), check_crc=False))
    assert [f.crc_ok for f in frames] == [True, True, True, False]
    assert [f.payload for f in frames] == [p for _, p in items]


def test_impossible_length_mid_file() -> None:
    good = encode_frame(1, b"ok")
    data = good + bytes.fromhex("00 01 00") + b"\x01" * 10
    with pytest.raises(FrameError, match="impossible frame length") as info:
        list(FrameReader(data, name="x.rcf"))
    assert not isinstance(info.value, TruncatedFrameError)
    assert info.value.byte_offset == len(good)
    assert info.value.where == "x.rcf"


@pytest.mark.parametrize("cut", [1, 3, 5, 6, 10, 70006, 70009])
def test_truncated_tail_is_reported_distinctly(cut: int) -> None:
    data, _ = _sample()
    third = _offsets(data)[2]  # the 5-byte-length frame, so cuts land in prefix, tag, message, CRC
    truncated = data[: third.offset + cut]
    seen: list[Frame] = []
    with pytest.raises(TruncatedFrameError, match="writer killed") as info:
        seen.extend(FrameReader(truncated))
    assert info.value.byte_offset == third.offset
    assert len(seen) == 2


def test_scan_reports_truncation_without_raising(tmp_path: Path) -> None:
    data, _ = _sample()
    path = tmp_path / "f.bin"
    path.write_bytes(data[:-3])
    result = scan(path)
    assert result.frames == 3
    assert result.truncated is not None
    assert result.good_end == _offsets(data)[3].offset
    path.write_bytes(b"")
    empty = scan(path)
    assert (empty.frames, empty.good_end, empty.first, empty.truncated) == (0, 0, None, None)


def test_zero_filled_tail_is_not_a_frame() -> None:
    # A preallocated / zero-filled region decodes as length 0 in the 2-byte form: impossible.
    with pytest.raises(FrameError, match="impossible"):
        list(FrameReader(encode_frame(1, b"ok") + bytes(16)))
