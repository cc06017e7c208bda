"""The Delta edge without Spark: idempotent-write confs, the conflict retry loop, the atomic state
file replace; and the warehouse table listing over both catalogs (Kafka and binlog)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replicator.binlog_apply import BinlogState, ColumnInfo, Position, TableInfo, save_state
from replicator.delta.session import TXN_APP_ID, TXN_VERSION, USER_METADATA, DeltaSession, is_conflict
from replicator.delta.typemap import spec_from_create
from replicator.errors import ConfigError
from replicator.storage.local import atomic_write
from replicator.views.listing import list_tables
from replicator.warehouse import State, TableEntry, Warehouse


class Conf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)

    def get(self, key: str, default: str | None) -> str | None:
        return self.values.get(key, default)


class Spark:
    """Runs statements; the first `fail` calls raise `error` (a rejected, uncommitted statement)."""

    def __init__(self, fail: int, error: str) -> None:
        self.conf = Conf()
        self.fail, self.error = fail, error
        self.seen: list[tuple[str, dict[str, str]]] = []

    def sql(self, text: str) -> Any:
        self.seen.append((text, dict(self.conf.values)))
        if len(self.seen) <= self.fail:
            raise RuntimeError(self.error)
        return SimpleNamespace(collect=lambda: [text])


CONFLICT = "io.delta.exceptions.ConcurrentAppendException: [DELTA_CONCURRENT_APPEND] Files were added"


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("replicator.delta.session.time.sleep", lambda _: None)


def test_idempotent_write_is_retried_with_its_confs_and_unset_after() -> None:
    spark = Spark(fail=2, error=CONFLICT)
    edge = DeltaSession(spark)  # type: ignore[arg-type]
    with edge.idempotent("binlog/abc", 7, '{"seq": 1}'):
        assert edge.sql_retrying("UPDATE x", "UPDATE x") == ["UPDATE x"]
    want = {TXN_APP_ID: "binlog/abc", TXN_VERSION: "7", USER_METADATA: '{"seq": 1}'}
    assert [confs for _, confs in spark.seen] == [want] * 3
    assert edge.conflict_retries == 2 and spark.conf.values == {}


def test_extra_confs_get_the_session_value_back() -> None:
    spark = Spark(fail=0, error="")
    spark.conf.values = {"spark.sql.shuffle.partitions": "2"}
    edge = DeltaSession(spark)  # type: ignore[arg-type]
    with edge.idempotent("a", 1, "{}", {"spark.sql.shuffle.partitions": "1", "spark.x": "on"}):
        edge.sql("MERGE")
    assert spark.seen[0][1]["spark.sql.shuffle.partitions"] == "1" and spark.seen[0][1]["spark.x"] == "on"
    assert spark.conf.values == {"spark.sql.shuffle.partitions": "2"}


def test_other_errors_are_not_retried_and_confs_are_unset() -> None:
    spark = Spark(fail=1, error="AnalysisException: cannot resolve `x`")
    edge = DeltaSession(spark)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="cannot resolve"), edge.idempotent("a", 1, "{}"):
        edge.sql_retrying("UPDATE x", "UPDATE x")
    assert len(spark.seen) == 1 and edge.conflict_retries == 0 and spark.conf.values == {}


def test_conflicts_past_the_retry_budget_reach_the_caller() -> None:
    spark = Spark(fail=100, error=CONFLICT)
    edge = DeltaSession(spark, max_retries=3)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError) as info:
        edge.sql_retrying("MERGE", "MERGE")
    assert is_conflict(info.value) and len(spark.seen) == 4 and edge.conflict_retries == 3


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "meta" / "state.json"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two" and sorted(p.name for p in target.parent.iterdir()) == ["state.json"]


def _binlog_table(wh: Path, db: str, name: str, status: str = "live") -> TableInfo:
    col = ColumnInfo(name="id", spark_type="INT", nullable=False)
    return TableInfo(uid=f"u-{name}", db=db, table=name, path=str(wh / "binlog" / db / name), columns=(col,),
                     key=("id",), status=status)  # type: ignore[arg-type]


def test_listing_reads_both_catalogs(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    with pytest.raises(ConfigError, match="not a replicator warehouse"):
        list_tables(tmp_path)
    save_state(wh.meta / "binlog.json", BinlogState(
        applied=Position(seq=3, gtid=(1, 4), file="log.bin", offset=9),
        tables=[_binlog_table(tmp_path, "s", "b"), _binlog_table(tmp_path, "s", "a"),
                _binlog_table(tmp_path, "s", "gone", "dropped")]))
    root, rows = list_tables(tmp_path)
    assert root == str(tmp_path.resolve())
    assert [(r.table, r.source, r.applied_seq, r.applied_text()) for r in rows] == [
        ("a", "binlog", 3, "commit #3"), ("b", "binlog", 3, "commit #3")]
    spec = spec_from_create("CREATE TABLE k (id INT PRIMARY KEY)", "shop")
    wh.save_state(State(applied_ts=5, tables={"u": TableEntry(uid="u", schema="shop", table="k",
                                                             path=str(tmp_path / "k"), spec=spec.to_json())}))
    _, rows = list_tables(tmp_path)
    assert rows[0].to_json() == {"schema": "shop", "table": "k", "path": str((tmp_path / "k").resolve()),
                                 "key": ["id"], "applied_ts": 5, "source": "kafka", "reader_features": [],
                                 "readers": ["spark", "deltalake-sql", "deltalake-dataset", "polars"],
                                 "reader_changes": [], "catalog": None}
    assert [r.source for r in rows] == ["kafka", "binlog", "binlog"]
    assert json.dumps([r.to_json() for r in rows])


def test_store_failures_of_delta_statements_become_one_line() -> None:
    """Spark's errors from s3a name the store's failure; the edge turns them into a StorageError
    that says what happened and that nothing was lost, without echoing the request's details."""
    from replicator.delta.session import as_storage_error, storage_failure

    refused = ("py4j.protocol.Py4JJavaError: An error occurred while calling o94.sql.\n: "
               "java.nio.file.AccessDeniedException: s3a://warehouse/t/_delta_log: getFileStatus on "
               "s3a://warehouse/t/_delta_log: software.amazon.awssdk.services.s3.model.S3Exception: "
               "SignatureDoesNotMatch (Service: S3, Status Code: 403, Request ID: abc)")
    assert storage_failure(RuntimeError(refused)) == "the store refused the credentials (access denied)"
    down = ("org.apache.hadoop.fs.s3a.AWSClientIOException: getFileStatus on s3a://warehouse/t: "
            "software.amazon.awssdk.core.exception.SdkClientException: Unable to execute HTTP request: "
            "Connect to 127.0.0.1:9000 failed: Connection refused")
    error = as_storage_error(RuntimeError(down))
    assert error is not None and "unreachable" in str(error) and "nothing is lost" in str(error)
    assert "127.0.0.1" not in str(error)
    assert storage_failure(RuntimeError("DELTA_CONCURRENT_APPEND ConcurrentAppendException")) is None
    assert as_storage_error(RuntimeError("[PARSE_SYNTAX_ERROR] near 'x'")) is None
