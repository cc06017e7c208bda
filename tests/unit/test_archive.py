"""Capture archives: write, rotate, chain, resume, read back, corruption (replicator.formats.archive)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from replicator._proto import archive_pb2
from replicator.cli.archive import inspect_archives
from replicator.cli.settings import ArchiveInspectCommand
from replicator.errors import DecodeError, FrameError, TruncatedFrameError
from replicator.formats.archive import (
    ARCHIVE_CHAIN_TAG,
    ARCHIVE_START_TAG,
    RECORD_TAG,
    ArchivedRecord,
    ArchiveWriter,
    archive_file_name,
    archive_sequence,
    list_archive_files,
    read_archive,
)
from replicator.formats.binlog import BinlogWriter
from replicator.formats.framing import FrameReader, encode_frame
from replicator.formats.inspect import inspect


def _records(n: int, topic: str = "t") -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        out.append(
            {
                "topic": topic,
                "partition": i % 3,
                "offset": i,
                "timestamp_ms": 1_700_000_000_000 + i,
                "key": None if i % 5 == 0 else f"k{i}".encode(),
                "value": [None, b"", bytes(range(256)), f"v{i}".encode() * (i % 7)][i % 4],
                "protocol": "craft" if i % 2 else "open",
            }
        )
    return out


def _fields(r: ArchivedRecord) -> dict[str, Any]:
    return {
        "topic": r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp_ms": r.timestamp_ms,
        "key": r.key,
        "value": r.value,
        "protocol": r.protocol,
    }


def _write(directory: Path, records: list[dict[str, Any]], **kw: Any) -> list[tuple[Path, int]]:
    with ArchiveWriter(directory, **kw) as w:
        return [w.write_record(**r) for r in records]


def _frames(path: Path) -> list[tuple[int, int]]:
    return [(f.tag, f.offset) for f in FrameReader(path)]


def test_names() -> None:
    assert archive_file_name(1) == "archive-000001.rcf"
    assert archive_file_name(1234567) == "archive-1234567.rcf"
    assert archive_sequence("x/archive-000042.rcf") == 42
    assert archive_sequence("archive-42.rcf") is None
    with pytest.raises(ValueError):
        archive_file_name(0)


def test_single_file_round_trip_keeps_null_vs_empty(tmp_path: Path) -> None:
    recs = _records(20)
    positions = _write(tmp_path, recs)
    assert [p.name for p in list_archive_files(tmp_path)] == ["archive-000001.rcf"]
    got = list(read_archive(tmp_path))
    assert [_fields(r) for r in got] == recs
    assert [(Path(r.file), r.frame_offset) for r in got] == positions
    assert got[0].key is None and got[1].value == b"" and got[4].value is None
    tags = [t for t, _ in _frames(tmp_path / "archive-000001.rcf")]
    assert tags == [ARCHIVE_START_TAG] + [RECORD_TAG] * 20  # closed cleanly: no Chain


def test_rotation_chains_files_and_reads_back_equal(tmp_path: Path) -> None:
    recs = _records(200)
    _write(tmp_path, recs, rotate_bytes=1000)
    files = list_archive_files(tmp_path)
    assert len(files) > 3
    assert [archive_sequence(f) for f in files] == list(range(1, len(files) + 1))
    for i, f in enumerate(files):
        frames = list(FrameReader(f))
        start = archive_pb2.ArchiveStart.FromString(frames[0].payload)
        assert frames[0].tag == ARCHIVE_START_TAG
        assert (start.format_version, start.sequence, start.previous) == (1, i + 1, i)
        assert start.creator.startswith("replicator ")
        if f is files[-1]:
            assert frames[-1].tag == RECORD_TAG
        else:
            assert frames[-1].tag == ARCHIVE_CHAIN_TAG
            chain = archive_pb2.ArchiveChain.FromString(frames[-1].payload)
            assert (chain.next, chain.sequence, chain.records) == (i + 2, i + 1, len(frames) - 2)
            assert frames[-2].end >= 1000 > frames[-2].offset  # rotated once the size was reached
    expected = recs
    assert [_fields(r) for r in read_archive(tmp_path)] == expected
    # following the Chain frames from the first file alone reads everything too
    assert [_fields(r) for r in read_archive(files[0])] == expected
    # explicit files, including a repeat, are read once each
    assert [_fields(r) for r in read_archive([files[0], files[1], files[1]])] == expected
    # starting in the middle is allowed (older files pruned)
    tail = list(read_archive(files[2]))
    assert tail and _fields(tail[-1]) == expected[-1]


def test_resume_starts_next_sequence(tmp_path: Path) -> None:
    first, second = _records(10), _records(10, topic="u")
    _write(tmp_path, first, rotate_bytes=500)
    n = len(list_archive_files(tmp_path))
    with ArchiveWriter(tmp_path) as w:
        assert w.sequence == n + 1
        for r in second:
            w.write_record(**r)
    start = archive_pb2.ArchiveStart.FromString(next(iter(FrameReader(w.path))).payload)
    assert start.previous == n
    assert [_fields(r) for r in read_archive(tmp_path)] == first + second
    # the earlier session's last file has no Chain: following chains from file 1 stops there
    assert [_fields(r) for r in read_archive(list_archive_files(tmp_path)[0])] == first


def test_missing_chained_file_is_named(tmp_path: Path) -> None:
    _write(tmp_path, _records(50), rotate_bytes=800)
    files = list_archive_files(tmp_path)
    files[1].unlink()
    for source in (files[0], tmp_path):
        got: list[ArchivedRecord] = []
        with pytest.raises(DecodeError, match=r"archive-000002\.rcf, which is missing") as info:
            got.extend(read_archive(source))
        assert info.value.where == str(files[0])
        assert got and all(r.file == str(files[0]) for r in got)


def test_gap_between_sessions_is_detected(tmp_path: Path) -> None:
    for i in range(3):
        _write(tmp_path, _records(2, topic=f"s{i}"))
    files = list_archive_files(tmp_path)
    files[1].unlink()  # session 2 gone; session 3's file says it continues sequence 2
    with pytest.raises(DecodeError, match="archive gap"):
        list(read_archive(tmp_path))


def test_corruption_mid_file_yields_records_before_then_stops(tmp_path: Path) -> None:
    recs = _records(30)
    positions = _write(tmp_path, recs)
    path, bad_offset = positions[12]
    data = bytearray(path.read_bytes())
    data[positions[13][1] - 2] ^= 0x40  # inside record 12's CRC
    path.write_bytes(bytes(data))
    got: list[ArchivedRecord] = []
    with pytest.raises(FrameError, match="bad CRC") as info:
        got.extend(read_archive(tmp_path))
    assert not isinstance(info.value, TruncatedFrameError)
    assert [_fields(r) for r in got] == recs[:12]
    assert (info.value.where, info.value.byte_offset) == (str(path), bad_offset)
    assert "archive-000001.rcf" in str(info.value)


def test_truncated_tail_refused_or_repaired_on_resume(tmp_path: Path) -> None:
    recs = _records(10)
    positions = _write(tmp_path, recs)
    path = positions[0][0]
    path.write_bytes(path.read_bytes()[:-7])  # writer killed inside the last record
    got: list[ArchivedRecord] = []
    with pytest.raises(TruncatedFrameError) as info:
        got.extend(read_archive(tmp_path))
    assert info.value.byte_offset == positions[-1][1]
    assert [_fields(r) for r in got] == recs[:-1]
    with pytest.raises(TruncatedFrameError, match="repair=True"):
        ArchiveWriter(tmp_path)
    assert len(list_archive_files(tmp_path)) == 1  # refusing created nothing
    more = _records(3, topic="again")
    _write(tmp_path, more, repair=True)
    assert [_fields(r) for r in read_archive(tmp_path)] == recs[:-1] + more


def test_empty_file_refused_or_replaced(tmp_path: Path) -> None:
    _write(tmp_path, _records(2))
    (tmp_path / "archive-000002.rcf").write_bytes(b"")
    with pytest.raises(TruncatedFrameError, match="empty archive file"):
        list(read_archive(tmp_path))
    with pytest.raises(TruncatedFrameError):
        ArchiveWriter(tmp_path)
    with ArchiveWriter(tmp_path, repair=True) as w:
        assert w.sequence == 2
        w.write_record(**_records(1)[0])
    assert len(list(read_archive(tmp_path))) == 3


def test_structural_errors(tmp_path: Path) -> None:
    start = archive_pb2.ArchiveStart(format_version=1, creator="t", sequence=1)
    rec = archive_pb2.Record(topic="t", protocol="open")
    chain = archive_pb2.ArchiveChain(next=2, sequence=1, records=0)

    def write(name: str, *frames: tuple[int, bytes]) -> Path:
        p = tmp_path / name
        p.write_bytes(b"".join(encode_frame(t, m) for t, m in frames))
        return p

    s, r, c = start.SerializeToString(), rec.SerializeToString(), chain.SerializeToString()
    cases = {
        "no_start": ([(RECORD_TAG, r)], "does not start with an ArchiveStart"),
        "two_starts": ([(ARCHIVE_START_TAG, s), (ARCHIVE_START_TAG, s)], "second ArchiveStart"),
        "after_chain": ([(ARCHIVE_START_TAG, s), (ARCHIVE_CHAIN_TAG, c), (RECORD_TAG, r)], "after the"),
        "unknown_tag": ([(ARCHIVE_START_TAG, s), (0x7F, r)], "unknown archive frame type tag 0x7f"),
        "bad_count": ([(ARCHIVE_START_TAG, s), (RECORD_TAG, r), (ARCHIVE_CHAIN_TAG, c)], "inconsistent"),
        "version": (
            [(ARCHIVE_START_TAG, archive_pb2.ArchiveStart(format_version=9, sequence=1).SerializeToString())],
            "unsupported archive format version 9",
        ),
        "garbage": ([(ARCHIVE_START_TAG, s), (RECORD_TAG, b"\xff\xff\xff")], "undecodable Record"),
    }
    for name, (frames, message) in cases.items():
        path = write(f"{name}.rcf", *frames)
        with pytest.raises(FrameError, match=message):
            list(read_archive(path))


def test_binlog_is_not_an_archive(tmp_path: Path) -> None:
    with BinlogWriter(tmp_path / "log.bin") as w:
        w.write_commit(1)
    with pytest.raises(FrameError, match="binary log"):
        list(read_archive(tmp_path / "log.bin"))


def test_writer_validation(tmp_path: Path) -> None:
    base = _records(1)[0]
    with ArchiveWriter(tmp_path) as w:
        for bad in ({"topic": ""}, {"protocol": "json"}, {"partition": -1}, {"offset": -5}):
            with pytest.raises(ValueError):
                w.write_record(**{**base, **bad})
    with pytest.raises(ValueError, match="closed"):
        w.write_record(**base)


def test_missing_input(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(DecodeError, match="no archive files"):
        list(read_archive(tmp_path / "empty"))
    with pytest.raises(DecodeError, match="not found"):
        list(read_archive(tmp_path / "archive-000009.rcf"))


def test_inspect_lists_frames_and_flags_bad_crc(tmp_path: Path) -> None:
    positions = _write(tmp_path, _records(3))
    path = positions[0][0]
    entries = list(inspect(path))
    assert [e["type"] for e in entries] == ["ArchiveStart", "Record", "Record", "Record"]
    assert all(e["crc_ok"] for e in entries)
    assert entries[1]["offset"] == positions[0][1]
    assert entries[1]["content"]["key"] is None and entries[1]["content"]["topic"] == "t"
    assert entries[0]["content"]["sequence"] == 1
    out = io.StringIO()
    assert inspect_archives(ArchiveInspectCommand([tmp_path]), out) == 0
    assert out.getvalue().count("crc=ok") == 4

    data = bytearray(path.read_bytes())
    data[positions[1][1] + 4] ^= 0x01  # inside record 1's message
    path.write_bytes(bytes(data))
    entries = list(inspect(path))
    assert [e["crc_ok"] for e in entries] == [True, True, False, True]
    out = io.StringIO()
    with pytest.raises(FrameError, match="bad CRC") as info:
        inspect_archives(ArchiveInspectCommand([path]), out)
    assert info.value.byte_offset == positions[1][1]
    assert "crc=BAD" in out.getvalue() and out.getvalue().count("crc=ok") == 3


def test_inspect_understands_binlogs(tmp_path: Path) -> None:
    with BinlogWriter(tmp_path / "log.bin") as w:
        w.write_query(7, "DELETE FROM t", {"a": "b"})
        w.write_commit(7)
    types = [e["type"] for e in inspect(tmp_path / "log.bin")]
    assert types == ["Start", "Query", "Commit"]


def test_inspect_flags_missing_required_fields(tmp_path: Path) -> None:
    path = tmp_path / "log.bin"
    with BinlogWriter(path) as w:
        w.write_commit(1)
    with path.open("ab") as f:
        f.write(encode_frame(0x04, b"\x0a\x00"))  # Commit with an empty Header
    last = list(inspect(path))[-1]
    assert last["crc_ok"] and last["type"] == "Commit"
    assert "missing required: header.timestamp" in last["error"]
