"""Issue 33's choice between a rewrite and a metadata-only schema change: sizes, the choice, the
settings that carry it (flag, REPLICATOR_* and config key), and live bytes from the Delta log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicator.cli import build_parser, main
from replicator.cli.common import settings_from
from replicator.cli.run import run_options
from replicator.delta import schemachange
from replicator.delta.rowcount import live_bytes
from replicator.delta.schemachange import DEFAULT_REWRITE_LIMIT, choose, format_size, parse_size
from replicator.engine.pipeline import RunSummary
from replicator.errors import ConfigError

BASE = ["run", "--warehouse", "/wh", "--protocol", "open"]


pytestmark = pytest.mark.usefixtures("no_replicator_env")  # settings read REPLICATOR_* from the environment


@pytest.mark.parametrize(("text", "size"), [
    ("1048576", 1048576), (1048576, 1048576), ("1GiB", 1024 ** 3), ("1 gib", 1024 ** 3), ("512MiB", 512 * 1024 ** 2),
    ("1.5GB", 1_500_000_000), ("10KB", 10_000), ("2TiB", 2 * 1024 ** 4), ("0", 0), ("7B", 7),
])
def test_sizes(text: object, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "GiB", "1 GiBs", "-1", "1,000", "one", "1e9", True, -5])
def test_bad_sizes_say_what_to_write(text: object) -> None:
    with pytest.raises(ConfigError, match=r"--rewrite-limit: .*(1GiB|bytes)"):
        parse_size(text)


def test_format_size() -> None:
    assert [format_size(n) for n in (0, 1023, 1024, 1536, 1024 ** 3, 5 * 1024 ** 4)] == [
        "0 B", "1023 B", "1 KiB", "1.5 KiB", "1 GiB", "5 TiB"]


def test_the_choice() -> None:
    limit = 1000
    assert not choose("auto", limit, 999).metadata
    assert choose("auto", limit, 1000).metadata and "at or over --rewrite-limit" in choose("auto", limit, 1000).why
    assert choose("auto", limit, None).metadata
    assert not choose("rewrite", limit, 10 ** 12).metadata
    assert choose("metadata", limit, 0).metadata
    assert "under --rewrite-limit 1000 B" in choose("auto", limit, 5).why
    with pytest.raises(ConfigError, match="auto, rewrite, metadata"):
        schemachange.check_schema_change("sometimes")


def test_settings_from_flag_env_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def opts(*argv: str) -> tuple[str, int]:
        o = run_options(settings_from(build_parser().parse_args([*BASE, *argv])))
        return o.schema_change, o.rewrite_limit

    assert opts() == ("auto", DEFAULT_REWRITE_LIMIT) == ("auto", 1024 ** 3)
    cfg = tmp_path / "c.toml"
    cfg.write_text('schema_change = "metadata"\nrewrite-limit = "256MiB"\n')
    assert opts("--config", str(cfg)) == ("metadata", 256 * 1024 ** 2)
    cfg.write_text("rewrite_limit = 1048576\n")
    assert opts("--config", str(cfg)) == ("auto", 1048576)
    monkeypatch.setenv("REPLICATOR_REWRITE_LIMIT", "2GiB")
    monkeypatch.setenv("REPLICATOR_SCHEMA_CHANGE", "rewrite")
    assert opts("--config", str(cfg)) == ("rewrite", 2 * 1024 ** 3)
    assert opts("--rewrite-limit", "1048576", "--schema-change", "auto") == ("auto", 1048576)
    monkeypatch.setenv("REPLICATOR_REWRITE_LIMIT", "lots")
    with pytest.raises(ConfigError, match=r"REPLICATOR_REWRITE_LIMIT: 'lots' is not a size; give a byte count"):
        opts()


def test_bad_rewrite_limit_flag_stops_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--rewrite-limit", "1 gigabyte"]) == 2
    err = capsys.readouterr().err
    assert "--rewrite-limit: '1 gigabyte' is not a size" in err and "e.g. 1GiB" in err


def _commit(log: Path, version: int, *actions: dict[str, object]) -> None:
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_live_bytes_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    assert live_bytes(tmp_path) is None
    _commit(log, 0, {"metaData": {}}, {"add": {"path": "a", "size": 100, "dataChange": True}})
    _commit(log, 1, {"add": {"path": "b", "size": 50}}, {"cdc": {"path": "c", "size": 999}})
    assert live_bytes(tmp_path) == 150
    _commit(log, 2, {"remove": {"path": "a"}}, {"add": {"path": "d", "size": 70}})
    assert live_bytes(tmp_path) == 120  # removed files and change-data files do not count


def test_summary_names_the_reader_changes() -> None:
    s = RunSummary(source="t")
    change = {"table": "db.t", "feature": "columnMapping", "why": "RENAME COLUMN metadata-only: --schema-change "
              "metadata", "readers": ["spark", "deltalake-sql"], "ddl": "ALTER TABLE t RENAME COLUMN a TO b",
              "commit_ts": 5}
    assert s.to_json()["reader_changes"] == [] and "reader change" not in s.render()
    s.reader_changes.append(change)
    assert s.to_json()["reader_changes"] == [change]
    assert ("reader change     db.t: columnMapping (RENAME COLUMN metadata-only: --schema-change metadata); "
            "readers now spark, deltalake-sql") in s.render()
