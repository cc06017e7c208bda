"""Replicated tables are readable outside Spark: deltalake (delta-rs) and polars read every table of
a simulated warehouse on the default profile exactly as Spark does and as the simulator expects;
column mapping arrives only with the DDL that needs it, once, and `tables` shows it."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import deltalake
import polars
import pyarrow as pa
import pytest

from replicator.changes import Change
from replicator.cli import main as cli_main
from replicator.delta import features
from replicator.delta.ddl import DdlApplier
from replicator.delta.writer import TableWriter
from replicator.events import DdlEvent
from replicator.sim.simcheck import ActualTable, check_warehouse, compare_tables, read_warehouse, spark_value_to_json
from replicator.sim.simulate import SimConfig, Simulation, produce
from replicator.warehouse import State, Warehouse
from tests.integration.helpers import run_engine
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def deltalake_rows(path: str, via: str = "datafusion") -> list[dict[str, Any]]:
    """Rows through deltalake: its DataFusion QueryBuilder, or `to_pyarrow_table()` (pyarrow dataset)."""
    table = deltalake.DeltaTable(path)
    if via == "pyarrow":
        rows: list[dict[str, Any]] = table.to_pyarrow_table().to_pylist()
        return rows
    return pa.table(deltalake.QueryBuilder().register("t", table).execute("SELECT * FROM t").read_all()).to_pylist()


def _cell(value: Any, spark_type: str) -> Any:
    """An Arrow-read cell in the convention Spark's reader uses (TIMESTAMP as epoch micros)."""
    if spark_type == "TIMESTAMP" and isinstance(value, dt.datetime):
        value = (value - EPOCH) // dt.timedelta(microseconds=1)
    return spark_value_to_json(value, spark_type)


def read_with(reader: str, warehouse: Path, spark_tables: dict[str, ActualTable]) -> dict[str, ActualTable]:
    """Every live table read by `reader` (deltalake or polars), in simcheck's form."""
    out: dict[str, ActualTable] = {}
    for entry in Warehouse(warehouse).load_state().live_tables():
        name = f"{entry.schema_name}.{entry.table}"
        types = spark_tables[name].types
        if reader == "deltalake":
            read = deltalake.DeltaTable(entry.path).to_pyarrow_table().to_pylist()
        else:
            read = polars.read_delta(entry.path).to_arrow().to_pylist()
        assert all(sorted(r) == sorted(types) for r in read), (reader, name)
        rows = [{c: _cell(r[c], types[c]) for c in types} for r in read]
        out[name] = ActualTable(rows, spark_tables[name].key, types)
    return out


def _tables_json(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    assert cli_main(["tables", "--warehouse", str(warehouse), "--json"]) == 0
    listed: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return listed


def test_every_reader_reads_a_simulated_warehouse(kafka_bootstrap: str, spark: Any, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    sim = Simulation(SimConfig(protocol="open", events=900, seed=7, partitions=2, tables=4,
                               ddl="add_column,modify_column,truncate,drop_table,rename_table"))
    assert {"add_column", "modify_column"} <= set(sim.ddl_kinds)
    topic = new_topic(kafka_bootstrap, 2, prefix="features")
    produce(sim, kafka_bootstrap, topic)
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="open")
    assert summary.ddl_applied == sim.stats.ddl
    assert check_warehouse(spark, wh, sim.expected) == []
    by_spark = read_warehouse(spark, wh)
    for reader in ("deltalake", "polars"):
        assert compare_tables(sim.expected, read_with(reader, wh, by_spark)) == [], reader
    listed = _tables_json(wh, capsys)
    # TIMESTAMP_NTZ (DATETIME) columns bring the timestampNtz reader feature; every reader read them above
    assert listed and all(set(t["reader_features"]) <= {"timestampNtz"} for t in listed), listed
    assert any(t["reader_features"] == ["timestampNtz"] for t in listed)
    # The widening MODIFY was applied by a rewrite, not with the typeWidening feature.
    log = [json.loads(line) for line in (wh / "_replicator" / "windows.jsonl").read_text().splitlines()]
    modifies = [d["outcome"] for r in log for d in r.get("ddls", []) if d["type"] == 12]
    assert modifies and any("table rewritten" in o for o in modifies), modifies


class Env:
    def __init__(self, spark: Any, root: Path, profile: str = "compatible") -> None:
        self.spark = spark
        self.wh = Warehouse(root)
        self.delta = TableWriter(spark, table_features=profile)
        self.ddl = DdlApplier(self.delta, self.wh)
        self.ts = 1000

    def run(self, state: State, code: int, query: str) -> str:
        self.ts += 10
        out = self.ddl.apply(state, DdlEvent(self.ts, "db", "", code, query))
        return out.detail

    def history(self, path: str) -> list[dict[str, Any]]:
        rows = self.spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version", "operation",
                                                                         "userMetadata").collect()
        return [r.asDict() for r in sorted(rows, key=lambda r: r["version"])]


