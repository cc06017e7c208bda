"""Each DDL family against real Delta: resulting Delta schema, data and catalog, plus re-runs.

A re-run applies the same DDL event again to the catalog as it was *before* the first apply
(what a crash between the Delta commit and the state commit leaves behind): schema, data and
catalog must end as after one apply.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import zlib
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from replicator.changes import Change
from replicator.cli import main as cli_main
from replicator.delta.ddl import TMP_PREFIX, DdlApplier, DdlOutcome
from replicator.delta.typemap import quote_string
from replicator.delta.writer import TableWriter, delta_ref
from replicator.errors import DdlError
from replicator.events import DdlEvent, tso_to_datetime
from replicator.mysql.tokens import quote_ident
from replicator.warehouse import State, TableEntry, Warehouse

pytestmark = pytest.mark.integration


class Env:
    """A warehouse with one DdlApplier; commit ts values only grow (as upstream's do)."""

    def __init__(self, spark: Any, root: Path) -> None:
        self.spark = spark
        self.wh = Warehouse(root)
        self.delta = TableWriter(spark)
        self.ddl = DdlApplier(self.delta, self.wh)
        self._ts = itertools.count(10_000, 10)

    def event(self, code: int, query: str, table: str = "") -> DdlEvent:
        return DdlEvent(next(self._ts), "db", table, code, query)

    def run(self, state: State, code: int, query: str, table: str = "") -> DdlOutcome:
        return self.ddl.apply(state, self.event(code, query, table))

    def create(self, state: State, query: str) -> TableEntry:
        out = self.run(state, 3, query)
        assert out.action == "applied", out
        return state.tables[out.tables[0]]

    def merge(self, entry: TableEntry, rows: Iterable[dict[str, Any]], deletes: Iterable[tuple[Any, ...]] = ()) -> None:
        """Rows through the engine's own MERGE path (catalog spec -> Arrow -> MERGE)."""
        spec = entry.table_spec
        changes = [Change(tuple(r[k] for k in spec.key), False, r) for r in rows]
        changes += [Change(k, True, None) for k in deletes]
        self.delta.merge(entry.path, entry.uid, spec, changes, next(self._ts), {})

    def insert(self, entry: TableEntry, rows: Iterable[dict[str, Any]]) -> None:
        """Seed rows with one plain SQL INSERT (cheaper than a MERGE; the MERGE path is used after DDL)."""
        rows = list(rows)
        names = list(rows[0])
        values = ", ".join("(" + ", ".join(_literal(r[n]) for n in names) + ")" for r in rows)
        cols = ", ".join(quote_ident(n) for n in names)
        self.delta.sql(f"INSERT INTO {delta_ref(entry.path)} ({cols}) VALUES {values}")

    def rows(self, entry: TableEntry, order: str = "id") -> list[dict[str, Any]]:
        df = self.spark.read.format("delta").load(entry.path)
        return sorted((r.asDict() for r in df.collect()), key=lambda r: (r[order] is not None, r[order]))

    def schema(self, entry: TableEntry) -> list[tuple[str, str, bool]]:
        df = self.spark.read.format("delta").load(entry.path)
        return [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema.fields]

    def field_meta(self, entry: TableEntry, name: str) -> dict[str, Any]:
        df = self.spark.read.format("delta").load(entry.path)
        return dict(df.schema[name].metadata)

    def history(self, entry: TableEntry) -> list[str]:
        hist = self.spark.sql(f"DESCRIBE HISTORY {delta_ref(entry.path)}").orderBy("version").collect()
        return [r.operation for r in hist]

    def catalog_columns(self, entry: TableEntry) -> list[tuple[str, str]]:
        return [(c.name, c.spark_type) for c in entry.table_spec.columns]

    def rerun(self, state: State, ev: DdlEvent, check: Callable[[], Any]) -> DdlOutcome:
        """Apply `ev`, then again on the pre-apply catalog (a crash before the state commit)."""
        before = state.model_copy(deep=True)
        out = self.ddl.apply(state, ev)
        seen = check()
        self.ddl.apply(before, ev)
        assert before == state, "a re-run must derive the same catalog"
        assert check() == seen, "a re-run must leave Delta schema and data as after one apply"
        return out


def _literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return quote_string(v)
    if isinstance(v, dt.date):
        return f"DATE'{v.isoformat()}'"
    if isinstance(v, Decimal):
        return f"{v}BD"
    return repr(v)


@pytest.fixture(scope="module")
def env(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Env:
    return Env(spark, tmp_path_factory.mktemp("ddl-warehouse"))


# -- tables ------------------------------------------------------------------------------------

def test_create_table_if_not_exists_like_and_partitioned(env: Env) -> None:
    state = State()
    t = env.create(state, "CREATE TABLE t_create (id INT PRIMARY KEY /*T![clustered_index] CLUSTERED */, "
                          "v VARCHAR(5) COMMENT 'vee', d DECIMAL(6,2) DEFAULT 1.5) COMMENT='tbl'")
    assert env.schema(t) == [("id", "int", False), ("v", "string", True), ("d", "decimal(6,2)", True)]
    assert env.field_meta(t, "v")["comment"] == "vee" and env.ddl.description(t.path) == "tbl"
    again = env.run(state, 3, "CREATE TABLE IF NOT EXISTS t_create (id INT PRIMARY KEY)")
    assert again.action == "no-op" and len(state.tables) == 1
    copy = env.create(state, "CREATE TABLE t_copy LIKE db.t_create")
    assert copy.path != t.path and env.schema(copy) == env.schema(t)
    assert copy.table_spec.columns == t.table_spec.columns and copy.key == ["id"]
    part = env.create(state, "CREATE TABLE t_part (id INT NOT NULL, d DATE, PRIMARY KEY (id) NONCLUSTERED) "
                             "PARTITION BY RANGE COLUMNS(d) (PARTITION p0 VALUES LESS THAN ('2020-01-01'), "
                             "PARTITION pmax VALUES LESS THAN (MAXVALUE));")
    assert part.table_spec.partition_def == ("PARTITION BY RANGE COLUMNS (`d`) (PARTITION `p0` VALUES LESS THAN "
                                             "('2020-01-01'), PARTITION `pmax` VALUES LESS THAN (MAXVALUE))")
    assert {e.table for e in state.live_tables()} == {"t_create", "t_copy", "t_part"}


def test_drop_table_hides_it_and_recover_brings_rows_back(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    state = State()
    a = env.create(state, "CREATE TABLE t_drop_a (id INT PRIMARY KEY, v VARCHAR(5))")
    b = env.create(state, "CREATE TABLE t_drop_b (id INT PRIMARY KEY)")
    env.insert(a, [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}])
    out = env.run(state, 4, "DROP TABLE t_drop_a, db.t_drop_b")
    assert set(out.tables) == {a.uid, b.uid} and state.live_tables() == []
    assert (Path(a.path) / "_delta_log").is_dir()
    env.wh.save_state(state)
    assert cli_main(["tables", "--warehouse", str(env.wh.root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    env.run(state, 25, "RECOVER TABLE t_drop_a")
    env.wh.save_state(state)
    assert cli_main(["tables", "--warehouse", str(env.wh.root), "--json"]) == 0
    assert [t["table"] for t in json.loads(capsys.readouterr().out)] == ["t_drop_a"]
    assert env.rows(a) == [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}]


def test_truncate_is_a_metadata_only_delete(env: Env) -> None:
    state = State()
    t = env.create(state, "CREATE TABLE t_trunc (id INT PRIMARY KEY, v VARCHAR(5))")
    env.insert(t, [{"id": i, "v": str(i)} for i in range(5)])
    env.run(state, 11, "TRUNCATE TABLE t_trunc")
    assert env.rows(t) == []
    metrics = env.spark.sql(f"DESCRIBE HISTORY {delta_ref(t.path)} LIMIT 1").collect()[0].operationMetrics
    assert metrics["numAddedFiles"] == "0" and metrics["numCopiedRows"] == "0"
    env.merge(t, [{"id": 9, "v": "new"}])
    assert env.rows(t) == [{"id": 9, "v": "new"}]


# -- columns -----------------------------------------------------------------------------------

def test_add_columns_backfill_upstream_defaults(env: Env) -> None:
    state = State()
    t = env.create(state, "CREATE TABLE t_add (id INT PRIMARY KEY, v VARCHAR(10))")
    env.insert(t, [{"id": 1, "v": "a"}, {"id": 2, "v": None}])
    env.run(state, 5, "ALTER TABLE t_add ADD COLUMN n INT NOT NULL DEFAULT 5 AFTER id")
    ev = env.event(5, "ALTER TABLE t_add ADD COLUMN (s VARCHAR(5) DEFAULT 'x''y', z INT NOT NULL, nul INT, "
                      "ts DATETIME(3) DEFAULT CURRENT_TIMESTAMP(3), e ENUM('a','b') NOT NULL, "
                      "bits BIT(4) DEFAULT b'101')")
    out = env.rerun(state, ev, lambda: (env.schema(t), env.rows(t)))
    assert out.action == "applied"
    when = tso_to_datetime(ev.commit_ts).replace(tzinfo=None)
    when = when.replace(microsecond=when.microsecond // 1000 * 1000)
    # Position clauses ignored, NOT NULL replicated as nullable.
    assert env.schema(t) == [("id", "int", False), ("v", "string", True), ("n", "int", True),
                             ("s", "string", True), ("z", "int", True), ("nul", "int", True),
                             ("ts", "timestamp_ntz", True), ("e", "string", True), ("bits", "bigint", True)]
    extra = {"n": 5, "s": "x'y", "z": 0, "nul": None, "ts": when, "e": "a", "bits": 5}
    assert env.rows(t) == [{"id": 1, "v": "a", **extra}, {"id": 2, "v": None, **extra}]
    cat = state.tables[t.uid].table_spec
    assert [c.name for c in cat.columns] == ["id", "v", "n", "s", "z", "nul", "ts", "e", "bits"]
    assert cat.column("n") is not None and cat.column("n").default == "5"  # type: ignore[union-attr]
    assert cat.column("e") is not None and cat.column("e").labels == ("a", "b")  # type: ignore[union-attr]
    entry = state.tables[t.uid]
    env.merge(entry, [{"id": 3, "v": "c", "n": 1, "s": "q", "z": 2, "nul": 3, "ts": when, "e": "b", "bits": 1}])
    assert env.rows(entry)[-1]["e"] == "b"


def test_drop_and_rename_columns_key_follows(env: Env) -> None:
    state = State()
    t = env.create(state, "CREATE TABLE t_cols (id INT PRIMARY KEY, a INT, b VARCHAR(5), c INT)")
    env.insert(t, [{"id": 1, "a": 10, "b": "x", "c": 100}])
    env.rerun(state, env.event(6, "ALTER TABLE t_cols DROP COLUMN c"), lambda: (env.schema(t), env.rows(t)))
    env.rerun(state, env.event(12, "ALTER TABLE t_cols RENAME COLUMN a TO a2"), lambda: env.schema(t))
    env.run(state, 12, "ALTER TABLE t_cols CHANGE COLUMN b b2 VARCHAR(30)")
    env.run(state, 12, "ALTER TABLE t_cols CHANGE `id` ident INT")
    entry = state.tables[t.uid]
    # the default profile renames and drops by rewriting the table: columns come out nullable
    assert env.schema(t) == [("ident", "int", True), ("a2", "int", True), ("b2", "string", True)]
    assert env.catalog_columns(entry) == [("ident", "INT"), ("a2", "INT"), ("b2", "STRING")]
    assert entry.key == ["ident"]
    env.merge(entry, [{"ident": 1, "a2": 11, "b2": "y"}, {"ident": 2, "a2": 20, "b2": "z"}])
    assert env.rows(entry, "ident") == [{"ident": 1, "a2": 11, "b2": "y"}, {"ident": 2, "a2": 20, "b2": "z"}]
    with pytest.raises(DdlError, match="merge key"):
        env.run(state, 6, "ALTER TABLE t_cols DROP COLUMN ident")


def test_modify_column_widens_in_place(env: Env) -> None:
    state = State()
    t = env.create(state, "CREATE TABLE t_wide (id INT PRIMARY KEY, i INT NOT NULL, u INT, b BIGINT, "
                          "d DECIMAL(5,2), f FLOAT, s VARCHAR(5), e ENUM('a','b'))")
    env.insert(t, [{"id": 1, "i": 7, "u": 8, "b": -9, "d": Decimal("1.25"), "f": 0.5, "s": "abc", "e": "b"}])
    for q in ("MODIFY i BIGINT NULL COMMENT 'wide'", "MODIFY u INT UNSIGNED", "MODIFY b BIGINT UNSIGNED",
              "MODIFY d DECIMAL(8,3)", "MODIFY f DOUBLE", "MODIFY s VARCHAR(50)", "MODIFY e ENUM('a','b','c')",
              "MODIFY id BIGINT"):
        env.run(state, 12, f"ALTER TABLE t_wide {q}")
    # the default profile widens by rewriting the table (no type widening): columns come out nullable
    assert env.schema(t) == [("id", "bigint", True), ("i", "bigint", True), ("u", "bigint", True),
                             ("b", "decimal(20,0)", True), ("d", "decimal(8,3)", True), ("f", "double", True),
                             ("s", "string", True), ("e", "string", True)]
    assert env.field_meta(t, "i")["comment"] == "wide"
    assert "UPDATE" not in env.history(t)  # widening never rewrote data
    entry = state.tables[t.uid]
    assert entry.table_spec.column("e").labels == ("a", "b", "c")  # type: ignore[union-attr]
    assert env.rows(t) == [{"id": 1, "i": 7, "u": 8, "b": Decimal(-9), "d": Decimal("1.250"), "f": 0.5, "s": "abc",
                            "e": "b"}]
    env.merge(entry, [{"id": 2**40, "i": None, "u": 2**32 - 1, "b": 2**64 - 1, "d": Decimal("12345.678"), "f": 1e300,
                       "s": "x" * 50, "e": "c"}])
    assert env.rows(t)[-1]["b"] == Decimal(2**64 - 1)


def test_modify_column_rewrites_values_without_loss(env: Env) -> None:
    state = State()
    t = env.create(state, "CREATE TABLE t_rw (id INT PRIMARY KEY, n INT, d DECIMAL(6,2), s VARCHAR(10), z INT)")
    env.insert(t, [{"id": 1, "n": 42, "d": Decimal("2.50"), "s": "17", "z": 1},
                   {"id": 2, "n": None, "d": Decimal("-1.50"), "s": "abc", "z": 2}])
    env.rerun(state, env.event(12, "ALTER TABLE t_rw MODIFY COLUMN n VARCHAR(20) COMMENT 'now text'"),
              lambda: (env.schema(t), env.rows(t)))
    # A crash mid-rewrite (temp column added, nothing else) resumes from the live schema.
    env.delta.sql(f"ALTER TABLE {delta_ref(t.path)} ADD COLUMNS (`{TMP_PREFIX}d` INT)")
    env.run(state, 12, "ALTER TABLE t_rw MODIFY d INT")
    assert env.schema(t) == [("id", "int", True), ("n", "string", True), ("d", "int", True),  # rewritten
                             ("s", "string", True), ("z", "int", True)]
    assert env.field_meta(t, "n")["comment"] == "now text"
    expected = [{"id": 1, "n": "42", "d": 3, "s": "17", "z": 1}, {"id": 2, "n": None, "d": -2, "s": "abc", "z": 2}]
    assert env.rows(t) == expected  # MySQL rounds half away from zero
    before = state.model_copy(deep=True)
    with pytest.raises(DdlError, match="do not convert") as err:
        env.run(state, 12, "ALTER TABLE t_rw MODIFY s INT")
    assert "DDL type 12" in str(err.value) and state == before
    assert env.schema(t)[3] == ("s", "string", True) and env.rows(t) == expected  # untouched, no temp column
    entry = state.tables[t.uid]
    assert env.catalog_columns(entry) == [("id", "INT"), ("n", "STRING"), ("d", "INT"), ("s", "STRING"), ("z", "INT")]
    env.merge(entry, [{"id": 3, "n": "free text", "d": 5, "s": "q", "z": 3}])
    assert env.rows(t)[-1] == {"id": 3, "n": "free text", "d": 5, "s": "q", "z": 3}


def test_set_default_and_comments(env: Env) -> None:
    state = State()
    t = env.create(state, "CREATE TABLE t_def (id INT PRIMARY KEY, v VARCHAR(10), w INT)")
    env.insert(t, [{"id": 1, "v": None, "w": 1}])
    env.rerun(state, env.event(15, "ALTER TABLE t_def ALTER COLUMN v SET DEFAULT 'dflt'"), lambda: env.schema(t))
    assert env.field_meta(t, "v")["CURRENT_DEFAULT"] == "'dflt'"
    assert env.ddl.has_feature(t.path, "allowColumnDefaults")
    assert state.tables[t.uid].table_spec.column("v").default == "'dflt'"  # type: ignore[union-attr]
    env.delta.sql(f"INSERT INTO {delta_ref(t.path)} (`id`, `w`) VALUES (2, 2)")  # a writer relying on it
    assert [r["v"] for r in env.rows(t)] == [None, "dflt"]  # existing rows unchanged, as upstream
    env.run(state, 15, "ALTER TABLE t_def ALTER COLUMN v DROP DEFAULT")
    assert "CURRENT_DEFAULT" not in env.field_meta(t, "v")
    assert state.tables[t.uid].table_spec.column("v").default is None  # type: ignore[union-attr]
    env.run(state, 17, "ALTER TABLE t_def COMMENT = 'it''s a table'")
    env.run(state, 12, "ALTER TABLE t_def MODIFY COLUMN w INT COMMENT 'col `w`'")
    assert env.ddl.description(t.path) == "it's a table" and state.tables[t.uid].table_spec.comment == "it's a table"
    assert env.field_meta(t, "w")["comment"] == "col `w`"


def test_rename_table_keeps_data_and_history(env: Env) -> None:
    state = State()
    a = env.create(state, "CREATE TABLE t_ren_a (id INT PRIMARY KEY)")
    c = env.create(state, "CREATE TABLE t_ren_c (id INT PRIMARY KEY)")
    env.insert(a, [{"id": 1}])
    env.insert(c, [{"id": 3}])
    history = env.history(a), env.history(c)
    env.run(state, 14, "RENAME TABLE t_ren_a TO t_ren_b, db.t_ren_c TO other.t_ren_d")
    env.run(state, 14, "ALTER TABLE t_ren_b RENAME TO t_ren_e")
    assert [(e.schema_name, e.table, e.path) for e in state.live_tables()] == [
        ("db", "t_ren_e", a.path), ("other", "t_ren_d", c.path)]
    assert (env.history(a), env.history(c)) == history  # catalog only: no Delta commit
    renamed = state.live_table("db", "t_ren_e")
    assert renamed is not None
    env.merge(renamed, [{"id": 2}])
    assert env.rows(renamed) == [{"id": 1}, {"id": 2}]


# -- partitions --------------------------------------------------------------------------------

def _ids(env: Env, entry: TableEntry) -> list[int]:
    return [r["id"] for r in env.rows(entry)]


def test_range_partition_drop_add_truncate(env: Env) -> None:
    state = State()
    t = env.create(state, "CREATE TABLE t_range (id INT PRIMARY KEY, v VARCHAR(5)) PARTITION BY RANGE (id) "
                          "(PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), "
                          "PARTITION p2 VALUES LESS THAN (30))")
    env.insert(t, [{"id": i, "v": None} for i in (-3, 1, 5, 10, 15, 20, 25)])
    env.rerun(state, env.event(20, "ALTER TABLE t_range DROP PARTITION p1"), lambda: env.rows(t))
    assert _ids(env, t) == [-3, 1, 5, 20, 25]
    env.run(state, 19, "ALTER TABLE t_range ADD PARTITION (PARTITION p3 VALUES LESS THAN MAXVALUE)")
    assert [p for p in ("p0", "p1", "p2", "p3") if f"`{p}`" in (state.tables[t.uid].table_spec.partition_def or "")] \
        == ["p0", "p2", "p3"]
    env.merge(state.tables[t.uid], [{"id": 12, "v": None}, {"id": 35, "v": None}])
    env.run(state, 23, "ALTER TABLE t_range TRUNCATE PARTITION p2")  # p2 now covers [10, 30)
    assert _ids(env, t) == [-3, 1, 5, 35]


def test_list_columns_partition_with_null_and_range_by_function(env: Env) -> None:
    state = State()
    t = env.create(state, "CREATE TABLE t_list (id INT PRIMARY KEY, r VARCHAR(4)) PARTITION BY LIST COLUMNS (r) "
                          "(PARTITION pe VALUES IN ('e', 'E2'), PARTITION pw VALUES IN ('w', NULL))")
    env.insert(t, [{"id": 1, "r": "e"}, {"id": 2, "r": "w"}, {"id": 3, "r": None}, {"id": 4, "r": "E2"}])
    env.run(state, 23, "ALTER TABLE t_list TRUNCATE PARTITION pw")
    assert _ids(env, t) == [1, 4]
    y = env.create(state, "CREATE TABLE t_years (id INT PRIMARY KEY, d DATE) PARTITION BY RANGE (YEAR(d)) "
                          "(PARTITION p2019 VALUES LESS THAN (2020), PARTITION p2020 VALUES LESS THAN (2021), "
                          "PARTITION pmax VALUES LESS THAN MAXVALUE)")
    env.insert(y, [{"id": i, "d": d} for i, d in enumerate(
        [None, dt.date(2019, 12, 31), dt.date(2020, 1, 1), dt.date(2020, 12, 31), dt.date(2021, 1, 1)])])
    env.run(state, 20, "ALTER TABLE t_years DROP PARTITION p2020")
    assert _ids(env, y) == [0, 1, 4]  # NULL lives in the first partition


@pytest.mark.parametrize(("method", "expected_partition"), [
    ("HASH", lambda v, n: abs(v) % n),  # TiDB: abs(v % n) with Go's truncating %
    ("KEY", lambda v, n: zlib.crc32(str(v).encode()) % n),  # TiDB: CRC32 of the value text
])
def test_hash_and_key_truncate_partition(env: Env, method: str, expected_partition: Callable[[int, int], int]) -> None:
    state = State()
    name = f"t_{method.lower()}"
    t = env.create(state, f"CREATE TABLE {name} (id BIGINT PRIMARY KEY) PARTITION BY {method} (id) PARTITIONS 4")
    ids = list(range(-9, 12))
    env.insert(t, [{"id": i} for i in ids])
    env.run(state, 23, f"ALTER TABLE {name} TRUNCATE PARTITION p1, p3")
    assert _ids(env, t) == [i for i in ids if expected_partition(i, 4) not in (1, 3)]
    with pytest.raises(DdlError, match="DROP PARTITION on"):
        env.run(state, 20, f"ALTER TABLE {name} DROP PARTITION p0")

