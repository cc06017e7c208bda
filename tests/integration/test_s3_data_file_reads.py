"""Delta's data files on s3a:// read with their status asked once and, when small, with one GET
(runtime/java/s3commit/DataFileS3AFileSystem.java), not four HEADs and three GETs per file: the
request counts of a full read, the rows against the written ones, a file deleted behind a kept
status failing as a missing file does, the log's own files left to s3a, and a table's log
directory found once while a table deleted behind it still reads as gone. Real S3-compatible
server (tests/s3_fixtures.py), the shared Spark session."""

from __future__ import annotations

from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from replicator.delta.writer import delta_ref
from replicator.runtime import jars
from replicator.storage import fileio_for
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration

COUNTED = ("action_http_get_request", "action_http_head_request", "object_list_request")


def _counts(fs: Any) -> dict[str, int]:
    """The file system instance's own request counters (its IOStatistics)."""
    counters = fs.getIOStatistics().counters()
    return {name: int(counters.get(name) or 0) for name in COUNTED}


def _requests(spark: Any, fs: Any, sql: str) -> tuple[list[Any], dict[str, int]]:
    before = _counts(fs)
    rows = spark.sql(sql).collect()
    after = _counts(fs)
    return rows, {k: after.get(k, 0) - before.get(k, 0) for k in COUNTED}


def _data_files(table: str) -> list[str]:
    return sorted(full for full, _ in fileio_for(table).files(table)
                  if "/_delta_log/" not in full and full.endswith(".parquet"))


def _fresh(spark: Any, url: str, switch: str) -> Any:
    """A new file system instance for `url` (not the shared one) with the keep switch set."""
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
    conf.set("replicator.s3a.keepDataFileStatus", switch)
    return jvm.org.apache.hadoop.fs.FileSystem.newInstance(jvm.java.net.URI(url), conf)


def test_a_small_data_file_costs_a_read_one_get(s3_store: S3Server, spark: Any) -> None:
    table = s3_store.warehouse_url("data-file-reads") + "/t"
    spark.sql(f"CREATE TABLE {delta_ref(table)} (id INT, v STRING) USING delta")
    for i in range(4):  # one file each
        spark.sql(f"INSERT INTO {delta_ref(table)} SELECT /*+ COALESCE(1) */ id, concat('v', id) "
                  f"FROM range({i * 100}, {i * 100 + 100}) AS r(id)")
    files = _data_files(table)
    assert len(files) == 4
    jvm = spark._jvm
    fs = jvm.org.apache.hadoop.fs.Path(table).getFileSystem(spark._jsc.hadoopConfiguration())
    assert fs.getClass().getName() == jars.DATA_FILE_FS_CLASS

    query = f"SELECT count(*), sum(id), max(v) FROM {delta_ref(table)}"
    expected = (400, sum(range(400)), "v99")
    assert tuple(spark.sql(query).collect()[0]) == expected  # the log's commits read and cached
    hits = list(fs.keptHits())
    rows, requests = _requests(spark, fs, query)
    assert tuple(rows[0]) == expected
    # One GET per file and no HEAD at all (s3a's own reads take two HEADs and three GETs per file,
    # below; Delta's look for the table's _delta_log is answered from the kept yes).
    assert requests["action_http_get_request"] == len(files), requests
    assert requests["action_http_head_request"] == 0, requests
    status_hits, bytes_hits, _ = fs.keptHits()
    assert status_hits >= hits[0] + 4 * len(files), "both passes' status lookups and opens, per file"
    assert bytes_hits == hits[1] + len(files), "the row groups' pass read the footer pass's bytes"

    # Through the file system's own calls, on a fresh instance: two status lookups and an open
    # make one HEAD and one GET; turned off, s3a's own three HEADs.
    for switch, heads in (("true", 1), ("false", 3)):
        fresh = _fresh(spark, table, switch)
        try:
            path = jvm.org.apache.hadoop.fs.Path(files[1])
            before = _counts(fresh)
            length = fresh.getFileStatus(path).getLen()
            assert fresh.getFileStatus(path).getLen() == length
            stream = fresh.open(path)
            stream.seek(length - 4)
            assert stream.read() == ord("P")  # the Parquet magic that ends the file
            stream.close()
            after = _counts(fresh)
        finally:
            fresh.close()
        assert after["action_http_head_request"] - before["action_http_head_request"] == heads, switch
        assert after["action_http_get_request"] - before["action_http_get_request"] == 1, switch

    # A file deleted by another process behind a kept status: the read fails as a missing file does.
    _requests(spark, fs, query)
    fileio_for(table).remove(files[0])
    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        spark.sql(query).collect()


