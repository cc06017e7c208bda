"""Schema changes at lake scale (issue 33): a table at or over `--rewrite-limit` goes through RENAME
COLUMN, DROP COLUMN, ADD COLUMN and a type widening metadata-only (no data file, no change-feed
row), and the run says which readers it lost; under the limit the table is rewritten as before,
every reader reads it, and its change data feed shows the rewrite as churn, marked in the commit.

One history through the real engine (Open Protocol on Kafka), run twice: over and under the limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

from replicator.cli import main as cli_main
from replicator.delta.ddl.alter import REWRITE_CHURN
from replicator.events import Column, Flag, Op, TypeCode
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, run_engine
from tests.integration.test_ddl_stream import Stream
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration

PK = Flag.HANDLE_KEY | Flag.PRIMARY_KEY
INT, BIGINT, VARCHAR = TypeCode.LONG, TypeCode.LONGLONG, TypeCode.VARCHAR
Row = dict[str, Any]
N = 30  # rows before the first DDL
TIME_TRAVEL_SCHEMA = "spark.databricks.delta.changeDataFeed.allowTimeTravelOptionsForSchema"


def _cols(row: Row, *, c_code: int = INT) -> list[Column]:
    """Columns of one row image in the table's shape at that point (names as the row has them)."""
    types = {"id": INT, "a": VARCHAR, "aa": VARCHAR, "b": INT, "c": c_code, "d": VARCHAR}
    return [Column(name, types[name], PK if name == "id" else 0, value) for name, value in row.items()]


def _history() -> tuple[Stream, dict[int, Row]]:
    """CREATE, rows, RENAME COLUMN, rows, DROP COLUMN, ADD COLUMN, rows, widening MODIFY, rows; and
    the model of the final table."""
    st, t = Stream(), {}
    st.ddl("t", 3, "CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), b INT, c INT)")
    t.update({i: {"id": i, "a": f"x{i}", "b": i, "c": i} for i in range(N)})
    st.txn("t", [(Op.INSERT, _cols(r), []) for r in t.values()])

    st.ddl("t", 12, "ALTER TABLE t RENAME COLUMN a TO aa")
    t = {i: {"id": i, "aa": r["a"], "b": r["b"], "c": r["c"]} for i, r in t.items()}
    old1 = dict(t[1])
    t[1]["aa"] = "y1"
    t[N] = {"id": N, "aa": "new", "b": -1, "c": -1}
    st.txn("t", [(Op.UPDATE, _cols(t[1]), _cols(old1)), (Op.DELETE, [], _cols(t.pop(2))),
                 (Op.INSERT, _cols(t[N]), [])])

    st.ddl("t", 6, "ALTER TABLE t DROP COLUMN b")
    st.ddl("t", 5, "ALTER TABLE t ADD COLUMN d VARCHAR(5)")
    t = {i: {"id": i, "aa": r["aa"], "c": r["c"], "d": None} for i, r in t.items()}
    old3 = dict(t[3])
    t[3]["d"] = "d3"
    t[N + 1] = {"id": N + 1, "aa": "z", "c": 7, "d": "d"}
    st.txn("t", [(Op.UPDATE, _cols(t[3]), _cols(old3)), (Op.INSERT, _cols(t[N + 1]), [])])

    st.ddl("t", 12, "ALTER TABLE t MODIFY COLUMN c BIGINT")
    old4 = dict(t[4])
    t[4]["c"] = 40_000_000_000
    t[N + 2] = {"id": N + 2, "aa": "w", "c": -(2 ** 40), "d": None}
    st.txn("t", [(Op.UPDATE, _cols(t[4], c_code=BIGINT), _cols(old4, c_code=BIGINT)),
                 (Op.INSERT, _cols(t[N + 2], c_code=BIGINT), [])])
    return st, t


