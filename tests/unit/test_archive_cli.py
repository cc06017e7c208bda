"""`simulate --out`, `archive inspect` and `run --archive` on corrupt archives (no broker, no Spark:
corruption is refused before the engine applies anything)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicator.cli import main
from replicator.engine.pipeline import Engine, RunOptions
from replicator.errors import FrameError
from replicator.formats.archive import list_archive_files
from replicator.formats.inspect import inspect
from replicator.sources.archive import ArchiveSource
from replicator.warehouse import Warehouse
from tests.support.warehouse import applied_ts


@pytest.fixture
def archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "arch"
    assert main(["simulate", "--protocol", "craft", "--out", str(out), "--events", "200", "--seed", "3",
                 "--topic", "cdc"]) == 0
    text = capsys.readouterr().out
    assert "simulated 200 row changes" in text and f"expected final tables: {out / 'expected.json'}" in text
    expected = json.loads((out / "expected.json").read_text())
    assert expected["format"] == 1 and expected["generator"]["protocol"] == "craft"
    assert set(expected["tables"]) >= {"shop.customers", "shop.attachments"}
    return out


def _corrupt(path: Path, index: int) -> dict[str, int]:
    frame = [e for e in inspect(path) if e["type"] == "Record"][index]
    data = bytearray(path.read_bytes())
    data[frame["offset"] + frame["size"] - 6] ^= 0x10
    path.write_bytes(bytes(data))
    return frame


def test_archive_inspect_prints_frames(archive: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["archive", "inspect", str(archive)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"# {list_archive_files(archive)[0]}"
    assert "ArchiveStart" in lines[1] and "crc=ok" in lines[1] and "format_version=1" in lines[1]
    records = [ln for ln in lines if " Record " in ln]
    assert records and all("crc=ok" in ln and "topic='cdc'" in ln and "protocol='craft'" in ln for ln in records)
    first_offset = int(records[0].split()[0])
    assert first_offset > 0


def test_archive_inspect_flags_a_bad_crc(archive: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = list_archive_files(archive)[0]
    frame = _corrupt(path, 5)
    assert main(["archive", "inspect", str(archive)]) == 1
    captured = capsys.readouterr()
    bad = [ln for ln in captured.out.splitlines() if "crc=BAD" in ln]
    assert len(bad) == 1 and int(bad[0].split()[0]) == frame["offset"]
    assert str(path) in captured.err and f"byte offset {frame['offset']}" in captured.err


def test_run_archive_refuses_a_bad_crc(archive: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = list_archive_files(archive)[0]
    frame = _corrupt(path, 30)
    wh = tmp_path / "wh"
    assert main(["run", "--archive", str(archive), "--warehouse", str(wh)]) == 1
    err = capsys.readouterr().err
    assert "bad CRC" in err and str(path) in err and f"byte offset {frame['offset']}" in err
    assert not Warehouse(wh).state_path.exists()  # nothing was applied


def test_run_archive_reports_a_truncated_tail(archive: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = list_archive_files(archive)[0]
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 2)
    assert main(["run", "--archive", str(archive), "--warehouse", str(tmp_path / "wh")]) == 1
    err = capsys.readouterr().err
    assert "partial frame" in err and "killed mid-write" in err and str(path) in err
    assert not Warehouse(tmp_path / "wh").state_path.exists()


def test_run_archive_protocol_must_match(archive: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--archive", str(archive), "--protocol", "open", "--warehouse", str(tmp_path / "wh")]) == 2
    assert "the archive holds craft records" in capsys.readouterr().err


def test_simulate_needs_a_destination(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--protocol", "open"]) == 2
    assert "--out DIR" in capsys.readouterr().err


def test_engine_stops_at_corruption_found_mid_run(archive: Path, tmp_path: Path) -> None:
    """The archive changes after the first pass: the engine stops at the bad frame and applies nothing
    (no window is complete before the corrupt record in a catch-up run)."""
    source = ArchiveSource(archive, poll_max_records=20)
    path = list_archive_files(archive)[0]
    _corrupt(path, 40)
    wh = tmp_path / "wh"
    engine = Engine(source, RunOptions(warehouse=str(wh), protocol="craft", until_caught_up=True, progress=False))
    with pytest.raises(FrameError, match="bad CRC") as err:
        engine.run()
    assert err.value.where == str(path)
    assert engine.summary.records <= 40
    assert applied_ts(wh) == 0
