"""The seed's protobuf binary log: writer, reader, printer, rotation (replicator.formats.binlog)."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest

from replicator._proto import binlog_pb2
from replicator.cli.binlog import binlog_read, binlog_write
from replicator.cli.settings import BinlogReadCommand, BinlogWriteCommand
from replicator.errors import ConfigError, DecodeError, FrameError, TruncatedFrameError
from replicator.formats.archive import ArchiveWriter
from replicator.formats.binlog import (
    CHAIN_TAG,
    START_TAG,
    BinlogWriter,
    binlog_file_name,
    format_event,
    parse_set,
    read_binlog,
    split_binlog_name,
)
from replicator.formats.framing import FrameReader, encode_frame

SEED_OUTPUT = """\
# Global Id: (1,0)
# Timestamp: 484270929829911
set @name = 'Mats Kindahl'
set @nick = 'mkindahl'
INSERT INTO whatever VALUES (@nick,@name)
# Global Id: (1,0)
# Timestamp: 484330886264299
set @name = 'Brian Aker'
set @nick = 'krow'
INSERT INTO whatever VALUES (@nick,@name)
# Global Id: (1,0)
# Timestamp: 484391458447787
set @name = 'Monty Taylor'
set @nick = 'mtaylor'
INSERT INTO whatever VALUES (@nick,@name)
"""
SEED_WRITES = [
    ("mkindahl", "Mats Kindahl"),
    ("krow", "Brian Aker"),
    ("mtaylor", "Monty Taylor"),
]
_TS = re.compile(r"^# Timestamp: \d+$", re.M)


def _seed_session(trans: int) -> str:
    """The seed's three `binlog_writer` commands, then `binlog_reader`, in the current directory."""
    for nick, name in SEED_WRITES:
        binlog_write(BinlogWriteCommand(
            trans=trans,
            sets=[f"nick={nick}", f"name={name}"],
            query="INSERT INTO whatever VALUES (@nick,@name)",
        ))
    out = io.StringIO()
    assert binlog_read(BinlogReadCommand(), out) == 0
    return out.getvalue()


def _no_timestamps(text: str) -> str:
    return _TS.sub("# Timestamp: T", text)


def test_seed_session_prints_the_seeds_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = time.time_ns()
    printed = _seed_session(trans=1)
    # Global Id is (server_id, trans_id) as stored: --trans 1 prints (1,1) where the seed shows (1,0)
    assert _no_timestamps(printed) == _no_timestamps(SEED_OUTPUT).replace("(1,0)", "(1,1)")
    stamps = [int(s) for s in re.findall(r"^# Timestamp: (\d+)$", printed, re.M)]
    assert before <= stamps[0] < stamps[1] < stamps[2] <= time.time_ns()  # ns precision
    # The seed's `ls -l log.bin` says 311 bytes; it wrote no Start event. Ours starts with one.
    frames = list(FrameReader(tmp_path / "log.bin"))
    assert [f.tag for f in frames] == [START_TAG, 3, 3, 3]
    assert sum(f.size for f in frames[1:]) == 311


def test_seed_session_with_trans_0_matches_the_seed_but_for_timestamps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert _no_timestamps(_seed_session(trans=0)) == _no_timestamps(SEED_OUTPUT)


def test_commit_rollback_start_chain_format() -> None:
    h = binlog_pb2.Header(timestamp=5, server_id=2, trans_id=9)
    assert format_event(binlog_pb2.Commit(header=h)) == "# Global Id: (2,9)\n# Timestamp: 5\nCOMMIT"
    assert format_event(binlog_pb2.Rollback(header=h)).endswith("\nROLLBACK")
    start = binlog_pb2.Start(header=h, server_version=100, server_signature="x")
    assert format_event(start).endswith("# Start: server_version 100, server_signature 'x'")
    assert format_event(binlog_pb2.Chain(header=h, next=3)).endswith("# Chain: continues in file sequence 3")
    with pytest.raises(TypeError):
        format_event(h)


def test_variables_sorted_and_quoted_one_line() -> None:
    q = binlog_pb2.Query(
        header=binlog_pb2.Header(timestamp=1, server_id=1, trans_id=1),
        variable=[
            binlog_pb2.Query.Variable(name="z", value="it's"),
            binlog_pb2.Query.Variable(name="a", value="back\\slash\nnew line"),
        ],
        session_id=0,
        query="SELECT 1",
    )
    lines = format_event(q).splitlines()
    assert lines[2:] == ["set @a = 'back\\\\slash\\nnew line'", "set @z = 'it\\'s'", "SELECT 1"]