def _log(path: str) -> dict[int, list[dict[str, Any]]]:
    """Every commit of the table's `_delta_log`: version -> its actions."""
    log = Path(path) / "_delta_log"
    return {int(f.name[:20]): [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
            for f in sorted(log.glob("*.json"))}


def _commit_info(actions: list[dict[str, Any]]) -> dict[str, Any]:
    return next(a["commitInfo"] for a in actions if "commitInfo" in a)


def _ddl_versions(commits: dict[int, list[dict[str, Any]]]) -> list[int]:
    """The versions after CREATE that change the table's metadata (a DDL or a feature upgrade)."""
    return [v for v, actions in commits.items() if v > 0 and any("metaData" in a for a in actions)]


def _physical(fields: list[dict[str, Any]]) -> dict[str, str]:
    """Logical -> physical column name of a schema (no column mapping: the same)."""
    return {f["name"]: f.get("metadata", {}).get("delta.columnMapping.physicalName", f["name"]) for f in fields}


def _schemas(commits: dict[int, list[dict[str, Any]]]) -> dict[int, dict[str, str]]:
    """Version -> the logical -> physical names of the table's schema at that version."""
    out: dict[int, dict[str, str]] = {}
    current: dict[str, str] = {}
    for v, actions in sorted(commits.items()):
        for a in actions:
            if "metaData" in a:
                current = _physical(json.loads(a["metaData"]["schemaString"])["fields"])
        out[v] = current
    return out


def replay_change_feed(spark: Any, path: str) -> tuple[dict[Any, Row], dict[int, int]]:
    """The table rebuilt from its change data feed alone, and the feed's row count per version.

    Delta 4.0 refuses one batch read across a column-mapping RENAME / DROP COLUMN or a type change
    (DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE), so the feed is read in ranges that start at
    each metadata change, each range in its end version's schema; rows are kept by physical column
    name (column mapping's stable name), so a rename carries the values over without any row change.
    """
    commits = _log(path)
    schemas = _schemas(commits)
    last = max(commits)
    starts = [0, *_ddl_versions(commits)]
    state: dict[Any, Row] = {}
    per_version: dict[int, int] = dict.fromkeys(commits, 0)
    for start, nxt in zip(starts, [*starts[1:], last + 1], strict=True):
        end = nxt - 1
        rows = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", start)
                .option("endingVersion", end).load(path).collect())
        to_physical = schemas[end]
        for r in sorted(rows, key=lambda r: (r["_commit_version"], r["_change_type"] != "delete")):
            per_version[r["_commit_version"]] += 1
            d = r.asDict()
            kind = d.pop("_change_type")
            d.pop("_commit_version"), d.pop("_commit_timestamp")
            row = {to_physical[k]: v for k, v in d.items()}
            if kind == "delete":
                state.pop(row[to_physical["id"]], None)
            elif kind in ("insert", "update_postimage"):
                state[row[to_physical["id"]]] = row
    # A column added after a row was written reads as NULL in that row (no row change carries it).
    final = {k: {name: row.get(p) for name, p in schemas[last].items()} for k, row in state.items()}
    return final, per_version


def _deltalake_sql(path: str, version: int | None = None) -> list[Row]:
    table = deltalake.DeltaTable(path, version=version)
    rows = pa.table(deltalake.QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all()).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def _spark_rows(spark: Any, path: str) -> list[Row]:
    return sorted((r.asDict() for r in spark.read.format("delta").load(path).collect()), key=lambda r: r["id"])


def _tables_json(wh: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert cli_main(["tables", "--warehouse", str(wh), "--json"]) == 0
    listed: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return listed


def test_over_the_limit_schema_changes_are_metadata_only_and_the_feed_stays_faithful(
        kafka_bootstrap: str, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st, model = _history()
    topic = new_topic(kafka_bootstrap, 2, prefix="lake")
    produce(kafka_bootstrap, topic, st.records)
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, rewrite_limit=1)  # every table is "large"
    entry = Warehouse(wh).load_state().live_table("db", "t")
    assert entry is not None
    final = sorted(model.values(), key=lambda r: r["id"])
    assert _spark_rows(spark, entry.path) == final
    assert [(c["feature"], c["readers"]) for c in summary.reader_changes] == [
        ("columnMapping", ["spark", "deltalake-sql"]), ("typeWidening", ["spark"])]
    why = [c["why"] for c in summary.reader_changes]
    assert "RENAME COLUMN metadata-only: table holds" in why[0] and "at or over --rewrite-limit 1 B" in why[0]
    assert why[1].startswith("widening int -> BIGINT metadata-only")
    assert summary.to_json()["reader_changes"][1]["ddl"] == "ALTER TABLE t MODIFY COLUMN c BIGINT"
    assert "reader change     db.t: columnMapping" in summary.render()

    # deltalake's SQL path reads the column-mapped table right up to the widening, and then refuses it.
    commits = _log(entry.path)
    widening = next(v for v, a in commits.items() if '"typeWidening"' in (_commit_info(a).get("userMetadata") or ""))
    before = sorted((dict(r) for r in model.values() if r["id"] != N + 2), key=lambda r: r["id"])
    before[next(i for i, r in enumerate(before) if r["id"] == 4)]["c"] = 4
    assert _deltalake_sql(entry.path, widening - 1) == before
    with pytest.raises(Exception, match="TypeWidening"):
        _deltalake_sql(entry.path)

    ddl_versions = _ddl_versions(commits)
    ops = [_commit_info(commits[v])["operation"] for v in ddl_versions]
    assert ops == ["SET TBLPROPERTIES", "RENAME COLUMN", "DROP COLUMNS", "ADD COLUMNS", "SET TBLPROPERTIES",
                   "CHANGE COLUMN"], ops
    for v in ddl_versions:  # metadata-only: no data file added or removed, no change-data file
        assert not [a for a in commits[v] if {"add", "remove", "cdc"} & set(a)], (v, commits[v])
    assert not any('"rewrite":' in (_commit_info(a).get("userMetadata") or "") for a in commits.values())

    # One batch read of the whole feed is refused across the rename; by ranges it replays exactly.
    with pytest.raises(Exception, match="DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"):
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0).load(
            entry.path).collect()
    replayed, per_version = replay_change_feed(spark, entry.path)
    assert sorted(replayed.values(), key=lambda r: r["id"]) == final
    assert [per_version[v] for v in ddl_versions] == [0] * len(ddl_versions)  # no churn
    assert sum(per_version.values()) == N + (2 + 1 + 1) + (2 + 1) + (2 + 1)  # rows + updates' pre/post images

    listed = _tables_json(wh, capsys)
    assert [(t["reader_features"], t["readers"]) for t in listed] == [(["columnMapping", "typeWidening"], ["spark"])]
    assert [c["feature"] for c in listed[0]["reader_changes"]] == ["columnMapping", "typeWidening"]
    log = [json.loads(line) for line in (wh / "_replicator" / "windows.jsonl").read_text().splitlines()]
    outcomes = [d["outcome"] for r in log for d in r.get("ddls", []) if d["type"] in (5, 6, 12)]
    assert outcomes and not any("rewritten" in o for o in outcomes), outcomes


