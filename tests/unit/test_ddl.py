"""DDL mapping, hand-parsers, partition predicates and catalog-only handlers (no Spark, no Kafka)."""

from __future__ import annotations

import datetime as dt
import zlib
from pathlib import Path
from typing import Any, cast

import pytest

from replicator.delta.ddl import (
    DDL_NAMES,
    DDL_TYPES,
    HANDLERS,
    DdlApplier,
    adopt_handle_key,
    doc_region,
    render_ddl_markdown,
)
from replicator.delta.ddl.defaults import backfill_literal, delta_default
from replicator.delta.ddl.partitions import partition_predicate
from replicator.delta.ddl.widening import can_widen, cast_expr
from replicator.errors import DdlError
from replicator.events import Column, DdlEvent, Flag, Op, Position, RowChange
from replicator.mysql.partitions import PartitionOp, parse_partition_op, parse_partitioning, split_partition_clause
from replicator.mysql.statements import RecoverStmt, parse_add_column_list, parse_recover, parse_rename_tables
from replicator.mysql.tokens import sanitize
from replicator.tables import ColumnSpec, TableSpec
from replicator.warehouse import State, TableEntry, Warehouse

DDL_DOC = Path(__file__).resolve().parents[2] / "docs" / "ddl.md"


class NoDelta:
    """Stands in for TableWriter where a handler must not touch Delta at all."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"catalog-only DDL touched Delta ({name})")


def applier(tmp_path: Path) -> DdlApplier:
    return DdlApplier(cast(Any, NoDelta()), Warehouse(tmp_path))


def entry(schema: str, table: str, cols: list[ColumnSpec], key: tuple[str, ...], uid: str = "u1",
          partition_def: str | None = None) -> TableEntry:
    spec = TableSpec(schema, table, tuple(cols), key, partition_def=partition_def)
    return TableEntry(uid=uid, schema=schema, table=table, path=f"/nowhere/{uid}", spec=spec.to_json(), created_ts=1)


def ddl(code: int, query: str, schema: str = "db", table: str = "", ts: int = 100) -> DdlEvent:
    return DdlEvent(ts, schema, table, code, query, Position("topic-x", 1, 42))


INT = ColumnSpec("id", "INT", "INT", nullable=False)


# -- the mapping ---------------------------------------------------------------------------------

def test_mapping_covers_codes_1_to_36_once() -> None:
    assert sorted(DDL_TYPES) == list(range(1, 37))
    assert DDL_NAMES[12] == "Modify Column" and DDL_NAMES[25] == "Recover Table"
    for code, rule in DDL_TYPES.items():
        assert rule.code == code and rule.operation
        if rule.kind == "no-op":
            assert rule.handler is None and rule.operation.startswith("no-op: ")
        else:
            assert rule.handler is not None and HANDLERS[code] is rule.handler
    no_ops = {c for c, r in DDL_TYPES.items() if r.kind == "no-op"}
    assert no_ops == {7, 8, 9, 10, 13, 16, 18, 21, 22, 24, 26, 27, 28, 29, 30, 31, 34, 35, 36}


def test_doc_region_is_the_rendered_mapping() -> None:
    rendered = render_ddl_markdown()
    assert doc_region(DDL_DOC.read_text(encoding="utf-8")) == rendered.strip(), (
        "docs/ddl.md's DDL table is stale: run  .venv/bin/python -c \"from replicator.delta.ddl import update_doc; "
        "update_doc('docs/ddl.md')\""
    )
    rows = [line for line in rendered.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert len(rows) == 36


@pytest.mark.parametrize("code", sorted(c for c, r in DDL_TYPES.items() if r.kind == "no-op"))
def test_no_op_codes_are_recorded_without_touching_delta(tmp_path: Path, code: int) -> None:
    state = State()
    out = applier(tmp_path).apply(state, ddl(code, "ALTER TABLE t SET TIFLASH REPLICA 1 /* any text */"))
    assert out.action == "no-op" and out.detail.startswith(DDL_NAMES[code]) and "no-op: " in out.detail
    assert state == State()


# -- errors --------------------------------------------------------------------------------------

def test_unknown_code_names_code_query_and_position(tmp_path: Path) -> None:
    with pytest.raises(DdlError) as err:
        applier(tmp_path).apply(State(), ddl(61, "ALTER TABLE t ADD c int, ADD INDEX i(c)"))
    msg = str(err.value)
    assert "unknown DDL type code 61" in msg and "ADD INDEX i(c)" in msg
    assert "topic 'topic-x' partition 1 offset 42" in msg


def test_unparsable_query_names_code_query_and_position(tmp_path: Path) -> None:
    state = State(tables={"u1": entry("db", "t", [INT], ("id",))})
    with pytest.raises(DdlError) as err:
        applier(tmp_path).apply(state, ddl(5, "ALTER TABLE t ADD COLUMN ((("))
    msg = str(err.value)
    assert "DDL type 5 (Add Column)" in msg and "ADD COLUMN (((" in msg and "offset 42" in msg
    with pytest.raises(DdlError, match="expected TABLE at 'something'"):
        applier(tmp_path).apply(state, ddl(25, "RECOVER something"))


def test_failed_ddl_leaves_catalog_untouched(tmp_path: Path) -> None:
    state = State(tables={"u1": entry("db", "a", [INT], ("id",), "u1"), "u2": entry("db", "c", [INT], ("id",), "u2")})
    before = state.model_copy(deep=True)
    # The first pair applies, the second clashes with a live table: nothing of it may stick.
    with pytest.raises(DdlError, match="name is taken"):
        applier(tmp_path).apply(state, ddl(14, "RENAME TABLE a TO b, b TO c"))
    assert state == before


def test_unsupported_partition_expression(tmp_path: Path) -> None:
    pdef = "PARTITION BY RANGE (a DIV 10) (PARTITION p0 VALUES LESS THAN (1))"
    state = State(tables={"u1": entry("db", "t", [INT, ColumnSpec("a", "INT", "INT")], ("id",),
                                      partition_def=pdef)})
    with pytest.raises(DdlError, match="unsupported partition expression") as err:
        applier(tmp_path).apply(state, ddl(20, "ALTER TABLE t DROP PARTITION p0"))
    assert "DDL type 20 (Drop Table Partition)" in str(err.value)
    bad_fn = "PARTITION BY HASH (ABS(a)) PARTITIONS 2"
    state.tables["u1"].spec["partition_def"] = bad_fn
    with pytest.raises(DdlError, match="unsupported partition expression ABS"):
        applier(tmp_path).apply(state, ddl(23, "ALTER TABLE t TRUNCATE PARTITION p1"))


# -- catalog-only handlers -----------------------------------------------------------------------

def test_schema_create_drop_and_recover_from_catalog(tmp_path: Path) -> None:
    a = applier(tmp_path)
    state = State(tables={"u1": entry("shop", "t", [INT], ("id",))})
    assert a.apply(state, ddl(1, "CREATE DATABASE IF NOT EXISTS `shop`", schema="shop")).action == "applied"
    assert a.apply(state, ddl(1, "CREATE SCHEMA `shop`", schema="shop")).action == "no-op"
    out = a.apply(state, ddl(2, "DROP DATABASE shop", schema="shop", ts=200))
    assert out.tables == ("u1",) and state.live_tables() == [] and state.schemas == []
    assert state.tables["u1"].status == "dropped" and state.tables["u1"].dropped_ts == 200
    a.apply(state, ddl(25, "RECOVER TABLE shop.t", schema="shop"))
    assert [e.uid for e in state.live_tables()] == ["u1"] and state.schemas == ["shop"]


def test_rename_table_single_multi_swap_and_alter_forms(tmp_path: Path) -> None:
    a = applier(tmp_path)
    state = State(tables={"u1": entry("db", "a", [INT], ("id",), "u1"), "u2": entry("db", "b", [INT], ("id",), "u2")})
    paths = {uid: e.path for uid, e in state.tables.items()}
    a.apply(state, ddl(14, "RENAME TABLE a TO tmp, b TO a, tmp TO b"))
    assert {(e.uid, e.table) for e in state.live_tables()} == {("u1", "b"), ("u2", "a")}
    a.apply(state, ddl(14, "ALTER TABLE `a` RENAME AS other.`a 2`"))
    a.apply(state, ddl(14, "ALTER TABLE b RENAME TO c"))
    e1, e2 = state.tables["u1"], state.tables["u2"]
    assert (e1.schema_name, e1.table, e2.schema_name, e2.table) == ("db", "c", "other", "a 2")
    assert e2.table_spec.schema == "other" and e2.table_spec.table == "a 2"
    assert {uid: e.path for uid, e in state.tables.items()} == paths  # paths never move
    assert "other" in state.schemas


def test_recover_picks_latest_drop_and_flashback_renames(tmp_path: Path) -> None:
    a = applier(tmp_path)
    old, new = entry("db", "t", [INT], ("id",), "old"), entry("db", "t", [INT], ("id",), "new")
    old.status, old.dropped_ts, new.status, new.dropped_ts = "dropped", 10, "dropped", 20
    state = State(tables={"old": old, "new": new})
    a.apply(state, ddl(25, "FLASHBACK TABLE t TO t2"))
    assert [(e.uid, e.table) for e in state.live_tables()] == [("new", "t2")]
    a.apply(state, ddl(25, "RECOVER TABLE BY JOB 77", table="t"))
    assert [(e.uid, e.table) for e in state.live_tables()] == [("old", "t"), ("new", "t2")]
    assert a.apply(state, ddl(25, "RECOVER TABLE t")).action == "no-op"


def test_drop_table_several_if_exists(tmp_path: Path) -> None:
    a = applier(tmp_path)
    state = State(tables={"u1": entry("db", "a", [INT], ("id",), "u1"), "u2": entry("db", "b", [INT], ("id",), "u2")})
    out = a.apply(state, ddl(4, "DROP TABLE IF EXISTS a, db.b, nope"))
    assert out.tables == ("u1", "u2") and state.live_tables() == []


def test_primary_key_add_drop_and_adoption_from_row_flags(tmp_path: Path) -> None:
    a = applier(tmp_path)
    cols = [INT, ColumnSpec("a", "INT", "INT"), ColumnSpec("b", "INT", "INT")]
    state = State(tables={"u1": entry("db", "t", cols, ("id",))})
    a.apply(state, ddl(33, "ALTER TABLE t DROP PRIMARY KEY"))
    assert state.tables["u1"].key == []
    a.apply(state, ddl(32, "ALTER TABLE t ADD PRIMARY KEY (`A`, b) NONCLUSTERED"))
    assert state.tables["u1"].key == ["a", "b"]
    a.apply(state, ddl(33, "ALTER TABLE db.t DROP PRIMARY KEY"))
    flagged = Column("b", 3, Flag.HANDLE_KEY | Flag.UNIQUE_KEY, 5)
    row = RowChange(200, "db", "t", Op.INSERT, (Column("id", 3, 0, 1), Column("a", 3, 0, 2), flagged))
    assert adopt_handle_key(state.tables["u1"], [row]).key == ("b",)
    assert state.tables["u1"].key == ["b"]


def test_add_partition_is_catalog_only(tmp_path: Path) -> None:
    a = applier(tmp_path)
    pdef = parse_partitioning("PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10))").render()
    state = State(tables={"u1": entry("db", "t", [INT], ("id",), partition_def=pdef)})
    a.apply(state, ddl(19, "ALTER TABLE t ADD PARTITION (PARTITION p1 VALUES LESS THAN (20), "
                           "PARTITION p2 VALUES LESS THAN MAXVALUE)"))
    part = parse_partitioning(state.tables["u1"].table_spec.partition_def or "")
    assert [p.name for p in part.partitions] == ["p0", "p1", "p2"]
    assert a.apply(state, ddl(19, "ALTER TABLE t ADD PARTITION (PARTITION p1 VALUES LESS THAN (20))")).action \
        == "no-op"
    hashed = parse_partitioning("PARTITION BY HASH(id) PARTITIONS 2").render()
    state.tables["u2"] = entry("db", "h", [INT], ("id",), "u2", hashed)
    a.apply(state, ddl(19, "ALTER TABLE h ADD PARTITION PARTITIONS 2"))
    part = parse_partitioning(state.tables["u2"].table_spec.partition_def or "")
    assert [p.name for p in part.partitions] == ["p0", "p1", "p2", "p3"]


def test_ddl_on_table_outside_the_catalog_is_a_recorded_no_op(tmp_path: Path) -> None:
    out = applier(tmp_path).apply(State(), ddl(6, "ALTER TABLE t DROP COLUMN c"))
    assert out.action == "no-op" and "not in the catalog" in out.detail


# -- parsers -------------------------------------------------------------------------------------

@pytest.mark.parametrize("clause", [
    "PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN MAXVALUE)",
    "PARTITION BY RANGE COLUMNS (a, `b`) (PARTITION p0 VALUES LESS THAN (10, '2020-01-01'), "
    "PARTITION p1 VALUES LESS THAN (MAXVALUE, MAXVALUE))",
    "partition by list (a) (partition p0 values in (1,2), partition p1 values in (3, NULL), partition pd default)",
    "PARTITION BY LIST COLUMNS (a,b) (PARTITION p0 VALUES IN ((1,'x'),(2,'y')))",
    "PARTITION BY HASH (a) PARTITIONS 4",
    "PARTITION BY KEY () PARTITIONS 3",
    "PARTITION BY RANGE (TO_DAYS(d)) (PARTITION p0 VALUES LESS THAN (TO_DAYS('2020-01-01')) ENGINE = InnoDB "
    "COMMENT 'x', PARTITION p1 VALUES LESS THAN MAXVALUE)",
])
def test_partitioning_round_trips_through_its_canonical_text(clause: str) -> None:
    part = parse_partitioning(clause)
    assert parse_partitioning(part.render()) == part


@pytest.mark.parametrize("clause", [
    "PARTITION BY LINEAR HASH (a) PARTITIONS 2",
    "PARTITION BY RANGE (a) SUBPARTITION BY HASH (b) (PARTITION p0 VALUES LESS THAN (1))",
    "PARTITION BY RANGE (a + 1) (PARTITION p0 VALUES LESS THAN (1))",
    "PARTITION BY RANGE (a) INTERVAL (10) FIRST PARTITION LESS THAN (10) LAST PARTITION LESS THAN (100)",
])
def test_unsupported_partitionings_are_refused(clause: str) -> None:
    with pytest.raises(DdlError, match="unsupported partition expression"):
        parse_partitioning(clause)


def test_create_table_partition_clause_split() -> None:
    head, clause = split_partition_clause(
        "CREATE TABLE t (a int, `partition by` int, c varchar(9) default 'PARTITION BY') "
        "PARTITION BY HASH(a) PARTITIONS 2;")
    assert head.endswith("default 'PARTITION BY')") and clause == "PARTITION BY HASH(a) PARTITIONS 2"
    assert split_partition_clause("CREATE TABLE t (a int)") == ("CREATE TABLE t (a int)", None)


def test_sanitize_drops_tidb_only_words_outside_strings_and_comments() -> None:
    out = sanitize("CREATE TABLE t (a bigint PRIMARY KEY /*T![clustered_index] CLUSTERED */ NONCLUSTERED, "
                      "b bigint AUTO_RANDOM(3), c varchar(12) default 'NONCLUSTERED')")
    assert "/*T![clustered_index] CLUSTERED */" in out and "'NONCLUSTERED'" in out
    assert ") NONCLUSTERED" not in out and "AUTO_RANDOM" not in out


def test_statement_parsers() -> None:
    assert parse_rename_tables("RENAME TABLE a TO b, db.c TO `d``x`;") == [
        ((None, "a"), (None, "b")), (("db", "c"), (None, "d`x"))]
    assert parse_rename_tables("ALTER TABLE a RENAME b") is None
    assert parse_recover("RECOVER TABLE db.t 3") == RecoverStmt("db", "t")
    ops = [parse_partition_op(q) for q in (
        "ALTER TABLE db.t DROP PARTITION IF EXISTS p0, `p 1`", "alter table t truncate partition all",
        "ALTER TABLE t ADD PARTITION (PARTITION p9 VALUES IN (9))", "ALTER TABLE t ADD COLUMN c int")]
    assert ops[0] == PartitionOp("db", "t", "drop", ("p0", "p 1"), if_exists=True)
    assert ops[1] == PartitionOp(None, "t", "truncate", all=True)
    assert ops[2] is not None and ops[2].defs[0].name == "p9" and ops[3] is None
    listed = parse_add_column_list("ALTER TABLE t ADD COLUMN IF NOT EXISTS (a int default 1, b text comment ')')")
    assert listed == ((None, "t"), "a int default 1, b text comment ')'", True)


# -- partition predicates (evaluated in Python against TiDB's placement rules) ------------------

def _eval(pred: str, row: dict[str, Any]) -> bool:
    """Evaluate the generated Spark predicate for one row with a tiny SQL->Python rewrite."""
    import re

    text = pred
    for name, value in row.items():
        text = text.replace(f"`{name}`", "None" if value is None else repr(value))
    text = re.sub(r"CAST\('([^']*)' AS (?:INT|BIGINT)\)", r"\1", text)
    text = text.replace("<=>", "==").replace(" = ", " == ").replace("NOT ", "not ").replace(" AND ", " and ")
    text = text.replace(" OR ", " or ").replace("TRUE", "True").replace("FALSE", "False").replace("NULL", "None")
    text = re.sub(r"(-?[\w.]+) IS None", r"isnull(\1)", text)
    return bool(eval(text, {"abs": abs, "isnull": lambda v: v is None}))  # test-only: text built from literals


def test_range_and_list_predicates_select_exactly_one_partition() -> None:
    cols = [ColumnSpec("a", "INT", "INT")]
    rng = parse_partitioning("PARTITION BY RANGE (a) (PARTITION p0 VALUES LESS THAN (10), "
                                "PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN MAXVALUE)")
    for a, want in [(None, "p0"), (-5, "p0"), (9, "p0"), (10, "p1"), (19, "p1"), (20, "p2"), (10**9, "p2")]:
        got = [p.name for p in rng.partitions if _eval(partition_predicate(rng, [p.name], cols), {"a": a})]
        assert got == [want], (a, got)
    lst = parse_partitioning("PARTITION BY LIST (a) (PARTITION p0 VALUES IN (1, 2), "
                                "PARTITION p1 VALUES IN (3, NULL), PARTITION pd DEFAULT)")
    for a, want in [(1, "p0"), (2, "p0"), (3, "p1"), (None, "p1"), (4, "pd")]:
        got = [p.name for p in lst.partitions if _eval(partition_predicate(lst, [p.name], cols), {"a": a})]
        assert got == [want], (a, got)


def test_hash_and_key_predicates_follow_tidb_placement() -> None:
    cols = [ColumnSpec("a", "BIGINT", "BIGINT")]
    hsh = partition_predicate(parse_partitioning("PARTITION BY HASH (a) PARTITIONS 4"), ["p3"], cols)
    assert hsh == "(abs(coalesce(`a`, 0) % 4) = 3)"
    key = partition_predicate(parse_partitioning("PARTITION BY KEY (a) PARTITIONS 5"), ["p2"], cols)
    assert key == "((crc32(concat(coalesce(CAST(CAST(`a` AS STRING) AS BINARY), X'00'))) % 5) = 2)"
    # TiDB: crc32.ChecksumIEEE(value text) % n; zlib.crc32 is the same IEEE polynomial.
    assert zlib.crc32(b"5") == 2226203566
    with pytest.raises(DdlError, match="only integer columns"):
        partition_predicate(parse_partitioning("PARTITION BY KEY (s) PARTITIONS 2"), ["p0"],
                               [ColumnSpec("s", "STRING", "VARCHAR(5)")])


# -- defaults and type changes -------------------------------------------------------------------

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)


@pytest.mark.parametrize(("col", "want"), [
    (ColumnSpec("c", "INT", "INT", default="5"), "CAST('5' AS INT)"),
    (ColumnSpec("c", "STRING", "VARCHAR(10)", default="'it''s' COLLATE utf8mb4_bin"), "'it\\'s'"),
    (ColumnSpec("c", "TIMESTAMP_NTZ", "DATETIME(3)", default="CURRENT_TIMESTAMP(3)"),
     "CAST('2026-01-02 03:04:05.678000' AS TIMESTAMP_NTZ)"),
    (ColumnSpec("c", "TIMESTAMP", "TIMESTAMP", default="NOW()"), "CAST('2026-01-02 03:04:05.000000' AS TIMESTAMP)"),
    (ColumnSpec("c", "BIGINT", "BIT(8)", default="b'101'"), "CAST('5' AS BIGINT)"),
    (ColumnSpec("c", "BINARY", "BINARY(3)", default="'ab'"), "X'616200'"),
    (ColumnSpec("c", "STRING", "VARCHAR(5)", default="x'4142'"), "'AB'"),
    (ColumnSpec("c", "TINYINT", "TINYINT(1)", default="TRUE"), "CAST('1' AS TINYINT)"),
    (ColumnSpec("c", "STRING", "ENUM('x','y')", labels=("x", "y"), nullable=False), "'x'"),
    (ColumnSpec("c", "STRING", "TIME(3)", default="'10:00:00'"), "'10:00:00.000'"),
    (ColumnSpec("c", "DATE", "DATE", nullable=False), None),
    (ColumnSpec("c", "INT", "INT", nullable=False), "CAST('0' AS INT)"),
    (ColumnSpec("c", "STRING", "VARCHAR(5)", nullable=False), "''"),
    (ColumnSpec("c", "INT", "INT"), None),
    (ColumnSpec("c", "DECIMAL(5,2)", "DECIMAL(5, 2)", default="-1.5"), "CAST('-1.5' AS DECIMAL(5,2))"),
])
def test_backfill_literal(col: ColumnSpec, want: str | None) -> None:
    assert backfill_literal(col, NOW) == want


def test_per_row_expression_default_cannot_be_backfilled() -> None:
    with pytest.raises(DdlError, match="cannot be reproduced"):
        backfill_literal(ColumnSpec("c", "STRING", "VARCHAR(36)", default="(UUID())"), NOW)
    assert delta_default(ColumnSpec("c", "STRING", "VARCHAR(36)", default="(UUID())")) is None
    assert delta_default(ColumnSpec("c", "TIMESTAMP_NTZ", "DATETIME", default="CURRENT_TIMESTAMP")) \
        == "localtimestamp()"


@pytest.mark.parametrize(("old", "new", "widen"), [
    ("INT", "BIGINT", True), ("int", "decimal(10,0)", True), ("TINYINT", "DECIMAL(3,0)", False),
    ("BIGINT", "DECIMAL(20,0)", True), ("BIGINT", "DOUBLE", False), ("INT", "DOUBLE", True),
    ("FLOAT", "DOUBLE", True), ("DECIMAL(5,2)", "DECIMAL(6,3)", True), ("DECIMAL(5,2)", "DECIMAL(6,4)", False),
    ("BIGINT", "INT", False), ("INT", "STRING", False), ("DATE", "TIMESTAMP_NTZ", True),
])
def test_type_widening_rules(old: str, new: str, widen: bool) -> None:
    assert can_widen(old, new) is widen


def test_cast_rounds_fractional_to_integral() -> None:
    assert cast_expr("c", "DECIMAL(5,2)", "INT") == "CAST(round(`c`) AS INT)"
    assert cast_expr("c`x", "INT", "STRING") == "CAST(`c``x` AS STRING)"
