"""Delta's log on s3a:// listed from a name on (runtime/java/s3commit ConditionalS3LogStore.listFrom,
S3's StartAfter) instead of listing the whole directory at every snapshot refresh: the same files,
sizes and order as the whole directory's listing filtered by name, across pages; nothing below the
log's top; a missing directory is FileNotFoundException, as Delta's contract asks. Real S3-compatible
server (tests/s3_fixtures.py), the shared Spark session's JVM."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError

from replicator.delta.writer import delta_ref
from replicator.storage import fileio_for
from tests.integration.helpers import delta_version, merge_listing_the_log_once
from tests.s3_fixtures import S3Server

pytestmark = pytest.mark.integration


def _listed(store: Any, conf: Any, jvm: Any, path: str) -> list[tuple[str, int]]:
    it = store.listFrom(jvm.org.apache.hadoop.fs.Path(path), conf)
    out = []
    while it.hasNext():
        status = it.next()
        out.append((status.getPath().getName(), int(status.getLen())))
    return out


def test_the_log_is_listed_from_a_name_on(s3_store: S3Server, spark: Any) -> None:
    table = s3_store.warehouse_url("log-listing") + "/t"
    spark.sql(f"CREATE TABLE {delta_ref(table)} (id INT) USING delta")
    for i in range(5):
        spark.sql(f"INSERT INTO {delta_ref(table)} VALUES ({i})")
    log = f"{table}/_delta_log"
    io = fileio_for(table)
    io.write(f"{log}/_nested/00000000000000000009.json", b"{}")  # below the log's top: not listed
    top = sorted((full.rsplit("/", 1)[-1], size) for full, size in io.files(log)
                 if "/" not in full[len(log) + 1:])
    assert len(top) >= 12  # six commits and their checksums

    jvm = spark._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    conf.set("fs.s3a.paging.maximum", "2")  # many pages
    store = jvm.replicator.s3commit.ConditionalS3LogStore(conf)
    for start in ("00000000000000000000.json", "00000000000000000003.json", "00000000000000000003",
                  "00000000000000000004.crc", "00000000000000000005.json", "99999999999999999999.json"):
        assert _listed(store, conf, jvm, f"{log}/{start}") == [(n, s) for n, s in top if n >= start], start

    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        _listed(store, conf, jvm, f"{table}-absent/_delta_log/00000000000000000000.json")
    assert spark.sql(f"SELECT count(*) FROM {delta_ref(table)}").collect()[0][0] == 5


def test_the_replicators_own_log_reads_list_from_the_last_checkpoint(s3_store: S3Server, spark: Any) -> None:
    """The replicator's own readers of a log (row counts, files, versions: `tables`, `status`, a
    follower's compaction) list it from the checkpoint `_last_checkpoint` names, through S3's
    StartAfter (storage/s3.py `children_from`): the same names as the whole listing filtered."""
    from replicator.delta.rowcount import file_counts, log_names, log_version, read_snapshot
    from replicator.storage import as_location

    table = s3_store.warehouse_url("log-listing-own") + "/t"
    spark.sql(f"CREATE TABLE {delta_ref(table)} (id INT) USING delta "
              "TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    for i in range(7):
        spark.sql(f"INSERT INTO {delta_ref(table)} VALUES ({i})")
    io = fileio_for(table)
    log = f"{table}/_delta_log"
    every = io.children(log)
    for first in ("", "0", "00000000000000000003", "00000000000000000006.checkpoint.parquet", "_last", "zzz"):
        assert io.children_from(log, first) == [n for n in every if n >= first], first

    names = log_names(as_location(table) / "_delta_log")
    assert names[0] == "00000000000000000006.checkpoint.parquet" and len(names) < len(every)
    snap = read_snapshot(table)
    assert snap is not None and (snap.version, snap.rows) == (7, 7) and log_version(table) == 7
    assert file_counts(table) == (7, 7)
    spark.sql(f"INSERT INTO {delta_ref(table)} VALUES (7)")
    later = read_snapshot(table, since=snap)
    assert later is not None and (later.version, later.rows) == (8, 8)


def test_a_statements_second_look_at_the_log_reuses_its_first(s3_store: S3Server, spark: Any) -> None:
    """A MERGE lists its table's log when analysed and again when its transaction starts: the second
    is the first handed out again after two HEADs (ListingCache.java), where the server may scan the
    whole directory for a LIST. Another writer's commit right after a kept listing is seen at the
    next look, and so is a commit file written over (its ETag)."""
    jvm = spark._jvm
    table = s3_store.warehouse_url("log-listing-reuse") + "/t"
    log = f"{table}/_delta_log"
    io = fileio_for(table)
    merge_listing_the_log_once(spark, table)

    version = delta_version(spark, table)  # listed and kept
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "OTHER WRITER"}}
    io.write(f"{log}/{version + 1:020d}.json", (json.dumps(info) + "\n").encode())
    assert delta_version(spark, table) == version + 1

    conf = spark._jsparkSession.sessionState().newHadoopConf()
    store = jvm.replicator.s3commit.ConditionalS3LogStore(conf)
    newest = f"{version + 1:020d}.json"
    listed = dict(_listed(store, conf, jvm, f"{log}/{newest}"))  # kept
    io.write(f"{log}/{newest}", (json.dumps(info) + "\n" + json.dumps(info) + "\n").encode())
    assert dict(_listed(store, conf, jvm, f"{log}/{newest}"))[newest] == 2 * listed[newest]
