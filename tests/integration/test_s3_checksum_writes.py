"""Delta's checksum files on s3a:// written with one PUT each (runtime/java/s3commit
DirectPutCheckpointFileManager) instead of a temporary file renamed: every commit still gets its
`.crc`, readable and right, no temporary object is left, a cancelled write leaves nothing, an
existing file is not overwritten unless asked, and a local path keeps Spark's own manager. Real
S3-compatible server (tests/s3_fixtures.py), the shared Spark session's JVM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from replicator.delta.writer import delta_ref
from replicator.runtime import jars
from replicator.storage import fileio_for
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration

KEY = "spark.sql.streaming.checkpointFileManagerClass"


def _manager(spark: Any, path: str) -> Any:
    jvm = spark._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    return jvm.replicator.s3commit.DirectPutCheckpointFileManager(jvm.org.apache.hadoop.fs.Path(path), conf)


def _write(manager: Any, spark: Any, path: str, data: bytes, overwrite: bool) -> Any:
    out = manager.createAtomic(spark._jvm.org.apache.hadoop.fs.Path(path), overwrite)
    out.write(bytearray(data))
    return out


def test_each_commit_gets_its_checksum_without_a_rename(s3_store: S3Server, spark: Any) -> None:
    assert spark.conf.get(KEY, None) == jars.CHECKPOINT_FILE_MANAGER_CLASS
    table = s3_store.warehouse_url("checksums") + "/t"
    spark.sql(f"CREATE TABLE {delta_ref(table)} (id INT) USING delta")
    for i in range(3):
        spark.sql(f"INSERT INTO {delta_ref(table)} VALUES ({i})")
    io = fileio_for(table)
    names = sorted(full.rsplit("/", 1)[-1] for full, _ in io.files(f"{table}/_delta_log"))
    assert [n for n in names if n.endswith(".crc")] == [f"{v:020d}.crc" for v in range(4)]
    assert not [n for n in names if n.endswith(".tmp") or n.startswith(".")]
    crc = json.loads(io.read(f"{table}/_delta_log/{3:020d}.crc") or b"{}")
    assert crc["numFiles"] == 3 and crc["numMetadata"] == 1 and crc["numProtocol"] == 1
    assert spark.sql(f"SELECT count(*) FROM {delta_ref(table)}").collect()[0][0] == 3


def test_a_put_is_atomic_and_honours_overwrite(s3_store: S3Server, spark: Any) -> None:
    base = s3_store.warehouse_url("checksums-direct")
    io = fileio_for(base)
    manager = _manager(spark, base)
    path = f"{base}/dir/a.crc"

    out = _write(manager, spark, path, b"first", overwrite=False)
    assert io.read(path) is None  # not visible before close
    out.close()
    assert io.read(path) == b"first"

    cancelled = _write(manager, spark, f"{base}/dir/b.crc", b"never", overwrite=False)
    cancelled.cancel()
    cancelled.close()  # after a cancel: nothing, no error
    assert io.read(f"{base}/dir/b.crc") is None

    with pytest.raises(Py4JJavaError, match="FileAlreadyExistsException"):
        _write(manager, spark, path, b"second", overwrite=False).close()
    assert io.read(path) == b"first"
    _write(manager, spark, path, b"third", overwrite=True).close()
    assert io.read(path) == b"third"
    assert sorted(full.rsplit("/", 1)[-1] for full, _ in io.files(f"{base}/dir")) == ["a.crc"]


def test_a_local_path_keeps_sparks_own_manager(spark: Any, tmp_path: Path) -> None:
    manager = _manager(spark, str(tmp_path))
    _write(manager, spark, str(tmp_path / "x.crc"), b"local", overwrite=False).close()
    assert (tmp_path / "x.crc").read_bytes() == b"local"
    cancelled = _write(manager, spark, str(tmp_path / "y.crc"), b"never", overwrite=False)
    cancelled.cancel()
    assert not (tmp_path / "y.crc").exists()
    jvm = spark._jvm
    sparks = jvm.org.apache.spark.sql.execution.streaming.FileContextBasedCheckpointFileManager(
        jvm.org.apache.hadoop.fs.Path(str(tmp_path)), spark._jsparkSession.sessionState().newHadoopConf())
    assert manager.isLocal() == sparks.isLocal()
