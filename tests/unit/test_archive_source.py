"""ArchiveSource (pure: files only): the engine's Source protocol over capture archives."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.errors import ConfigError, FrameError, KafkaSourceError, TruncatedFrameError
from replicator.events import TP
from replicator.formats.archive import ArchiveWriter, list_archive_files, read_archive
from replicator.formats.inspect import inspect
from replicator.sim.simulate import SimConfig, Simulation, write_archive
from replicator.sources.archive import ArchiveSource, scan_archive


def make_archive(directory: Path, *, events: int = 300, rotate_bytes: int | None = 40_000,
                 protocol: str = "open") -> Simulation:
    sim = Simulation(SimConfig(protocol=protocol, events=events, seed=13, partitions=3))  # type: ignore[arg-type]
    write_archive(sim, directory, "cdc-topic", rotate_bytes=rotate_bytes)
    return sim


def drain(src: ArchiveSource) -> list[tuple[int, int]]:
    out = []
    while not src.caught_up():
        out += [(r.partition, r.offset) for r in src.poll()]
    return out


def test_reads_every_record_in_order(tmp_path: Path) -> None:
    sim = make_archive(tmp_path / "a", protocol="craft")
    assert len(list_archive_files(tmp_path / "a")) > 1  # rotated: the reader follows the Chain frames
    src = ArchiveSource(tmp_path / "a", poll_max_records=50)
    assert src.name == "cdc-topic" and src.protocol == "craft"
    assert src.partitions() == [TP("cdc-topic", p) for p in (0, 1, 2)]
    assert src.lag() == sum(sim.stats.messages.values())
    src.start({TP("cdc-topic", 0): None, TP("cdc-topic", 1): None, TP("cdc-topic", 2): None})
    got = drain(src)
    assert len(got) == sum(sim.stats.messages.values())
    for p in range(3):
        offs = [o for q, o in got if q == p]
        assert offs == list(range(len(offs)))
    assert src.lag() == 0 and src.poll() == []
    src.commit({TP("cdc-topic", 0): 1})  # a no-op
    src.close()


def test_start_positions_and_overlapping_captures(tmp_path: Path) -> None:
    make_archive(tmp_path / "a", rotate_bytes=None)
    # A second capture re-archived partition 0 from offset 5 (resumed from committed offsets).
    with ArchiveWriter(tmp_path / "b") as w:
        for rec in read_archive(tmp_path / "a"):
            if rec.partition == 0 and rec.offset >= 5:
                w.write_record(topic=rec.topic, partition=0, offset=rec.offset, timestamp_ms=rec.timestamp_ms,
                               key=rec.key, value=rec.value, protocol=rec.protocol)
    src = ArchiveSource([tmp_path / "a", tmp_path / "b"])
    src.start({TP("cdc-topic", 0): 10, TP("cdc-topic", 1): None, TP("cdc-topic", 2): 3})
    got = drain(src)
    p0 = [o for p, o in got if p == 0]
    assert p0[0] == 10 and p0 == sorted(set(p0))
    assert min(o for p, o in got if p == 2) == 3
    assert src.skipped > 0


def test_missing_start_offset_is_an_error(tmp_path: Path) -> None:
    make_archive(tmp_path / "a", rotate_bytes=None)
    with ArchiveWriter(tmp_path / "late") as w:
        for rec in read_archive(tmp_path / "a"):
            if rec.offset >= 4:
                w.write_record(topic=rec.topic, partition=rec.partition, offset=rec.offset,
                               timestamp_ms=rec.timestamp_ms, key=rec.key, value=rec.value, protocol=rec.protocol)
    src = ArchiveSource(tmp_path / "late")
    with pytest.raises(KafkaSourceError, match="archive starts at offset 4"):
        src.start({TP("cdc-topic", 0): 2, TP("cdc-topic", 1): None, TP("cdc-topic", 2): None})


def test_mixed_topics_and_empty_archives_are_refused(tmp_path: Path) -> None:
    make_archive(tmp_path / "a", rotate_bytes=None)
    with ArchiveWriter(tmp_path / "other") as w:
        w.write_record(topic="other", partition=0, offset=0, timestamp_ms=0, key=None, value=b"x", protocol="open")
    with pytest.raises(ConfigError, match="mixes topics"):
        ArchiveSource([tmp_path / "a", tmp_path / "other"])
    ArchiveWriter(tmp_path / "empty").close()
    with pytest.raises(ConfigError, match="holds no records"):
        ArchiveSource(tmp_path / "empty")


def _record_frames(path: Path) -> list[dict[str, int]]:
    return [e for e in inspect(path) if e["type"] == "Record"]


def test_bad_crc_names_file_and_offset_before_anything_is_read(tmp_path: Path) -> None:
    make_archive(tmp_path / "a", rotate_bytes=None)
    path = list_archive_files(tmp_path / "a")[0]
    frame = _record_frames(path)[20]
    data = bytearray(path.read_bytes())
    data[frame["offset"] + frame["size"] - 6] ^= 0x40  # a payload byte: the CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(FrameError, match="bad CRC") as err:
        ArchiveSource(tmp_path / "a")
    assert not isinstance(err.value, TruncatedFrameError)
    assert err.value.where == str(path) and err.value.byte_offset == frame["offset"]
    assert f"byte offset {frame['offset']}" in str(err.value) and "nothing at or after" in str(err.value)


def test_truncated_tail_is_reported_distinctly(tmp_path: Path) -> None:
    make_archive(tmp_path / "a", rotate_bytes=None)
    path = list_archive_files(tmp_path / "a")[0]
    last = _record_frames(path)[-1]
    with open(path, "r+b") as f:
        f.truncate(last["offset"] + last["size"] - 3)
    with pytest.raises(TruncatedFrameError, match="partial frame") as err:
        scan_archive(tmp_path / "a")
    assert err.value.byte_offset == last["offset"] and err.value.where == str(path)


def test_corruption_after_the_first_pass_stops_the_poll(tmp_path: Path) -> None:
    make_archive(tmp_path / "a", rotate_bytes=None)
    path = list_archive_files(tmp_path / "a")[0]
    src = ArchiveSource(tmp_path / "a", poll_max_records=10)
    frames = _record_frames(path)
    bad = frames[25]
    data = bytearray(path.read_bytes())
    data[bad["offset"] + bad["size"] - 6] ^= 0x01
    path.write_bytes(bytes(data))
    src.start({TP("cdc-topic", 0): None, TP("cdc-topic", 1): None, TP("cdc-topic", 2): None})
    delivered = 0
    with pytest.raises(FrameError, match="bad CRC"):
        while True:
            delivered += len(src.poll())
    assert delivered <= 25  # nothing at or after the corrupt frame was handed to the engine
