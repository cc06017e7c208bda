"""The driver JVM's start options: the class archive (runtime/jvm_archive.py) and the compiler a run
chooses (`plan_jit`), without starting a JVM."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.errors import ConfigError
from replicator.runtime import jvm_archive
from replicator.runtime import spark as sparkmod
from replicator.warehouse import Warehouse


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in ("REPLICATOR_JIT", "REPLICATOR_JVM_ARCHIVE", "REPLICATOR_DRIVER_JAVA_OPTIONS", "PYSPARK_GATEWAY_PORT"):
        monkeypatch.delenv(var, raising=False)
    saved = sparkmod.NEXT.jit
    yield
    sparkmod.NEXT.jit = saved


def _jar(tmp_path: Path, name: str = "delta.jar") -> str:
    path = tmp_path / name
    path.write_bytes(b"PK")
    return str(path)


def test_the_archive_key_follows_the_jars(tmp_path: Path) -> None:
    jar = _jar(tmp_path)
    key = jvm_archive.archive_key([jar])
    assert key is not None and key == jvm_archive.archive_key([jar])
    st = os.stat(jar)
    os.utime(jar, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a rebuilt jar: another archive
    assert jvm_archive.archive_key([jar]) != key
    assert jvm_archive.archive_key([jar, _jar(tmp_path, "kafka.jar")]) != jvm_archive.archive_key([jar])


def test_an_archive_is_used_only_once_written(tmp_path: Path) -> None:
    jars = [_jar(tmp_path)]
    assert jvm_archive.java_options(tmp_path / "jvm", jars) == []
    path = jvm_archive.archive_path(tmp_path / "jvm", jars)
    assert path is not None and path.parent == tmp_path / "jvm" and path.name.startswith("driver-")
    path.parent.mkdir()
    path.write_bytes(b"")
    options = jvm_archive.java_options(tmp_path / "jvm", jars)
    assert options[0] == f"-XX:SharedArchiveFile={path}"
    # CDS logging off: a stale archive's warning would land on stdout, which --json-summary owns.
    assert "-Xlog:cds=off" in options and "-Xlog:cds+dynamic=off" in options


def test_the_archive_can_be_turned_off_or_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jars = [_jar(tmp_path)]
    monkeypatch.setenv("REPLICATOR_JVM_ARCHIVE", "0")
    assert jvm_archive.archive_path(tmp_path, jars) is None
    assert jvm_archive.java_options(tmp_path, jars) == []
    elsewhere = tmp_path / "mine.jsa"
    elsewhere.write_bytes(b"")
    monkeypatch.setenv("REPLICATOR_JVM_ARCHIVE", str(elsewhere))
    assert jvm_archive.java_options(tmp_path, jars)[0] == f"-XX:SharedArchiveFile={elsewhere}"


def test_auto_jit_is_quick_only_for_a_catch_up_into_a_small_warehouse(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    new = Warehouse(tmp_path / "new").tables_bytes
    assert sparkmod.plan_jit(short_lived=True, tables_bytes=new) == "quick"
    assert sparkmod.plan_jit(short_lived=False, tables_bytes=new) == "full"  # a follower
    table = tmp_path / "wh" / "tables" / "shop" / "orders-1"
    table.mkdir(parents=True)
    (table / "part-0.parquet").write_bytes(b"x" * 4096)
    assert sparkmod.plan_jit(short_lived=True, tables_bytes=Warehouse(tmp_path / "wh").tables_bytes) == "quick"
    monkeypatch.setattr(sparkmod, "QUICK_JIT_MAX_WAREHOUSE_BYTES", 4096)  # now it counts as big
    assert sparkmod.plan_jit(short_lived=True, tables_bytes=Warehouse(tmp_path / "wh").tables_bytes) == "full"


def test_the_jit_setting_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLICATOR_JIT", "full")
    assert sparkmod.plan_jit(short_lived=True, tables_bytes=Warehouse(tmp_path).tables_bytes) == "full"
    monkeypatch.setenv("REPLICATOR_JIT", "quick")
    assert sparkmod.plan_jit(short_lived=False, tables_bytes=Warehouse(tmp_path).tables_bytes) == "quick"
    monkeypatch.setenv("REPLICATOR_JIT", "fast")
    with pytest.raises(ConfigError, match="REPLICATOR_JIT='fast': expected one of auto, quick, full"):
        sparkmod.plan_jit(short_lived=True, tables_bytes=Warehouse(tmp_path).tables_bytes)


def test_driver_options_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparkmod, "JVM_ARCHIVE_DIR", tmp_path / "none")
    sparkmod.plan_jit(short_lived=True, tables_bytes=Warehouse(tmp_path).tables_bytes)
    monkeypatch.setenv("REPLICATOR_DRIVER_JAVA_OPTIONS", "-XX:TieredStopAtLevel=4 -Dx=1")
    options = sparkmod.driver_java_options([_jar(tmp_path)])
    assert options[0] == "-Duser.timezone=UTC"
    # The JVM's own warnings go to stderr: the process's stdout is --json-summary's.
    assert options[1:3] == ["-Xlog:disable", "-Xlog:all=warning:stderr"]
    # The quick compiler keeps the tiered code cache (C1 alone gets 48 MiB, which fills up).
    assert "-XX:ReservedCodeCacheSize=240m" in options
    # The user's options come after the chosen compiler, so theirs win.
    assert options.index("-XX:TieredStopAtLevel=1") < options.index("-XX:TieredStopAtLevel=4")
    sparkmod.plan_jit(short_lived=False, tables_bytes=Warehouse(tmp_path).tables_bytes)
    assert "-XX:TieredStopAtLevel=1" not in sparkmod.driver_java_options(None)


def test_spark_submit_keeps_its_own_jvm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "41234")
    sparkmod.plan_jit(short_lived=True, tables_bytes=Warehouse(tmp_path).tables_bytes)
    options = sparkmod.driver_java_options(None)
    assert not any(o.startswith(("-XX:TieredStopAtLevel", "-XX:SharedArchiveFile")) for o in options)


def test_what_the_jvm_prints_on_its_stdout_goes_to_stderr() -> None:
    """The driver JVM is started with fd 1 on stderr (Delta's VACUUM prints "Deleted N files" with
    println): a process started inside `_jvm_stdout_on_stderr` writes its stdout to our stderr,
    and this process's own stdout is untouched (`maintain --json` prints JSON and nothing else)."""
    code = ("import subprocess\nfrom replicator.runtime.spark import _jvm_stdout_on_stderr\n"
            "print('before', flush=True)\n"
            "with _jvm_stdout_on_stderr():\n    subprocess.run(['sh', '-c', 'echo Deleted 3 files'], check=True)\n"
            "print('after')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parents[2])
    assert (done.stdout, done.stderr) == ("before\nafter\n", "Deleted 3 files\n")