def _read_all(spark: Any, path: str, readers: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for reader in readers:
        if reader == "spark":
            rows = [r.asDict() for r in spark.read.format("delta").load(path).collect()]
        elif reader.startswith("deltalake"):
            rows = deltalake_rows(path, "pyarrow" if reader == "deltalake-dataset" else "datafusion")
        else:
            rows = polars.read_delta(path).to_arrow().to_pylist()
        out[reader] = sorted(rows, key=lambda r: r["id"])
    return out


def test_rename_and_drop_column_keep_the_table_readable(spark: Any, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    env = Env(spark, tmp_path / "wh")
    state = State()
    env.run(state, 3, "CREATE TABLE db.t (id INT PRIMARY KEY, a VARCHAR(10), b INT, c INT COMMENT 'see')")
    entry = state.live_table("db", "t")
    assert entry is not None
    spec = entry.table_spec
    env.delta.merge(entry.path, entry.uid, spec, [Change((i,), False, {"id": i, "a": f"x{i}", "b": i, "c": -i})
                                                   for i in range(5)], 1, {})
    before = state.model_copy(deep=True)
    detail = env.run(state, 12, "ALTER TABLE db.t CHANGE COLUMN a aa VARCHAR(10)")
    assert "table rewritten (rename a -> aa)" in detail
    versions = len(env.history(entry.path))
    # A kill after the Delta commit but before the state commit: the re-run changes nothing.
    env.ts -= 10
    again = env.run(before, 12, "ALTER TABLE db.t CHANGE COLUMN a aa VARCHAR(10)")
    assert "rewritten" not in again and len(env.history(entry.path)) == versions
    env.run(state, 6, "ALTER TABLE db.t DROP COLUMN b")
    env.run(state, 12, "ALTER TABLE db.t MODIFY COLUMN c BIGINT COMMENT 'see'")
    expected = [{"id": i, "aa": f"x{i}", "c": -i} for i in range(5)]
    for reader, rows in _read_all(spark, entry.path, ("spark", "deltalake-sql", "deltalake-dataset", "polars")).items():
        assert rows == expected, reader
    fields = {f.name: f for f in spark.read.format("delta").load(entry.path).schema.fields}
    assert fields["c"].dataType.simpleString() == "bigint" and fields["c"].metadata.get("comment") == "see"
    rewrites = [json.loads(h["userMetadata"])["replicator"] for h in env.history(entry.path)
                if h["userMetadata"] and '"rewrite"' in h["userMetadata"]]
    assert [r["rewrite"] for r in rewrites] == ["rename a -> aa", "drop b", "widen c to BIGINT"]
    assert features.reader_features(entry.path) == []
    env.wh.save_state(state)
    assert [t["reader_features"] for t in _tables_json(env.wh.root, capsys)] == [[]]


def test_column_mapping_enabled_on_an_existing_table(spark: Any, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Why `compatible` rewrites instead: deltalake 1.6.6 reads column-mapped tables right only through
    its DataFusion QueryBuilder; `to_pyarrow_table()` (and `to_pandas()`) return NULLs, and polars
    refuses the table. Enabling the feature is once (check-before-alter) and recorded."""
    env = Env(spark, tmp_path / "wh")
    state = State()
    env.run(state, 3, "CREATE TABLE db.t (id INT PRIMARY KEY, a VARCHAR(10), b INT)")
    entry = state.live_table("db", "t")
    assert entry is not None
    env.delta.merge(entry.path, entry.uid, entry.table_spec,
                    [Change((i,), False, {"id": i, "a": f"x{i}", "b": i}) for i in range(3)], 1, {})
    event = DdlEvent(5000, "db", "t", 12, "ALTER TABLE db.t CHANGE COLUMN a aa VARCHAR(10)")
    assert env.ddl.enable_feature(entry.path, "columnMapping", event)
    assert not env.ddl.enable_feature(entry.path, "columnMapping", event)  # check-before-alter
    env.ddl.step = 1
    env.run(state, 12, "ALTER TABLE db.t CHANGE COLUMN a aa VARCHAR(10)")  # in place: the table has it
    env.run(state, 6, "ALTER TABLE db.t DROP COLUMN b")
    upgrades = [h for h in env.history(entry.path) if h["userMetadata"] and '"feature"' in h["userMetadata"]]
    assert len(upgrades) == 1 and json.loads(upgrades[0]["userMetadata"])["replicator"]["feature"] == "columnMapping"
    assert not any("rewrite" in (h["userMetadata"] or "") for h in env.history(entry.path))
    got = _read_all(spark, entry.path, ("spark", "deltalake-sql", "deltalake-dataset"))
    assert got["spark"] == got["deltalake-sql"] == [{"id": i, "aa": f"x{i}"} for i in range(3)]
    assert [r["aa"] for r in got["deltalake-dataset"]] == [None] * 3  # silently wrong
    assert features.reader_features(entry.path) == ["columnMapping"]
    with pytest.raises(Exception, match=r"(?i)column ?mapping"):
        polars.read_delta(entry.path)
    env.wh.save_state(state)
    assert [t["reader_features"] for t in _tables_json(env.wh.root, capsys)] == [["columnMapping"]]


def test_fast_profile_and_old_tables_keep_their_features(spark: Any, tmp_path: Path) -> None:
    fast = Env(spark, tmp_path / "fast", "fast")
    state = State()
    fast.run(state, 3, "CREATE TABLE db.t (id INT PRIMARY KEY, n INT)")
    entry = state.live_table("db", "t")
    assert entry is not None
    assert features.reader_features(entry.path) == ["columnMapping", "deletionVectors", "typeWidening"]
    detail = fast.run(state, 12, "ALTER TABLE db.t MODIFY COLUMN n BIGINT")
    assert "widened int -> BIGINT" in detail and "rewritten" not in detail
    # The same table under `compatible` (an old warehouse): nothing is taken away or rewritten.
    compat = Env(spark, tmp_path / "fast", "compatible")
    compat.ts = fast.ts
    compat.run(state, 12, "ALTER TABLE db.t MODIFY COLUMN n DECIMAL(30,0)")
    assert set(features.reader_features(entry.path)) == {"columnMapping", "deletionVectors", "typeWidening"}


def test_reader_matrix_is_true(spark: Any, tmp_path: Path) -> None:
    """docs/table-features.md's reader table (features.READERS): one-feature tables through each reader."""
    cases = {"none": {}, "changeDataFeed": {features.CDF: "true"},
             "columnMapping": {features.COLUMN_MAPPING: "name"},
             "deletionVectors": {features.DELETION_VECTORS: "true"},
             "typeWidening": {features.TYPE_WIDENING: "true"}}
    for name, props in cases.items():
        path = str(tmp_path / name)
        tbl = ", ".join(f"'{k}' = '{v}'" for k, v in props.items())
        spark.sql(f"CREATE TABLE delta.`{path}` (id INT, v INT) USING delta"
                  + (f" TBLPROPERTIES ({tbl})" if tbl else "")).collect()
        spark.sql(f"INSERT INTO delta.`{path}` VALUES (1, 10), (2, 20), (3, 30)").collect()
        if name == "deletionVectors":
            spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 2").collect()
        want = features.reader_features(path)
        assert want == ([] if name in ("none", "changeDataFeed") else [name])
        for reader in ("deltalake-sql", "deltalake-dataset", "polars"):
            ok = reader in features.readers_of(want)
            try:
                rows = (polars.read_delta(path).to_arrow().to_pylist() if reader == "polars"
                        else deltalake_rows(path, "pyarrow" if reader == "deltalake-dataset" else "datafusion"))
                # reading is returning the right rows (a reader may also ignore a feature silently)
                read = sorted(r["id"] for r in rows) == ([1, 3] if name == "deletionVectors" else [1, 2, 3])
            except Exception:
                read = False
            assert read == ok, (name, reader)
