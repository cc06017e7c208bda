"""The seed's example event stream, end to end: real Kafka broker, real Delta."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.warehouse import Warehouse
from tests.integration.helpers import open_frame, produce, read_table, run_engine
from tests.kafka_fixtures import new_topic
from tests.support.cli import run_replicator

pytestmark = pytest.mark.integration

CREATE = b'{"q":"CREATE TABLE test.t1(id int primary key, val varchar(16))","t":3}'
DDL_KEY = b'{"ts":415508856908021766,"scm":"test","tbl":"t1","t":2}'
T1 = b'{"ts":415508878783938562,"scm":"test","tbl":"t1","t":1}'
T2 = b'{"ts":415508881418485761,"scm":"test","tbl":"t1","t":1}'


def resolved(ts: int) -> bytes:
    return json.dumps({"ts": ts, "t": 3}, separators=(",", ":")).encode()


# (partition, key JSON, value JSON or b"" for resolved): Logs 1-14 of the seed, verbatim.
SEED_LOGS: list[tuple[int, bytes, bytes]] = [
    (0, DDL_KEY, CREATE),
    (0, resolved(415508856908021766), b""),
    (1, DDL_KEY, CREATE),
    (1, resolved(415508856908021766), b""),
    (0, T1, b'{"u":{"id":{"t":3,"h":true,"v":1},"val":{"t":15,"v":"YWE="}}}'),
    (1, T1, b'{"u":{"id":{"t":3,"h":true,"v":2},"val":{"t":15,"v":"YmI="}}}'),
    (0, T1, b'{"u":{"id":{"t":3,"h":true,"v":3},"val":{"t":15,"v":"Y2M="}}}'),
    (0, T1, b'{"u":{"id":{"t":3,"h":true,"v":3},"val":{"t":15,"v":"Y2M="}}}'),
    (0, T2, b'{"d":{"id":{"t":3,"h":true,"v":1}}}'),
    (1, T2, b'{"d":{"id":{"t":3,"h":true,"v":2}}}'),
    (0, T2, b'{"u":{"id":{"t":3,"h":true,"v":3},"val":{"t":15,"v":"ZGQ="}}}'),
    (0, T2, b'{"u":{"id":{"t":3,"h":true,"v":4},"val":{"t":15,"v":"ZWU="}}}'),
    (0, resolved(415508881038376963), b""),
    (1, resolved(415508881038376963), b""),
]
PAST_SECOND_TXN = 415508881418485761 + 1


def seed_records(closing: bool = True) -> list[tuple[int, bytes, bytes]]:
    recs = []
    for p, k, v in SEED_LOGS + ([(0, resolved(PAST_SECOND_TXN), b""), (1, resolved(PAST_SECOND_TXN), b"")]
                                if closing else []):
        key, value = open_frame([k], [v])
        recs.append((p, key, value))
    return recs


def test_seed_stream_ends_as_dd_ee(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, seed_records())
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark)
    assert read_table(spark, wh, "test", "t1") == [{"id": 3, "val": "dd"}, {"id": 4, "val": "ee"}]
    assert summary.replays_dropped == 0  # Log 8 duplicates Log 7 before any resolved event
    assert summary.watermark == PAST_SECOND_TXN
    assert summary.tables["test.t1"].deletes >= 2

    # A second catch-up run finds nothing new and changes nothing.
    entry = Warehouse(wh).load_state().live_table("test", "t1")
    assert entry is not None
    versions_before = spark.sql(f"DESCRIBE HISTORY delta.`{entry.path}`").count()
    again = run_engine(kafka_bootstrap, topic, wh, spark)
    assert again.rows == 0
    assert spark.sql(f"DESCRIBE HISTORY delta.`{entry.path}`").count() == versions_before

    # replay --from-earliest into the same warehouse changes nothing ...
    replay = run_engine(kafka_bootstrap, topic, wh, spark, start="earliest")
    assert replay.already_applied == replay.rows
    assert spark.sql(f"DESCRIBE HISTORY delta.`{entry.path}`").count() == versions_before
    # ... and into an empty warehouse rebuilds the same table.
    wh2 = tmp_path / "wh2"
    run_engine(kafka_bootstrap, topic, wh2, spark, start="earliest")
    assert read_table(spark, wh2, "test", "t1") == read_table(spark, wh, "test", "t1")


def test_incomplete_window_is_not_applied(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, seed_records(closing=False))
    wh = tmp_path / "wh"
    run_engine(kafka_bootstrap, topic, wh, spark)
    # Only the first transaction is complete at the seed's last resolved ts.
    assert read_table(spark, wh, "test", "t1") == [
        {"id": 1, "val": "aa"}, {"id": 2, "val": "bb"}, {"id": 3, "val": "cc"}]
    # The rest arrives later: a second catch-up run completes it from the stored cursors.
    produce(kafka_bootstrap, topic, [(p, *open_frame([resolved(PAST_SECOND_TXN)], [b""])) for p in (0, 1)])
    run_engine(kafka_bootstrap, topic, wh, spark)
    assert read_table(spark, wh, "test", "t1") == [{"id": 3, "val": "dd"}, {"id": 4, "val": "ee"}]


def test_cli_run_and_tables_json(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, seed_records())
    wh = tmp_path / "wh"
    out = run_replicator("run", "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--protocol", "open",
                         "--warehouse", str(wh), "--until-caught-up", "--json-summary", timeout=300)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["watermark_tso"] == PAST_SECOND_TXN and summary["tables"]["test.t1"]["deletes"] >= 2
    tables = run_replicator("tables", "--warehouse", str(wh), "--json", timeout=60)
    assert tables.returncode == 0, tables.stderr
    listed = json.loads(tables.stdout)
    assert listed == [{"schema": "test", "table": "t1", "path": listed[0]["path"], "key": ["id"],
                       "applied_ts": PAST_SECOND_TXN, "source": "kafka", "reader_features": [],
                       "readers": ["spark", "deltalake-sql", "deltalake-dataset", "polars"], "reader_changes": [],
                       "catalog": None, "rows": listed[0]["rows"]}]
    assert isinstance(listed[0]["rows"], int) and listed[0]["rows"] >= 0
    assert Path(listed[0]["path"]).is_absolute() and (Path(listed[0]["path"]) / "_delta_log").is_dir()
