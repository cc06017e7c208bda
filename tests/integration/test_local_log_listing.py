"""A local table's log listed from a name on by the directory's names first
(runtime/java/s3commit/LocalListingLogStore.java), where Delta's local store reads every entry's
status at every refresh: the same files, sizes and order as Delta's own store, checksum twins left
out as Hadoop's checksummed file system leaves them out, a missing directory FileNotFoundException,
and the replicator's session committing through it. The shared Spark session's JVM, a real table."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from replicator.delta.writer import delta_ref
from replicator.runtime import jars
from tests.integration.helpers import delta_version, merge_listing_the_log_once

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


def _other_writers_commit(log: Path, version: int) -> None:
    """A commit by another writer (no rows: a commit's info alone), the log directory's time kept
    as it was, so only the look at the next commit's name can tell."""
    before = log.stat()
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "OTHER WRITER"}}
    (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n")
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_statements_second_look_at_the_log_reuses_its_first(spark: Any, tmp_path: Path) -> None:
    """A MERGE lists its table's log when analysed and again when its transaction starts: the second
    is the first handed out again (ListingCache.java), so the statement lists the directory once. A
    commit by another writer right after a kept listing is seen at the next look all the same, and a
    file another writer adds is seen by the directory's time; `replicator.log.reuseListing=false`
    turns reuse off."""
    jvm = spark._jvm
    cache = jvm.replicator.s3commit.ListingCache
    table = str(tmp_path / "t")
    log = Path(table) / "_delta_log"
    # settled: a listing begun within the clock's tick of a change to the directory is never kept
    merge_listing_the_log_once(spark, table, settle_s=0.3)

    time.sleep(0.3)
    version = delta_version(spark, table)  # listed and kept
    _other_writers_commit(log, version + 1)
    assert delta_version(spark, table) == version + 1

    conf = spark._jsparkSession.sessionState().newHadoopConf()
    store = jvm.replicator.s3commit.LocalListingLogStore(conf)
    time.sleep(0.3)
    first = _listed(store, conf, jvm, f"{log}/00000000000000000000")
    (log / "zz-another-writers-file").write_text("")
    added = _listed(jvm.io.delta.storage.LocalLogStore(conf), conf, jvm, f"{log}/zz")
    assert _listed(store, conf, jvm, f"{log}/00000000000000000000") == [*first, *added] and len(added) == 1

    hadoop = spark._jsc.hadoopConfiguration()
    hadoop.set("replicator.log.reuseListing", "false")
    try:
        time.sleep(0.3)
        hits = cache.hits()
        spark.sql(f"MERGE INTO {delta_ref(table)} t USING (SELECT 4 AS id, 'd' AS v) s ON t.id = s.id "
                  "WHEN NOT MATCHED THEN INSERT *")
        assert cache.hits() == hits
    finally:
        hadoop.unset("replicator.log.reuseListing")
    assert spark.sql(f"SELECT count(*) FROM {delta_ref(table)}").collect()[0][0] == 4
