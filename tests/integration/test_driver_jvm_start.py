"""A catch-up run's driver JVM starts from the class archive `make setup` writes, with the quick
compiler; an archive the JVM cannot use changes nothing a user sees (a fresh JVM per command, so
subprocesses)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from replicator.cli import main
from replicator.runtime import jvm_archive
from replicator.runtime.spark import JVM_ARCHIVE_DIR, jar_paths
from tests.support.cli import run_replicator
from tests.support.env import clean_env

pytestmark = pytest.mark.integration


def _env(**extra: str) -> dict[str, str]:
    return clean_env("REPLICATOR_JIT*", "REPLICATOR_JVM_ARCHIVE*", **{"PYTHONUNBUFFERED": "1", **extra})


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    archive = tmp_path_factory.mktemp("jvm") / "arch"
    assert main(["simulate", "--protocol", "craft", "--out", str(archive), "--events", "200", "--tables", "2"]) == 0
    return archive


def _run(stream: Path, warehouse: Path, env: dict[str, str]) -> dict[str, object]:
    out = run_replicator("run", "--archive", str(stream), "--warehouse", str(warehouse), "--json-summary", env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, out.stdout  # the summary alone: nothing of the JVM's on stdout
    summary: dict[str, object] = json.loads(lines[0])
    assert summary["error"] is None and summary["rows"]
    return summary


def test_a_catch_up_run_maps_the_archive_and_uses_the_quick_compiler(stream: Path, tmp_path: Path) -> None:
    # What `make setup` runs (quiet and quick when the archive exists, as in CI after set-up).
    built = subprocess.run([sys.executable, "-m", "replicator.sim.jvm_archive"], capture_output=True, text=True,
                           env=_env(), timeout=900)
    assert built.returncode == 0, built.stderr
    path = jvm_archive.archive_path(JVM_ARCHIVE_DIR, jar_paths())
    assert path is not None and path.is_file(), built.stdout + built.stderr
    cds_log, vm_log = tmp_path / "cds.log", tmp_path / "vm.log"
    _run(stream, tmp_path / "wh", _env(REPLICATOR_DRIVER_JAVA_OPTIONS=(
        f"-Xlog:cds=info:file={cds_log} -XX:+UnlockDiagnosticVMOptions -XX:+LogVMOutput "
        f"-XX:-DisplayVMOutput -XX:LogFile={vm_log}")))
    assert "Mapped dynamic region" in cds_log.read_text()
    args = vm_log.read_text()
    assert f"-XX:SharedArchiveFile={path}" in args and "-XX:TieredStopAtLevel=1" in args


def test_an_archive_the_jvm_cannot_use_changes_nothing(stream: Path, tmp_path: Path) -> None:
    stale = tmp_path / "stale.jsa"
    stale.write_bytes(b"not a class archive" * 100)
    first = _run(stream, tmp_path / "wh", _env(REPLICATOR_JVM_ARCHIVE=str(stale), REPLICATOR_JIT="full"))
    assert first["steps"]