def test_a_tables_log_is_found_once_and_a_table_deleted_behind_it_is_gone(
        s3_store: S3Server, spark: Any) -> None:
    table = s3_store.warehouse_url("log-dir-probe") + "/t"
    log = spark._jvm.org.apache.hadoop.fs.Path(table + "/_delta_log")
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING").write.format("delta").save(table)

    # Delta's probe for _delta_log: a HEAD and a LIST the first time, nothing while the yes is kept;
    # turned off, each probe asks the store. A missing log is asked about every time.
    for switch, heads in (("true", 1), ("false", 3)):
        fresh = _fresh(spark, table, switch)
        try:
            before = _counts(fresh)
            assert all(fresh.exists(log) for _ in range(3))
            assert not fresh.exists(spark._jvm.org.apache.hadoop.fs.Path(table + "-none/_delta_log"))
            assert not fresh.exists(spark._jvm.org.apache.hadoop.fs.Path(table + "-none/_delta_log"))
            after = _counts(fresh)
            assert after["action_http_head_request"] - before["action_http_head_request"] == heads + 2, switch
            assert list(fresh.keptHits())[2] == (2 if switch == "true" else 0)
        finally:
            fresh.close()

    # The session's own instance: a statement finds the log without a request.
    fs = log.getFileSystem(spark._jsc.hadoopConfiguration())
    query = f"SELECT count(*), sum(id) FROM {delta_ref(table)}"
    assert tuple(spark.sql(query).collect()[0]) == (2, 3)
    hits = fs.keptHits()[2]
    rows, requests = _requests(spark, fs, query)
    assert tuple(rows[0]) == (2, 3)
    assert fs.keptHits()[2] > hits and requests["action_http_head_request"] == 0, requests

    # Deleted by another process while the yes is kept: a bare check still says yes (documented),
    # but Delta's log listing finds nothing, asks the store again, and the table reads as gone;
    # a new write there makes a new table with only its own rows.
    fileio_for(table).remove_tree(table)
    assert fs.exists(log)
    with pytest.raises(Exception, match=r"(?i)not a delta table|DELTA_|does not exist"):
        spark.sql(query).collect()
    assert not fs.existsNow(log) and not fs.exists(log)
    spark.createDataFrame([(7, "z")], "id INT, v STRING").write.format("delta").mode("append").save(table)
    assert tuple(spark.sql(query).collect()[0]) == (1, 7)

    # A delete through the session's file system forgets the kept yes at once.
    assert fs.exists(log)
    fs.delete(spark._jvm.org.apache.hadoop.fs.Path(table), True)
    assert not fs.exists(log)


def test_only_delta_data_files_are_kept(s3_store: S3Server, spark: Any) -> None:
    path = spark._jvm.org.apache.hadoop.fs.Path
    fs_class = path(s3_store.warehouse_url("any")).getFileSystem(spark._jsc.hadoopConfiguration())
    uuid = "0f8e2d3c-1b2a-4c5d-9e8f-7a6b5c4d3e2f"
    for name, kept in ((f"s3a://b/w/t/part-00000-{uuid}-c000.snappy.parquet", True),
                       (f"s3a://b/w/t/day=1/part-00001-{uuid}.c000.zstd.parquet", True),
                       (f"s3a://b/w/t/_change_data/cdc-00000-{uuid}.c000.snappy.parquet", True),
                       ("s3a://b/w/t/_delta_log/00000000000000000010.checkpoint.parquet", False),
                       (f"s3a://b/w/t/_delta_log/x/part-00000-{uuid}-c000.snappy.parquet", False),
                       ("s3a://b/w/t/part-00000.parquet", False),
                       (f"s3a://b/w/t/part-00000-{uuid}-c000.snappy.parquet.tmp", False),
                       ("s3a://b/w/_replicator/state.json", False)):
        assert fs_class.isDataFile(path(name)) is kept, name
