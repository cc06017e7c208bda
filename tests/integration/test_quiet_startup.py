"""Spark's start-up chatter stays off the terminal unless -v (a fresh JVM per command, so subprocesses)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from replicator.cli import main
from tests.support.cli import run_replicator
from tests.support.env import clean_env

pytestmark = pytest.mark.integration

CHATTER = ("NativeCodeLoader", "Using Spark's default log4j profile", "Setting default log level",
           "To adjust logging level", "Using incubator modules", ":: loading settings", "Ivy Default Cache")


def _env() -> dict[str, str]:
    return clean_env("REPLICATOR_SPARK_LOG_LEVEL*", PYTHONUNBUFFERED="1")


def test_run_is_quiet_by_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = tmp_path / "arch"
    assert main(["simulate", "--protocol", "craft", "--out", str(archive), "--events", "20", "--tables", "1",
                 "--ddl", "none"]) == 0
    capsys.readouterr()
    out = run_replicator("run", "--archive", str(archive), "--warehouse", str(tmp_path / "wh"), env=_env(),
                         timeout=600)
    assert out.returncode == 0, out.stderr
    assert "records read" in out.stdout  # the summary
    shown = out.stdout + out.stderr
    assert [c for c in CHATTER if c in shown] == []


def test_verbose_shows_sparks_start_up() -> None:
    """What `-v` switches on (replicator.cli and the demo call set_verbose): Spark's own start-up output."""
    code = ("from replicator.runtime.spark import get_spark, set_verbose\n"
            "set_verbose(True)\n"
            "assert get_spark().range(3).count() == 3\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=600)
    assert out.returncode == 0, out.stderr
    assert "Using Spark's default log4j profile" in out.stderr
    assert "Setting default log level" in out.stderr


def test_driver_java_options_reach_the_driver_jvm() -> None:
    code = ("from replicator.runtime.spark import get_spark; s = get_spark(); "
            "print(s.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())")
    env = {**_env(), "REPLICATOR_DRIVER_JAVA_OPTIONS": "-XX:TieredStopAtLevel=1 -Dreplicator.test=yes"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "-XX:TieredStopAtLevel=1" in out.stdout and "-Dreplicator.test=yes" in out.stdout
    assert "-Duser.timezone=UTC" in out.stdout