def test_under_the_limit_tables_are_rewritten_as_before_and_the_rewrite_says_churn(
        kafka_bootstrap: str, spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st, model = _history()
    topic = new_topic(kafka_bootstrap, 2, prefix="small")
    produce(kafka_bootstrap, topic, st.records)
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark)  # default: auto, 1 GiB
    assert summary.reader_changes == [] and summary.to_json()["reader_changes"] == []
    entry = Warehouse(wh).load_state().live_table("db", "t")
    assert entry is not None
    final = sorted(model.values(), key=lambda r: r["id"])
    assert _spark_rows(spark, entry.path) == final
    assert _deltalake_sql(entry.path) == final
    assert sorted(deltalake.DeltaTable(entry.path).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == final
    listed = _tables_json(wh, capsys)
    assert [(t["reader_features"], t["readers"], t["reader_changes"]) for t in listed] == [
        ([], ["spark", "deltalake-sql", "deltalake-dataset", "polars"], [])]

    commits = _log(entry.path)
    rewrites = {v: json.loads(_commit_info(a)["userMetadata"])["replicator"] for v, a in commits.items()
                if '"rewrite":' in (_commit_info(a).get("userMetadata") or "")}
    assert [r["rewrite"] for r in rewrites.values()] == ["rename a -> aa", "drop b", "widen c to BIGINT"]
    assert all(r["change_feed"] == REWRITE_CHURN for r in rewrites.values())
    # What a feed reader sees at a rewrite: every row deleted and inserted again. Read later, in
    # the latest schema, Delta 4.0 refuses the range (the table has no column mapping, so there is
    # no end-version schema mode); read in the schema of that version it shows the churn.
    rename = min(rewrites)
    feed = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", rename)
            .option("endingVersion", rename))
    with pytest.raises(Exception, match="DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA"):
        feed.load(entry.path).collect()
    spark.conf.set(TIME_TRAVEL_SCHEMA, "true")
    try:
        kinds = [r["_change_type"] for r in feed.option("versionAsOf", rename).load(entry.path).collect()]
    finally:
        spark.conf.unset(TIME_TRAVEL_SCHEMA)
    assert sorted(kinds) == ["delete"] * N + ["insert"] * N


def test_forced_choices_and_a_type_change_widening_does_not_cover(spark: Any, tmp_path: Path) -> None:
    """`--schema-change rewrite` rewrites even a table over the limit; under `metadata` a change type
    widening does not cover (INT -> VARCHAR) is still rewritten, says so, and enables nothing."""
    from replicator.changes import Change
    from replicator.delta import features
    from replicator.delta.ddl import DdlApplier
    from replicator.delta.writer import TableWriter
    from replicator.events import DdlEvent
    from replicator.warehouse import State

    delta = TableWriter(spark)
    ddl = DdlApplier(delta, Warehouse(tmp_path / "wh"))
    state = State()
    ddl.apply(state, DdlEvent(10, "db", "t", 3, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)"))
    entry = state.live_table("db", "t")
    assert entry is not None
    delta.merge(entry.path, entry.uid, entry.table_spec,
                [Change((i,), False, {"id": i, "a": i, "b": i}) for i in range(3)], 1, {})
    delta.schema_change, delta.rewrite_limit = "rewrite", 1
    out = ddl.apply(state, DdlEvent(20, "db", "t", 12, "ALTER TABLE t RENAME COLUMN a TO aa"))
    assert "table rewritten (rename a -> aa)" in out.detail and out.reader_changes == ()
    delta.schema_change = "metadata"
    out = ddl.apply(state, DdlEvent(30, "db", "t", 12, "ALTER TABLE t MODIFY COLUMN b VARCHAR(10)"))
    assert "not metadata-only: Delta type widening does not cover it" in out.detail, out.detail
    assert out.reader_changes == () and features.reader_features(entry.path) == []
    assert _spark_rows(spark, entry.path) == [{"id": i, "aa": i, "b": str(i)} for i in range(3)]
    last = _commit_info(_log(entry.path)[max(_log(entry.path))])
    assert json.loads(last["userMetadata"])["replicator"]["change_feed"] == REWRITE_CHURN
