"""The session's file:// file system is the fork-free one (tools/localfs), and it does what
Hadoop's own does: permissions set as asked, a link's status told apart from its target's, a
missing file reported missing, and Delta tables written and read through it."""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from replicator.runtime.spark import LOCALFS_JAR, jar_paths, local_fs_conf

pytestmark = pytest.mark.integration


def _hadoop(spark: Any) -> tuple[Any, Any]:
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    return jvm, conf


def _fs(spark: Any) -> Any:
    jvm, conf = _hadoop(spark)
    return jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)


def test_session_uses_the_nio_local_file_system(spark: Any) -> None:
    jars = jar_paths() or []
    assert any(Path(j).name == LOCALFS_JAR for j in jars), "make spark-jars builds the local file system jar"
    assert local_fs_conf(jars)["spark.hadoop.fs.file.impl"] == "replicator.localfs.NioLocalFileSystem"
    fs = _fs(spark)
    assert fs.getClass().getName() == "replicator.localfs.NioLocalFileSystem"
    assert fs.getRaw().getClass().getName() == "replicator.localfs.NioRawLocalFileSystem"
    jvm, conf = _hadoop(spark)
    afs = jvm.org.apache.hadoop.fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf).getDefaultFileSystem()
    assert afs.getClass().getName() == "replicator.localfs.NioLocalFs"


def test_off_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLICATOR_NIO_LOCAL_FS", "0")
    assert local_fs_conf([f"/x/{LOCALFS_JAR}"]) == {}
    monkeypatch.delenv("REPLICATOR_NIO_LOCAL_FS")
    assert local_fs_conf(["/x/delta-spark.jar"]) == {}
    assert local_fs_conf([f"/x/{LOCALFS_JAR}"])["spark.driver.extraClassPath"] == f"/x/{LOCALFS_JAR}"


@pytest.mark.parametrize("mode", [0o640, 0o755, 0o600, 0o444])
def test_set_permission(spark: Any, tmp_path: Path, mode: int) -> None:
    jvm, _ = _hadoop(spark)
    target = tmp_path / "f"
    target.write_text("x")
    path = jvm.org.apache.hadoop.fs.Path(target.as_uri())
    _fs(spark).setPermission(path, jvm.org.apache.hadoop.fs.permission.FsPermission(mode))
    assert stat.S_IMODE(os.stat(target).st_mode) == mode
    assert _fs(spark).getFileStatus(path).getPermission().toShort() == mode


def _raw(spark: Any, cls: str) -> Any:
    jvm, conf = _hadoop(spark)
    fs = functools.reduce(getattr, cls.split("."), jvm)()
    fs.initialize(jvm.java.net.URI("file:///"), conf)
    return fs


def _link_status(fs: Any, jvm: Any, path: Path) -> tuple[Any, ...]:
    try:
        st = fs.getFileLinkStatus(jvm.org.apache.hadoop.fs.Path(path.as_uri()))
    except Exception as exc:  # py4j wraps the Java exception
        return ("error", "FileNotFoundException" in str(exc))
    link = st.getSymlink().toUri().getPath() if st.isSymlink() else None
    return (st.isSymlink(), st.isFile(), st.isDirectory(), st.getLen(), link, st.getPath().toUri().getPath(),
            st.getModificationTime())


def test_link_status_as_hadoop_tells_it(spark: Any, tmp_path: Path) -> None:
    """getFileLinkStatus (what a rename checks) gives what Hadoop's own raw local file system gives,
    without its `readlink` fork: for a file, a directory, a symbolic link, a dangling link and a
    missing path."""
    jvm, _ = _hadoop(spark)
    ours = _raw(spark, "replicator.localfs.NioRawLocalFileSystem")
    hadoops = _raw(spark, "org.apache.hadoop.fs.RawLocalFileSystem")
    regular = tmp_path / "data.json"
    regular.write_text("12345")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link.json").symlink_to(regular)
    (tmp_path / "dangling.json").symlink_to(tmp_path / "gone")
    for name in ("data.json", "dir", "link.json", "dangling.json", "missing"):
        expected = _link_status(hadoops, jvm, tmp_path / name)
        assert _link_status(ours, jvm, tmp_path / name) == expected, name
    assert _link_status(ours, jvm, regular)[:4] == (False, True, False, 5)
    assert _link_status(ours, jvm, tmp_path / "missing") == ("error", True)


def test_commit_renames_refuse_an_existing_file(spark: Any, tmp_path: Path) -> None:
    """Delta's log store renames a commit into place with FileContext, which must refuse to
    overwrite an existing version (how a concurrent writer's commit is detected)."""
    jvm, conf = _hadoop(spark)
    hpath = jvm.org.apache.hadoop.fs.Path
    fc = jvm.org.apache.hadoop.fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    (tmp_path / "tmp.json").write_text("new")
    (tmp_path / "00001.json").write_text("old")
    none = jvm.org.apache.hadoop.fs.Options.Rename.values()[0]
    assert str(none) == "NONE"
    renames = spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    renames[0] = none
    with pytest.raises(Exception, match="FileAlreadyExistsException"):
        fc.rename(hpath((tmp_path / "tmp.json").as_uri()), hpath((tmp_path / "00001.json").as_uri()), renames)
    assert (tmp_path / "00001.json").read_text() == "old"
    fc.rename(hpath((tmp_path / "tmp.json").as_uri()), hpath((tmp_path / "00002.json").as_uri()), renames)
    assert (tmp_path / "00002.json").read_text() == "new"


def test_delta_files_get_the_usual_permissions(spark: Any, tmp_path: Path) -> None:
    """Data and log files come out as Hadoop writes them, 0644 (Hadoop's umask 022, applied
    whatever the process umask): the permission is set through java.nio, not dropped."""
    path = str(tmp_path / "t")
    spark.range(5).write.format("delta").save(path)
    spark.range(5, 8).write.format("delta").mode("append").save(path)
    assert spark.read.format("delta").load(path).count() == 8
    files = [p for p in Path(path).rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert files
    for p in files:
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o644, p
