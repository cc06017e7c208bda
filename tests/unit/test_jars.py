"""The one declaration of the Spark session's jars: versions that match the installed pyspark and
delta-spark, fetching from a Maven repository (checked by SHA-1), clear one-line failures."""

from __future__ import annotations

import hashlib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

from replicator.cli import main
from replicator.runtime import jars
from replicator.runtime import spark as sparkmod


def test_versions_match_the_installed_python_packages() -> None:
    names = {a.name: a.version for g in jars.GROUPS.values() for a in g}
    assert names["delta-spark_2.13"] == version("delta-spark")
    assert names["spark-sql-kafka-0-10_2.13"] == version("pyspark")
    import pyspark

    hadoop = next((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")).name
    assert hadoop == f"hadoop-client-api-{names['hadoop-aws']}.jar"  # hadoop-aws at pyspark's Hadoop


def test_one_version_per_jar_and_no_bundle() -> None:
    every = [a for g in jars.GROUPS.values() for a in g]
    assert len({a.name for a in every}) == len(every)
    assert not any(a.name == "bundle" for a in every)  # the SDK's 558 MB bundle: never
    assert {"delta", "kafka", "s3"} == set(jars.GROUPS)


def test_groups_asked_for() -> None:
    assert jars.needs_s3("s3a://bucket/prefix") and jars.needs_s3("S3://b/p")
    assert not jars.needs_s3("/data/warehouse") and not jars.needs_s3("file:///data/w")
    with pytest.raises(ValueError, match="unknown jar group"):
        jars.require("hive")
    assert "delta" in jars.required()


def _repository(root: Path, arts: list[jars.Artifact], *, corrupt: str | None = None) -> str:
    for art in arts:
        path = root / art.repository_path
        path.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("META-INF/MANIFEST.MF", f"Name: {art.coordinate}\n")
        digest = hashlib.sha1(path.read_bytes()).hexdigest()
        if art.name == corrupt:
            digest = "0" * 40
        Path(f"{path}.sha1").write_text(f"{digest}  {art.file_name}\n")
    return root.as_uri()


def test_fetch_from_a_repository(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo", jars.artifacts(["delta", "kafka"]))
    into = tmp_path / "jars"
    into.mkdir()
    (into / "delta-spark_2.13-3.2.0.jar").write_bytes(b"old")  # another version: dropped
    (into / "unrelated-1.0.jar").write_bytes(b"kept")
    paths = jars.fetch(["delta", "kafka"], into, repo=repo, local_repository=tmp_path / "no-m2")
    assert [p.name for p in paths] == [a.file_name for a in jars.artifacts(["delta", "kafka"])]
    assert all(p.is_file() for p in paths)
    assert not (into / "delta-spark_2.13-3.2.0.jar").exists() and (into / "unrelated-1.0.jar").exists()
    assert not [p for p in into.iterdir() if p.name.startswith(".")]  # no partial files left
    assert jars.missing_from(into, ["delta", "kafka"]) == []
    assert jars.missing_from(into, ["s3"])[0].name == "hadoop-aws"


def test_a_missing_jar_is_one_line_naming_it_the_repository_and_the_remedy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repository(tmp_path / "repo", jars.artifacts(["delta"]))  # no Kafka source there
    code = main(["jars", "--kafka", "--into", str(tmp_path / "jars"), "--repository", repo])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1" in err and repo in err
    assert "REPLICATOR_SPARK_JARS" in err and "--packages" in err


def test_a_corrupt_jar_is_refused(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo", jars.artifacts(["delta"]), corrupt="delta-storage")
    with pytest.raises(jars.JarResolutionError, match=r"io\.delta:delta-storage:4\.0\.1 .* does not match its SHA-1"):
        jars.fetch(["delta"], tmp_path / "jars", repo=repo, local_repository=tmp_path / "no-m2")
    assert not (tmp_path / "jars" / "delta-storage-4.0.1.jar").exists()


def test_the_command_prints_paths_for_spark_submit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _repository(tmp_path / "repo", jars.artifacts(jars.ALL_GROUPS))
    assert main(["jars", "--s3", "--into", str(tmp_path / "jars"), "--repository", repo]) == 0
    out = capsys.readouterr().out.strip().split(",")
    assert len(out) == len(jars.artifacts(["delta", "s3"])) and all(Path(p).is_absolute() for p in out)
    assert main(["jars", "--all", "--pom"]) == 0
    pom = capsys.readouterr().out
    assert pom.count("<dependency>") == len(jars.artifacts(jars.ALL_GROUPS))


def test_a_users_jar_directory_must_hold_what_the_run_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jars, "REQUIRED", {"delta"})  # as a --reader driver run on a local directory
    monkeypatch.setenv("REPLICATOR_SPARK_JARS", str(tmp_path))
    (tmp_path / "delta-spark_2.13-4.0.1.jar").write_bytes(b"x")
    with pytest.raises(jars.JarResolutionError, match=r"lacks io\.delta:delta-storage:4\.0\.1: point REPLICATOR_SPARK"):
        sparkmod.jar_paths()
    (tmp_path / "delta-storage-4.0.0.jar").write_bytes(b"x")  # a user's own build of it will do
    assert sparkmod.jar_paths() == sorted(str(p) for p in tmp_path.glob("*.jar"))
    monkeypatch.setenv("REPLICATOR_SPARK_JARS", str(tmp_path / "nowhere"))
    with pytest.raises(jars.JarResolutionError, match="is not a directory"):
        sparkmod.jar_paths()


def test_without_a_directory_the_run_fetches_only_its_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repository(tmp_path / "repo", jars.artifacts(jars.ALL_GROUPS))
    monkeypatch.delenv("REPLICATOR_SPARK_JARS", raising=False)
    monkeypatch.setenv("REPLICATOR_MAVEN_REPOSITORY", repo)
    monkeypatch.setenv("REPLICATOR_JARS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(sparkmod, "DEFAULT_JARS_DIR", tmp_path / "no-checkout")
    monkeypatch.setattr(jars, "REQUIRED", {"delta"})
    names = [Path(p).name for p in sparkmod.jar_paths() or []]
    assert names == ["delta-spark_2.13-4.0.1.jar", "delta-storage-4.0.1.jar"]
    jars.require("s3")
    got = {Path(p).name for p in sparkmod.jar_paths() or []}
    assert "hadoop-aws-3.4.1.jar" in got and "spark-sql-kafka-0-10_2.13-4.0.1.jar" not in got
