"""`make run` helpers that need no broker: port fallback, warehouse recreation; `--s3`: the local
S3-compatible server started or reused, the Craft twin of a URL, a local --warehouse refused."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from replicator.errors import ConfigError
from replicator.sim import demo, localkafka, locals3


class FakeHandle:
    def __init__(self, port: int) -> None:
        self.port, self.pid, self.ready_seconds, self.state_dir = port, 4242, 1.0, Path("/x")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def fake_start(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []

    def start(state_dir: Path, port: int | None = None, *a: Any, **kw: Any) -> FakeHandle:
        calls.append(port)
        return FakeHandle(port or 45678)

    monkeypatch.setattr(localkafka, "status", lambda state_dir: None)
    monkeypatch.setattr(localkafka, "start", start)
    return calls


def test_broker_on_the_requested_port(fake_start: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert demo.ensure_broker(port) == f"127.0.0.1:{port}"
    assert fake_start == [port]
    assert "started the local broker" in capsys.readouterr().out


def test_taken_port_falls_back_to_a_free_one(fake_start: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert demo.ensure_broker(port) == "127.0.0.1:45678"
    assert fake_start == [None]
    assert f"port {port} is taken by another program" in capsys.readouterr().out


def test_running_broker_is_reused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(localkafka, "status", lambda state_dir: FakeHandle(9999))
    monkeypatch.setattr(localkafka, "start", lambda *a, **k: pytest.fail("must not start a second broker"))
    assert demo.ensure_broker(9092) == "127.0.0.1:9999"
    assert "already running on 127.0.0.1:9999 (not 9092" in capsys.readouterr().out


def test_recreate_warehouse_only_removes_warehouses(tmp_path: Path) -> None:
    wh = tmp_path / "warehouse"
    (wh / "_replicator").mkdir(parents=True)
    (wh / "tables").mkdir()
    demo.recreate_warehouse(wh)
    assert not wh.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    demo.recreate_warehouse(empty)
    assert not empty.exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep me")
    with pytest.raises(ConfigError, match="not a replicator warehouse"):
        demo.recreate_warehouse(other)
    assert (other / "notes.txt").exists()
    demo.recreate_warehouse(tmp_path / "missing")  # nothing to do


class FakeS3:
    def __init__(self, port: int) -> None:
        self.port, self.pid, self.ready_seconds, self.data_dir = port, 4343, 1.0, Path("/x/data")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def fake_s3_start(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []

    def start(state_dir: Path, port: int | None = None, *a: Any, **kw: Any) -> FakeS3:
        calls.append((state_dir, port))
        return FakeS3(port or 45679)

    monkeypatch.setattr(locals3, "status", lambda state_dir: None)
    monkeypatch.setattr(locals3, "start", start)
    return calls


def test_s3_server_on_the_requested_port(fake_s3_start: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert demo.ensure_s3(port, "/state/s3").endpoint == f"http://127.0.0.1:{port}"
    assert fake_s3_start == [("/state/s3", port)]
    assert "started the local S3-compatible server" in capsys.readouterr().out


def test_s3_taken_port_falls_back_to_a_free_one(fake_s3_start: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert demo.ensure_s3(port, "/state/s3").endpoint == "http://127.0.0.1:45679"
    assert fake_s3_start == [("/state/s3", None)]
    assert f"port {port} is taken by another program" in capsys.readouterr().out


def test_running_s3_server_is_reused(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(locals3, "status", lambda state_dir: FakeS3(9999))
    monkeypatch.setattr(locals3, "start", lambda *a, **k: pytest.fail("must not start a second server"))
    assert demo.ensure_s3(9000, "/state/s3").port == 9999
    assert "already running on http://127.0.0.1:9999 (not 9000" in capsys.readouterr().out


def test_the_craft_twin_of_a_directory_and_of_a_url() -> None:
    assert demo.twin("./warehouse", "craft") == "warehouse-craft"
    assert demo.twin("/data/wh", "craft") == "/data/wh-craft"
    assert demo.twin("s3a://warehouse/demo", "craft") == "s3a://warehouse/demo-craft"
    assert demo.twin("s3a://warehouse/demo/", "craft") == "s3a://warehouse/demo-craft"


def test_s3_needs_an_s3a_warehouse(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(demo, "ensure_s3", lambda *a: pytest.fail("must refuse before starting anything"))
    assert demo.main(["--s3", "--warehouse", "./warehouse"]) == ConfigError("").exit_code
    assert "--warehouse must be an s3a:// URL (default s3a://warehouse/demo)" in capsys.readouterr().err
    args = demo.build_parser().parse_args(["--s3"])
    assert args.s3 and args.warehouse is None and args.s3_state_dir.endswith("state/s3")
