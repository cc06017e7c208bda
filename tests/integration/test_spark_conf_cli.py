"""`python -m replicator spark-conf` as a user runs it: the jars of the real cache (or the per-user
one) and the commit store for an s3a:// warehouse, in both forms (no Spark is started)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from replicator.runtime import jars
from tests.support.cli import run_replicator
from tests.support.env import clean_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_spark_conf_for_an_s3a_warehouse() -> None:
    env = clean_env(PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = run_replicator("spark-conf", "--warehouse", "s3a://b/p", "--s3-endpoint", "http://127.0.0.1:9000",
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for scheme in ("s3a", "s3"):
        assert f"--conf spark.delta.logStore.{scheme}.impl={jars.COMMIT_STORE_CLASS}" in out
        assert f'.config("spark.delta.logStore.{scheme}.impl", "{jars.COMMIT_STORE_CLASS}")' in out
    assert "--conf spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000" in out
    assert "--conf spark.hadoop.fs.s3a.path.style.access=true" in out
    jar_line = next(line for line in out.splitlines() if line.startswith("--jars "))
    paths = jar_line.removeprefix("--jars ").rstrip(" \\").split(",")
    assert all(Path(p).is_file() for p in paths), "every jar named exists"
    names = {Path(p).name for p in paths}
    assert {jars.COMMIT_STORE_JAR, "hadoop-aws-3.4.1.jar", "delta-spark_2.13-4.0.1.jar"} <= names
    assert "S3SingleDriverLogStore" in out and "SparkSession.builder" in out
