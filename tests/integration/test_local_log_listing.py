"""A local table's log listed from a name on by the directory's names first
(runtime/java/s3commit/LocalListingLogStore.java), where Delta's local store reads every entry's
status at every refresh: the same files, sizes and order as Delta's own store, checksum twins left
out as Hadoop's checksummed file system leaves them out, a missing directory FileNotFoundException,
and the replicator's session committing through it. The shared Spark session's JVM, a real table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from replicator.delta.writer import delta_ref
from replicator.runtime import jars

pytestmark = pytest.mark.integration


def _listed(store: Any, conf: Any, jvm: Any, path: str) -> list[tuple[str, int, int, bool]]:
    it = store.listFrom(jvm.org.apache.hadoop.fs.Path(path), conf)
    out = []
    while it.hasNext():
        s = it.next()
        out.append((s.getPath().toString(), int(s.getLen()), int(s.getModificationTime()), bool(s.isDirectory())))
    return out


def test_a_local_log_is_listed_as_delta_lists_it(spark: Any, tmp_path: Path) -> None:
    assert spark.conf.get("spark.delta.logStore.file.impl", None) == jars.LOCAL_LOG_STORE_CLASS
    table = str(tmp_path / "t")
    spark.sql(f"CREATE TABLE {delta_ref(table)} (id INT) USING delta TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    for i in range(7):
        spark.sql(f"INSERT INTO {delta_ref(table)} VALUES ({i})")
    log = Path(table) / "_delta_log"
    (log / "_nested").mkdir()  # a directory in the log is listed as Delta's store lists it
    (log / ".00000000000000000009.json.tmp").write_text("{}")  # a temporary file, hidden
    names = sorted(p.name for p in log.iterdir())
    assert ".00000000000000000003.json.crc" in names and "00000000000000000006.checkpoint.parquet" in names

    jvm = spark._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    ours = jvm.replicator.s3commit.LocalListingLogStore(conf)
    delta = jvm.io.delta.storage.LocalLogStore(conf)
    for start in ("00000000000000000000.json", "00000000000000000003", "00000000000000000006.checkpoint.parquet",
                  "00000000000000000007.json", "99999999999999999999.json", ".", "_"):
        for prefix in ("", "file://"):
            path = f"{prefix}{log}/{start}"
            listed = _listed(ours, conf, jvm, path)
            assert listed == _listed(delta, conf, jvm, path), (start, prefix)
            assert all(not Path(p).name.endswith(".crc") or not Path(p).name.startswith(".") for p, *_ in listed)
    assert [Path(p).name for p, *_ in _listed(ours, conf, jvm, f"{log}/00000000000000000006")] == [
        n for n in sorted(p.name for p in log.iterdir()) if n >= "00000000000000000006"] == [
        "00000000000000000006.checkpoint.parquet", "00000000000000000006.crc", "00000000000000000006.json",
        "00000000000000000007.crc", "00000000000000000007.json", "_last_checkpoint", "_nested",
        *(["_staged_commits"] if (log / "_staged_commits").exists() else [])]

    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        _listed(ours, conf, jvm, f"{tmp_path}/absent/_delta_log/00000000000000000000.json")
    (log / "_nested").rmdir()
    (log / ".00000000000000000009.json.tmp").unlink()
    spark.sql(f"INSERT INTO {delta_ref(table)} VALUES (7)")  # through the session's store
    assert spark.sql(f"SELECT count(*), sum(id) FROM {delta_ref(table)}").collect()[0][:] == (8, 28)