def test_interleaved_transactions_and_rollback(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    with BinlogWriter(log, server_id=7) as w:
        w.write_query(1, "INSERT INTO a VALUES (1)", session_id=11)
        w.write_query(2, "INSERT INTO b VALUES (@x)", {"x": "2"}, session_id=12)
        w.write_query(1, "INSERT INTO a VALUES (3)", session_id=11)
        w.write_commit(2)
        w.write_rollback(1)
        w.write_query(3, "DELETE FROM a", server_id=8)
        w.write_commit(3, server_id=8)
    events = list(read_binlog(log))
    assert [(e.type, e.gtid) for e in events] == [
        ("Start", (7, 0)),
        ("Query", (7, 1)),
        ("Query", (7, 2)),
        ("Query", (7, 1)),
        ("Commit", (7, 2)),
        ("Rollback", (7, 1)),
        ("Query", (8, 3)),
        ("Commit", (8, 3)),
    ]
    assert events[2].message.session_id == 12
    assert [(v.name, v.value) for v in events[2].message.variable] == [("x", "2")]
    assert all(e.file == str(log) for e in events)
    assert [e.offset for e in events] == [f.offset for f in FrameReader(log)]


def test_reopen_appends_without_second_start(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    for trans in range(3):
        with BinlogWriter(log) as w:
            w.write_query(trans, "INSERT INTO t VALUES (1)")
            w.write_commit(trans)
    assert [e.type for e in read_binlog(log)] == ["Start"] + ["Query", "Commit"] * 3


def test_rotation_chains_into_next_files(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    with BinlogWriter(log, rotate_bytes=300) as w:
        for trans in range(20):
            w.write_query(trans, f"INSERT INTO t VALUES ({trans})", {"v": str(trans)})
            w.write_commit(trans)
    files = sorted(tmp_path.iterdir())
    assert files[0] == log and files[1].name == "log.bin.000002" and len(files) > 3
    events = list(read_binlog(log))
    data = [e for e in events if e.type not in ("Start", "Chain")]
    assert [(e.type, e.gtid[1]) for e in data] == [(t, n) for n in range(20) for t in ("Query", "Commit")]
    starts = [e for e in events if e.type == "Start"]
    chains = [e for e in events if e.type == "Chain"]
    assert len(starts) == len(files) and len(chains) == len(files) - 1
    assert [c.message.next for c in chains] == list(range(2, len(files) + 1))
    assert {e.file for e in events} == {str(f) for f in files}
    # starting from a later file reads that file and what it chains to
    assert next(iter(read_binlog(files[2]))).file == str(files[2])
    # a new writer continues in the newest file
    with BinlogWriter(log, rotate_bytes=300) as w:
        assert w.path == files[-1]
        w.write_commit(99)
    assert list(read_binlog(log))[-1].gtid == (1, 99)
    out = io.StringIO()
    binlog_read(BinlogReadCommand([log]), out)
    assert "# Chain" not in out.getvalue() and "# Start" not in out.getvalue()
    verbose = io.StringIO()
    binlog_read(BinlogReadCommand([log], verbose=True), verbose)
    assert verbose.getvalue().count("# Chain: continues in file sequence") == len(chains)
    assert f"# at {files[1]}:0" in verbose.getvalue()


def test_interrupted_rotation_is_finished_by_next_writer(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    with BinlogWriter(log) as w:
        w.write_commit(1)
    # crash after creating log.bin.000002 with its Start, before the Chain reached log.bin
    start = binlog_pb2.Start(
        header=binlog_pb2.Header(timestamp=1, server_id=1, trans_id=0), server_version=1, server_signature="s"
    )
    second = binlog_file_name(log, 2)
    second.write_bytes(encode_frame(START_TAG, start.SerializeToString()))
    assert [e.type for e in read_binlog(log)] == ["Start", "Commit"]  # readable meanwhile
    with BinlogWriter(log) as w:
        assert w.path == second
        w.write_commit(2)
    assert [(e.type, Path(e.file).name) for e in read_binlog(log)] == [
        ("Start", "log.bin"),
        ("Commit", "log.bin"),
        ("Chain", "log.bin"),
        ("Start", "log.bin.000002"),
        ("Commit", "log.bin.000002"),
    ]


def test_missing_chained_file(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    with BinlogWriter(log, rotate_bytes=100) as w:
        for t in range(6):
            w.write_commit(t)
    binlog_file_name(log, 2).unlink()
    seen: list[str] = []
    with pytest.raises(DecodeError, match=r"log\.bin\.000002, which is missing") as info:
        seen.extend(e.type for e in read_binlog(log))
    assert info.value.where == str(log) and seen[-1] == "Chain"


def test_corrupt_frame_stops_at_its_offset(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    with BinlogWriter(log) as w:
        w.write_query(1, "INSERT INTO t VALUES (1)")
        _, bad = w.write_query(1, "INSERT INTO t VALUES (2)")
        w.write_commit(1)
    data = bytearray(log.read_bytes())
    data[bad + 12] ^= 0x20
    log.write_bytes(bytes(data))
    seen: list[str] = []
    with pytest.raises(FrameError, match="bad CRC") as info:
        seen.extend(e.type for e in read_binlog(log))
    assert seen == ["Start", "Query"]
    assert (info.value.where, info.value.byte_offset) == (str(log), bad)


def test_truncated_tail_refused_or_repaired(tmp_path: Path) -> None:
    log = tmp_path / "log.bin"
    with BinlogWriter(log) as w:
        w.write_query(1, "INSERT INTO t VALUES (1)")
        _, last = w.write_commit(1)
    log.write_bytes(log.read_bytes()[:-2])
    with pytest.raises(TruncatedFrameError) as info:
        list(read_binlog(log))
    assert info.value.byte_offset == last
    with pytest.raises(TruncatedFrameError, match="repair=True"):
        BinlogWriter(log)
    with BinlogWriter(log, repair=True) as w:
        w.write_commit(1)
    assert [e.type for e in read_binlog(log)] == ["Start", "Query", "Commit"]


def test_structural_errors(tmp_path: Path) -> None:
    h = binlog_pb2.Header(timestamp=1, server_id=1, trans_id=1)
    start = encode_frame(
        START_TAG, binlog_pb2.Start(header=h, server_version=1, server_signature="").SerializeToString()
    )
    commit = encode_frame(4, binlog_pb2.Commit(header=h).SerializeToString())
    chain = encode_frame(CHAIN_TAG, binlog_pb2.Chain(header=h, next=2).SerializeToString())
    cases = {
        "no_start": (commit, "does not start with a Start"),
        "two_starts": (start + start, "Start event mid-file"),
        "after_chain": (start + chain + commit, "event after the Chain"),
        "unknown": (start + encode_frame(0x42, b"xx"), "unknown binary log event type tag 0x42"),
        "missing_required": (start + encode_frame(4, b"\x0a\x00"), "undecodable Commit"),
    }
    for name, (data, message) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(FrameError, match=message):
            list(read_binlog(path))
    with ArchiveWriter(tmp_path / "arch") as aw:
        aw.write_record(
            topic="t", partition=0, offset=0, timestamp_ms=0, key=None, value=b"v", protocol="open"
        )
    with pytest.raises(FrameError, match="capture archive"):
        list(read_binlog(aw.path))
    with pytest.raises(DecodeError, match="not found"):
        list(read_binlog(tmp_path / "nope.bin"))


def test_file_names() -> None:
    assert binlog_file_name("d/log.bin", 1) == Path("d/log.bin")
    assert binlog_file_name("d/log.bin", 2) == Path("d/log.bin.000002")
    assert split_binlog_name("d/log.bin.000002") == (Path("d/log.bin"), 2)
    assert split_binlog_name("d/log.bin") == (Path("d/log.bin"), 1)


def test_cli_helpers_validate(tmp_path: Path) -> None:
    assert parse_set(["a=1", "b=x=y", "c="]) == {"a": "1", "b": "x=y", "c": ""}
    for bad in (["novalue"], ["a b=1"], ["a=1", "a=2"]):
        with pytest.raises(ConfigError):
            parse_set(bad)
    f = tmp_path / "log.bin"
    with pytest.raises(ConfigError):
        binlog_write(BinlogWriteCommand(file=f, trans=1, query="SELECT 1", commit=True))
    with pytest.raises(ConfigError):
        binlog_write(BinlogWriteCommand(file=f, trans=1))
    with pytest.raises(ConfigError):
        binlog_write(BinlogWriteCommand(file=f, trans=-1, commit=True))
    with pytest.raises(ConfigError):
        binlog_write(BinlogWriteCommand(file=f, trans=1, commit=True, sets=["a=1"]))
    assert binlog_write(BinlogWriteCommand(file=f, trans=4, rollback=True, server_id=3)) == 0
    assert [(e.type, e.gtid) for e in read_binlog(f)] == [("Start", (3, 0)), ("Rollback", (3, 4))]
