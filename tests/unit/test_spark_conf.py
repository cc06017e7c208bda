"""`replicator spark-conf`: what a user's own Spark job needs to write a warehouse, derived from the
replicator's own session code. Jars come from a directory of stand-in files (REPLICATOR_SPARK_JARS),
so the assertions are on structure and on the log store, not on a cache's paths."""

from __future__ import annotations

import ast
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from replicator.cli import main
from replicator.errors import ConfigError
from replicator.runtime import jars
from replicator.runtime.spark import jar_helpers_conf
from replicator.runtime.writerconf import builder_snippet, render, spark_submit_flags, writer_conf
from replicator.storage import StorageOptions, configure, storage_options

LOG_STORES = {"spark.delta.logStore.s3a.impl", "spark.delta.logStore.s3.impl"}


@pytest.fixture()
def jar_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Every declared jar (all groups) and the commit store's, as empty stand-ins."""
    directory = tmp_path / "jars"
    directory.mkdir()
    for art in jars.artifacts(jars.ALL_GROUPS):
        (directory / art.file_name).write_bytes(b"")
    (directory / jars.COMMIT_STORE_JAR).write_bytes(b"")
    monkeypatch.setenv(jars.JARS_DIR_ENV, str(directory))
    saved = storage_options()
    try:
        yield directory
    finally:
        configure(saved)


def _submit_pairs(text: str) -> tuple[list[str], dict[str, str]]:
    words = shlex.split(text.replace("\\\n", " "))
    jar_list: list[str] = []
    conf: dict[str, str] = {}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        if flag == "--jars":
            jar_list = value.split(",")
        else:
            assert flag == "--conf"
            key, _, val = value.partition("=")
            conf[key] = val
    return jar_list, conf


def _builder_pairs(text: str) -> dict[str, str]:
    tree = ast.parse(text)  # valid Python
    return {node.args[0].value: node.args[1].value for node in ast.walk(tree)  # type: ignore[attr-defined]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "config"}


def test_an_s3a_warehouse_gets_the_commit_store_and_the_s3a_settings(jar_dir: Path) -> None:
    configure(StorageOptions(endpoint="http://127.0.0.1:9000",
                             spark_conf={"spark.hadoop.fs.s3a.secret.key": "s3cr3t",
                                         "spark.hadoop.fs.s3a.fast.upload.buffer": "bytebuffer"}))
    wc = writer_conf("s3a://b/p")
    for key in LOG_STORES:
        assert wc.conf[key] == jars.COMMIT_STORE_CLASS
    assert wc.conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert wc.conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert wc.conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert wc.conf["spark.hadoop.fs.s3a.fast.upload.buffer"] == "bytebuffer"  # the [spark] table, as the run's
    names = {Path(j).name for j in wc.jars}
    assert {jars.COMMIT_STORE_JAR, "hadoop-aws-3.4.1.jar", "delta-spark_2.13-4.0.1.jar"} <= names
    assert not any(n.startswith(("kafka-clients", "spark-sql-kafka")) for n in names), "only what a writer needs"
    assert all(Path(j).parent == jar_dir for j in wc.jars)

    jar_list, submit = _submit_pairs(spark_submit_flags(wc))
    python = _builder_pairs(builder_snippet(wc))
    assert jar_list == wc.jars and submit == wc.conf
    assert python.pop("spark.jars") == ",".join(wc.jars) and python == wc.conf

    text = render(wc)
    assert "s3cr3t" not in text and "spark.hadoop.fs.s3a.secret.key" in text  # named as withheld, not printed
    assert "S3SingleDriverLogStore" in text and "OPTIMIZE" in text
    assert "# spark-submit:" in text and "SparkSession.builder" in text
    assert not render(wc, "spark-submit").startswith("#") and not render(wc, "python").startswith("#")


def test_a_local_warehouse_needs_delta_only_and_says_so(jar_dir: Path, tmp_path: Path) -> None:
    wc = writer_conf(str(tmp_path / "wh"))
    assert not LOG_STORES & set(wc.conf) and not any(k.startswith("spark.hadoop.fs.s3") for k in wc.conf)
    assert {Path(j).name for j in wc.jars} == {a.file_name for a in jars.GROUPS["delta"]}
    assert "no log store" in render(wc)


def test_without_the_commit_store_jar_it_refuses_unless_conditional_writes_are_off(jar_dir: Path) -> None:
    (jar_dir / jars.COMMIT_STORE_JAR).unlink()
    with pytest.raises(ConfigError, match=r"replicator-s3commit\.jar.*replicator jars --s3"):
        writer_conf("s3a://b/p")
    configure(StorageOptions(conditional_writes=False))
    wc = writer_conf("s3a://b/p")
    assert not LOG_STORES & set(wc.conf) and "--s3-conditional-writes false" in render(wc)


def test_the_command_prints_both_forms(jar_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spark-conf", "--warehouse", "s3a://b/p", "--s3-endpoint", "http://127.0.0.1:9000"]) == 0
    out = capsys.readouterr().out
    assert f"--conf spark.delta.logStore.s3a.impl={jars.COMMIT_STORE_CLASS}" in out
    assert f'.config("spark.delta.logStore.s3a.impl", "{jars.COMMIT_STORE_CLASS}")' in out
    assert "--conf spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000" in out
    assert main(["spark-conf"]) == 2  # --warehouse is required


def test_the_sessions_jar_helpers_yield_to_the_users_own_settings(jar_dir: Path) -> None:
    store = str(jar_dir / jars.COMMIT_STORE_JAR)
    configure(StorageOptions())
    file_systems = {f"spark.hadoop.fs.{scheme}.impl": jars.DATA_FILE_FS_CLASS for scheme in ("s3a", "s3")}
    assert jar_helpers_conf([store]) == {
        "spark.delta.logStore.file.impl": jars.LOCAL_LOG_STORE_CLASS,
        "spark.sql.streaming.checkpointFileManagerClass": jars.CHECKPOINT_FILE_MANAGER_CLASS, **file_systems}
    assert jar_helpers_conf([str(jar_dir / "delta-spark.jar")]) == {}, "without the jar, Delta's and Spark's own"
    configure(StorageOptions(spark_conf={"spark.sql.streaming.checkpointFileManagerClass": "my.Manager",
                                         "spark.hadoop.fs.s3a.impl": "my.FileSystem"}))
    assert jar_helpers_conf([store]) == {"spark.delta.logStore.file.impl": jars.LOCAL_LOG_STORE_CLASS,
                                         "spark.hadoop.fs.s3.impl": jars.DATA_FILE_FS_CLASS}
