"""Binlog apply without Spark: translation MySQL -> Spark SQL, variables, non-determinism, transaction
assembly, and the exactly-once state machine against a fake Delta (every crash point)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from replicator import binlog_apply as ba
from replicator.binlog_apply import (
    AddColumn,
    BinlogApplier,
    Catalog,
    CreateTable,
    Dml,
    DropColumn,
    DropTable,
    Noop,
    Statement,
    TransactionAssembler,
    check_paths,
    translate,
    txn_version,
    verify_generated,
)
from replicator.delta.session import TXN_APP_ID, TXN_VERSION, USER_METADATA
from replicator.errors import (
    ConfigError,
    DdlError,
    DecodeError,
    FrameError,
    SchemaError,
    StateError,
    UnsupportedError,
)
from replicator.formats.binlog import BinlogWriter, read_binlog
from replicator.formats.framing import encode_frame

ROOT = "/wh/binlog"


def run_ddl(catalog: Catalog, query: str, *, seq: int = 1, index: int = 0, db: str = "default") -> list[ba.Action]:
    actions = translate(Statement(query, database=db), catalog, seq=seq, index=index, tables_root=ROOT)
    for a in actions:
        if isinstance(a, (CreateTable, AddColumn, DropColumn, DropTable)):
            catalog.put(a.table)
    return actions


def one_sql(catalog: Catalog, query: str, variables: dict[str, str] | None = None, db: str = "default") -> str:
    actions = translate(Statement(query, tuple((variables or {}).items()), database=db), catalog, tables_root=ROOT)
    assert len(actions) == 1 and isinstance(actions[0], Dml)
    return actions[0].sql


@pytest.fixture
def cat() -> Catalog:
    c = Catalog()
    run_ddl(c, "CREATE TABLE whatever (nick VARCHAR(32) PRIMARY KEY, name VARCHAR(64), n INT NOT NULL DEFAULT 7, "
               "ts DATETIME DEFAULT CURRENT_TIMESTAMP, note TEXT)")
    run_ddl(c, "CREATE TABLE nokey (a INT, b TEXT)")
    run_ddl(c, "CREATE TABLE texts (k VARCHAR(10), v TEXT)")
    return c


def ref(c: Catalog, table: str = "whatever") -> str:
    t = c.live("default", table)
    assert t is not None
    return t.ref


# ---------------------------------------------------------------------------------------------
# Translation


def test_create_table_maps_types_key_and_properties() -> None:
    c = Catalog()
    [a] = run_ddl(c, "CREATE TABLE shop.`it``em` (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, "
                     "price DECIMAL(10,2) COMMENT 'in €', at DATETIME(6), PRIMARY KEY (id)) ENGINE=InnoDB "
                     "COMMENT='the items'", seq=3, index=1)
    assert isinstance(a, CreateTable)
    t = a.table
    assert (t.db, t.table, t.key) == ("shop", "it`em", ("id",))
    assert t.path == f"{ROOT}/shop/it_em-{ba.table_uid('shop', 'it`em', 3, 1)}"
    assert [(c.name, c.spark_type, c.nullable, c.auto_increment) for c in t.columns] == [
        ("id", "DECIMAL(20,0)", False, True), ("price", "DECIMAL(10,2)", True, False),
        ("at", "TIMESTAMP_NTZ", True, False),
    ]
    assert a.sql == (
        f"CREATE TABLE IF NOT EXISTS delta.`{t.path}` (`id` DECIMAL(20,0) NOT NULL, `price` DECIMAL(10,2) "
        "COMMENT 'in €', `at` TIMESTAMP_NTZ) USING delta COMMENT 'the items' TBLPROPERTIES "
        "('delta.columnMapping.mode' = 'name', 'delta.enableDeletionVectors' = 'true')"
    )
    assert c.live("shop", "it`em") is not None and c.live("shop", "IT`EM") is None  # table names case-sensitive


def test_create_existing_table(cat: Catalog) -> None:
    assert isinstance(run_ddl(cat, "CREATE TABLE IF NOT EXISTS whatever (x INT)")[0], Noop)
    with pytest.raises(DdlError, match=r"already exists"):
        run_ddl(cat, "CREATE TABLE whatever (x INT)")
    assert isinstance(run_ddl(cat, "CREATE DATABASE IF NOT EXISTS shop")[0], Noop)


def test_insert_multi_row_casts_to_column_types(cat: Catalog) -> None:
    sql = one_sql(cat, "INSERT INTO whatever VALUES (@nick, @name, 1, '2024-01-02 03:04:05', NULL), "
                       "('b', 'B', DEFAULT, NULL, \"dq\")", {"nick": "mk", "name": "Mats"})
    assert sql == (
        f"INSERT INTO {ref(cat)} (`nick`, `name`, `n`, `ts`, `note`) VALUES "
        "(CAST('mk' AS STRING), CAST('Mats' AS STRING), CAST(1 AS INT), CAST('2024-01-02 03:04:05' AS TIMESTAMP_NTZ), "
        "CAST(NULL AS STRING)), (CAST('b' AS STRING), CAST('B' AS STRING), CAST(7 AS INT), "
        "CAST(NULL AS TIMESTAMP_NTZ), CAST('dq' AS STRING))"
    )


def test_insert_column_list_fills_defaults_and_rejects_server_side_values(cat: Catalog) -> None:
    with pytest.raises(UnsupportedError, match=r"DEFAULT of column 'ts'.*CURRENT_TIMESTAMP"):
        one_sql(cat, "INSERT INTO whatever (nick) VALUES ('a')")
    sql = one_sql(cat, "INSERT INTO whatever (NICK, ts) VALUES ('a', NULL)")  # column names are case-insensitive
    assert "(CAST('a' AS STRING), CAST(NULL AS STRING), CAST(7 AS INT), CAST(NULL AS TIMESTAMP_NTZ)" in sql
    run_ddl(cat, "CREATE TABLE auto (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    for q in ("INSERT INTO auto (v) VALUES (1)", "INSERT INTO auto VALUES (NULL, 1)", "INSERT INTO auto VALUES (0, 1)"):
        with pytest.raises(UnsupportedError, match=r"AUTO_INCREMENT"):
            one_sql(cat, q)
    assert "CAST(5 AS INT)" in one_sql(cat, "INSERT INTO auto VALUES (5, 1)")
    with pytest.raises(SchemaError, match=r"2 values for 5 columns"):
        one_sql(cat, "INSERT INTO whatever VALUES (1, 2)")
    with pytest.raises(SchemaError, match=r"unknown column 'zz'"):
        one_sql(cat, "INSERT INTO whatever (zz) VALUES (1)")
    with pytest.raises(SchemaError, match=r"unknown table default.nope"):
        one_sql(cat, "INSERT INTO nope VALUES (1)")


def test_replace_is_a_merge_on_the_key_last_row_wins(cat: Catalog) -> None:
    sql = one_sql(cat, "REPLACE INTO whatever (nick, name, ts) VALUES ('a', 'x', NULL), ('a', 'y', NULL)")
    assert sql.startswith(f"MERGE INTO {ref(cat)} AS `t` USING (SELECT `_c0`, `_c1`, `_c2`, `_c3`, `_c4` FROM ")
    assert "PARTITION BY `_c0` ORDER BY `_rn` DESC" in sql
    assert "CAST('y' AS STRING), CAST(7 AS INT), CAST(NULL AS TIMESTAMP_NTZ), CAST(NULL AS STRING), 1)" in sql
    assert "ON `t`.`nick` = `s`.`_c0` WHEN MATCHED THEN UPDATE SET `t`.`nick` = `s`.`_c0`" in sql
    # no key: MySQL's REPLACE is a plain INSERT
    assert one_sql(cat, "REPLACE nokey VALUES (1, 'x')").startswith(f"INSERT INTO {ref(cat, 'nokey')} (`a`, `b`)")
    assert isinstance(sqlglot.parse_one(sql, read="spark"), exp.Merge)


def test_update_mysql_left_to_right_assignments(cat: Catalog) -> None:
    sql = one_sql(cat, "UPDATE whatever AS w SET n = n + 1, note = CONCAT(w.note, n), NAME = DEFAULT, ts = @t "
                       "WHERE w.nick = @who AND n > 0", {"t": "2024-01-01", "WHO": "bob"})
    assert sql == (
        f"UPDATE {ref(cat)} SET `n` = CAST(`n` + 1 AS INT), `note` = CAST(CONCAT(`note`, (`n` + 1)) AS STRING), "
        "`name` = CAST((NULL) AS STRING), `ts` = CAST('2024-01-01' AS TIMESTAMP_NTZ) "
        "WHERE `nick` = 'bob' AND `n` > 0"
    )


def test_update_on_update_now_column_must_be_set(cat: Catalog) -> None:
    run_ddl(cat, "CREATE TABLE stamped (id INT PRIMARY KEY, v INT, "
                 "changed TIMESTAMP DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP)")
    with pytest.raises(UnsupportedError, match=r"ON UPDATE CURRENT_TIMESTAMP"):
        one_sql(cat, "UPDATE stamped SET v = 1")
    assert "`changed` = CAST('2024-01-01 00:00:00' AS TIMESTAMP)" in one_sql(
        cat, "UPDATE stamped SET v = 1, changed = @now", {"now": "2024-01-01 00:00:00"})


def test_delete_and_truncate(cat: Catalog) -> None:
    assert one_sql(cat, "DELETE FROM whatever WHERE whatever.n IN (1, 2) OR note IS NULL") == (
        f"DELETE FROM {ref(cat)} WHERE `n` IN (1, 2) OR `note` IS NULL"
    )
    assert one_sql(cat, "TRUNCATE TABLE whatever") == f"DELETE FROM {ref(cat)}"
    assert one_sql(cat, "truncate whatever") == f"DELETE FROM {ref(cat)}"


def test_use_database_and_qualified_names(cat: Catalog) -> None:
    run_ddl(cat, "CREATE TABLE shop.t (a INT)")
    assert one_sql(cat, "INSERT INTO t VALUES (1)", db="shop").startswith(
        f"INSERT INTO {cat.live('shop', 't').ref}")  # type: ignore[union-attr]
    assert one_sql(cat, "INSERT INTO shop.t VALUES (1)", db="other").startswith(
        f"INSERT INTO {cat.live('shop', 't').ref}")  # type: ignore[union-attr]
    with pytest.raises(SchemaError, match=r"unknown table default.t"):
        one_sql(cat, "INSERT INTO t VALUES (1)")


def test_alter_add_drop_columns(cat: Catalog) -> None:
    actions = run_ddl(cat, "ALTER TABLE whatever ADD COLUMN c INT NOT NULL AFTER nick, "
                           "ADD COLUMN `d``x` VARCHAR(3) DEFAULT 'zz' FIRST, ADD e DOUBLE, DROP COLUMN n, DROP note",
                      seq=4, index=2)
    r = ref(cat)
    assert [(type(a).__name__, getattr(a, "sql", None), getattr(a, "step", None)) for a in actions] == [
        ("AddColumn", f"ALTER TABLE {r} ADD COLUMNS (`c` INT AFTER `nick`)", None),
        ("Dml", f"UPDATE {r} SET `c` = CAST(0 AS INT)", 1),
        ("AddColumn", f"ALTER TABLE {r} ADD COLUMNS (`d``x` STRING FIRST)", None),
        ("Dml", f"UPDATE {r} SET `d``x` = CAST('zz' AS STRING)", 2),
        ("AddColumn", f"ALTER TABLE {r} ADD COLUMNS (`e` DOUBLE)", None),
        ("DropColumn", f"ALTER TABLE {r} DROP COLUMN `n`", None),
        ("DropColumn", f"ALTER TABLE {r} DROP COLUMN `note`", None),
    ]
    t = cat.live("default", "whatever")
    assert t is not None
    assert [c.name for c in t.columns] == ["d`x", "nick", "c", "name", "ts", "e"]
    assert all(c.nullable for c in t.columns if c.name != "nick")  # Delta cannot ADD a NOT NULL column
    with pytest.raises(DdlError, match=r"already exists"):
        run_ddl(cat, "ALTER TABLE whatever ADD COLUMN C INT")
    with pytest.raises(DdlError, match=r"unknown column 'zz'"):
        run_ddl(cat, "ALTER TABLE whatever DROP COLUMN zz")
    assert isinstance(run_ddl(cat, "ALTER TABLE whatever DROP COLUMN IF EXISTS zz")[0], Noop)
    with pytest.raises(UnsupportedError, match=r"CURRENT_TIMESTAMP"):
        run_ddl(cat, "ALTER TABLE whatever ADD COLUMN t2 DATETIME DEFAULT CURRENT_TIMESTAMP")
    for q in ("ALTER TABLE whatever MODIFY c BIGINT", "ALTER TABLE whatever RENAME TO w2",
              "ALTER TABLE whatever CHANGE c c2 INT", "ALTER TABLE whatever ADD INDEX (c)"):
        with pytest.raises(DdlError, match=r"unsupported ALTER TABLE action"):
            run_ddl(cat, q)


def test_drop_column_leaves_key(cat: Catalog) -> None:
    run_ddl(cat, "ALTER TABLE whatever DROP COLUMN nick")
    t = cat.live("default", "whatever")
    assert t is not None and t.key == ()


def test_drop_table(cat: Catalog) -> None:
    with pytest.raises(DdlError, match=r"unknown table default.nope"):
        run_ddl(cat, "DROP TABLE whatever, nope")
    assert cat.live("default", "whatever") is not None  # checked before anything is dropped
    actions = run_ddl(cat, "DROP TABLE IF EXISTS whatever, nope")
    assert [type(a) for a in actions] == [DropTable, Noop]
    assert cat.live("default", "whatever") is None
    assert [t.status for t in cat.tables() if t.table == "whatever"] == ["dropped"]
    [created] = run_ddl(cat, "CREATE TABLE whatever (x INT)", seq=9)
    old = next(t for t in cat.tables() if t.status == "dropped")
    assert isinstance(created, CreateTable) and created.table.path != old.path


UNSUPPORTED = [
    ("SELECT 1", "SELECT statements"),
    ("SET @x = 1", "SET statements"),
    ("BEGIN", "TRANSACTION statements"),
    ("INSERT IGNORE INTO whatever VALUES ('a', 'b', 1, NULL, NULL)", "IGNORE"),
    ("INSERT INTO whatever (nick) VALUES ('a') ON DUPLICATE KEY UPDATE name = 'x'", "CONFLICT"),
    ("INSERT INTO whatever SELECT * FROM nokey", "only INSERT ... VALUES"),
    ("REPLACE INTO whatever SELECT * FROM nokey", "only REPLACE ... VALUES"),
    ("UPDATE whatever, nokey SET whatever.n = 1", "multi-table"),
    ("UPDATE whatever JOIN nokey ON a = n SET n = 1", "multi-table"),
    ("UPDATE whatever SET n = 1 ORDER BY nick LIMIT 1", "ORDER"),
    ("DELETE FROM whatever ORDER BY nick LIMIT 1", "ORDER"),
    ("DELETE whatever FROM whatever JOIN nokey ON a = n", "TABLES"),
    ("DELETE FROM whatever WHERE n IN (SELECT a FROM nokey)", "subqueries"),
    ("UPDATE whatever SET n = nokey.a", "another table"),
    ("INSERT INTO whatever (nick) VALUES (1); DROP TABLE whatever", "exactly one statement"),
    ("CREATE TEMPORARY TABLE tmp (a INT)", "TEMPORARY"),
    ("CREATE TABLE t2 AS SELECT 1", "AS SELECT"),
    ("CREATE TABLE t2 LIKE whatever", "LIKE"),
    ("CREATE INDEX i ON whatever (n)", "CREATE INDEX"),
    ("DROP DATABASE shop", "DROP DATABASE"),
    ("DROP VIEW v", "DROP VIEW"),
    ("ALTER TABLE whatever ADD (d INT, e TEXT)", "unsupported statement syntax"),
    ("INSERT INTO whatever (note) VALUES (@@sql_mode)", "system variable"),
    ("GRANT ALL ON *.* TO x", "GRANT"),
    ("CREATE TABLE t3 (a INT DEFAULT @x)", "variables are not supported in DDL"),
    ("INSERT INTO whatever (nick, note) VALUES ('a', @missing)", "does not set"),
    ("INSERT INTO whatever (nick, note) VALUES ('a', `co l`(1))", "not a plain identifier"),
    ("INSERT INTO c.d.t VALUES (1)", "three-part"),
]


@pytest.mark.parametrize(("query", "match"), UNSUPPORTED)
def test_unsupported_statements_are_refused(cat: Catalog, query: str, match: str) -> None:
    with pytest.raises((UnsupportedError, DdlError, SchemaError), match=match):
        run_ddl(cat, query)


NON_DETERMINISTIC = ["UUID()", "NOW()", "NOW(6)", "RAND()", "RAND(7)", "SYSDATE()", "CURRENT_TIMESTAMP",
                     "CURRENT_TIMESTAMP(3)", "UUID_SHORT()", "CONNECTION_ID()", "LAST_INSERT_ID()", "USER()",
                     "CURRENT_USER()", "CURDATE()", "CURRENT_DATE", "CURTIME()", "UTC_TIMESTAMP()", "LOCALTIME",
                     "UNIX_TIMESTAMP()", "DATABASE()", "VERSION()", "RANDOM_BYTES(4)", "FOUND_ROWS()",
                     "UPPER(CONCAT('x', UUID()))", "now()"]


@pytest.mark.parametrize("call", NON_DETERMINISTIC)
@pytest.mark.parametrize("template", [
    "INSERT INTO texts (k, v) VALUES ('a', {})",
    "UPDATE whatever SET note = {} WHERE nick = 'a'",
    "DELETE FROM whatever WHERE ts < {}",
    "REPLACE INTO texts VALUES ('a', {})",
])
def test_non_deterministic_functions_are_rejected(cat: Catalog, call: str, template: str) -> None:
    with pytest.raises(UnsupportedError, match=r"non-deterministic function .*variable"):
        one_sql(cat, template.format(call))


def test_deterministic_functions_pass(cat: Catalog) -> None:
    sql = one_sql(cat, "UPDATE whatever SET note = CONCAT(UPPER(name), UNIX_TIMESTAMP('2020-01-01')), "
                       "n = ABS(-3) WHERE nick = LOWER('A')")
    assert "UPPER(`name`)" in sql and "ABS(-3)" in sql


# ---------------------------------------------------------------------------------------------
# Variables and hostile input


def literal_values(sql: str) -> list[str]:
    """The string literals of a generated INSERT, as a Spark-dialect parser reads them back."""
    parsed = sqlglot.parse(sql, read="spark")
    assert len(parsed) == 1 and isinstance(parsed[0], exp.Insert)
    return [lit.this for lit in parsed[0].find_all(exp.Literal) if lit.is_string]


HOSTILE = [
    "Mats Kindahl", "O'Brien", "it\\'s", "\\", "'; DROP TABLE whatever; --", "`); DROP TABLE x; --", "a\nb\r\tc",
    "\\n", "${nick}", "*/ SELECT 1 /*", "\0nul", "\u2028é😀", "''", "\\'", "%_\\%", "@nick", "?", "\x1a",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_variable_values_become_exact_string_literals(cat: Catalog, value: str) -> None:
    sql = one_sql(cat, "INSERT INTO texts (k, v) VALUES (@nick, @`note`)", {"nick": value, "NOTE": value})
    assert literal_values(sql) == [value, value]
    verify_generated(sql, cat.live("default", "texts").path)  # type: ignore[union-attr]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
def test_any_variable_value_round_trips(value: str) -> None:
    c = Catalog()
    run_ddl(c, "CREATE TABLE t (a TEXT)")
    sql = one_sql(c, "INSERT INTO t VALUES (@v)", {"v": value})
    assert literal_values(sql) == [value]


@settings(max_examples=150, deadline=None)
@given(st.text(min_size=1, max_size=20).filter(lambda s: s.strip() and "\0" not in s and s.lower() != "k"))
def test_any_identifier_stays_one_identifier(name: str) -> None:
    c = Catalog()
    quoted = "`" + name.replace("`", "``") + "`"
    [create] = run_ddl(c, f"CREATE TABLE {quoted} ({quoted} TEXT, k INT)")
    assert isinstance(create, CreateTable)
    tree = sqlglot.parse_one(create.sql, read="spark")
    assert isinstance(tree, exp.Create)
    assert [d.name for d in tree.this.expressions] == [name, "k"]
    verify_generated(create.sql, create.table.path)
    sql = one_sql(c, f"UPDATE {quoted} SET {quoted} = 'v' WHERE {quoted}.k = 1")
    verify_generated(sql, create.table.path)
    upd = sqlglot.parse_one(sql, read="spark")
    assert isinstance(upd, exp.Update) and upd.expressions[0].this.name == name


def test_verify_generated_catches_escapes() -> None:
    verify_generated("DELETE FROM delta.`/p` WHERE `a` = 'x'", "/p")
    for bad in ("DELETE FROM delta.`/p`; DROP TABLE x", "DELETE FROM delta.`/q`", "SELECT 1",
                "DELETE FROM delta.`/p` WHERE a IN (SELECT a FROM other)"):
        with pytest.raises(UnsupportedError):
            verify_generated(bad, "/p")


def test_variable_names_case_insensitive_and_conflicts(cat: Catalog) -> None:
    assert "CAST('x' AS STRING)" in one_sql(cat, "INSERT INTO texts (k) VALUES (@NiCk)", {"nick": "x"})
    with pytest.raises(UnsupportedError, match=r"differ only by case"):
        translate(Statement("INSERT INTO texts (k) VALUES (@a)", (("a", "1"), ("A", "2"))), cat)


def test_txn_version_is_monotone_and_bounded() -> None:
    order = [(1, 0, 0), (1, 0, 1), (1, 1, 0), (1, (1 << 20) - 1, 255), (2, 0, 0), (10**9, 3, 0)]
    versions = [txn_version(*o) for o in order]
    assert versions == sorted(versions) and versions[-1] < 1 << 63
    with pytest.raises(UnsupportedError):
        txn_version(1, 1 << 20)
    with pytest.raises(UnsupportedError):
        txn_version(1, 0, 256)


# ---------------------------------------------------------------------------------------------
# Transaction assembly


def write_log(path: Path, script: list[tuple[Any, ...]], rotate_bytes: int = 1 << 20) -> Path:
    """script items: ("q", trans, sql[, vars[, session[, server]]]) | ("c", trans) | ("r", trans)."""
    with BinlogWriter(path, rotate_bytes=rotate_bytes) as w:
        for item in script:
            if item[0] == "q":
                trans, sql = item[1], item[2]
                variables = item[3] if len(item) > 3 else None
                session = item[4] if len(item) > 4 else 0
                server = item[5] if len(item) > 5 else None
                w.write_query(trans, sql, variables, session_id=session, server_id=server)
            elif item[0] == "c":
                w.write_commit(item[1], server_id=item[2] if len(item) > 2 else None)
            else:
                w.write_rollback(item[1])
    return path


def assemble(path: Path) -> tuple[list[ba.Transaction], TransactionAssembler]:
    asm = TransactionAssembler()
    out = [t for e in read_binlog(path) if (t := asm.feed(e)) is not None]
    return out, asm


def test_interleaved_transactions_come_out_in_commit_order(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.bin", [
        ("q", 1, "A1"), ("q", 2, "B1"), ("q", 1, "A2"), ("q", 3, "C1"), ("q", 2, "B2"),
        ("c", 2), ("r", 3), ("q", 4, "D1", None, 0, 7), ("q", 4, "E1"), ("c", 1), ("c", 4, 7), ("q", 5, "F1"),
        ("c", 9),  # empty transaction: counted, nothing to apply
        ("q", 2, "B3"), ("c", 2),  # a trans id reused after its commit is a new transaction
    ], rotate_bytes=200)
    txns, asm = assemble(log)
    assert [(t.seq, t.gtid, [s.query for s in t.statements]) for t in txns] == [
        (1, (1, 2), ["B1", "B2"]), (2, (1, 1), ["A1", "A2"]), (3, (7, 4), ["D1"]), (4, (1, 9), []),
        (5, (1, 2), ["B3"]),
    ]
    assert asm.rollbacks == 1 and asm.pending == [(1, 4), (1, 5)]
    assert len({t.file for t in txns}) > 1  # the log was chained across files


def test_use_sets_the_session_database(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.bin", [
        ("q", 1, "USE shop", None, 10), ("q", 1, "S1", None, 10), ("q", 2, "S2", None, 11),
        ("q", 2, "use `we``ird`", None, 11), ("q", 2, "S3", None, 11), ("q", 1, "S4", None, 10), ("c", 1), ("c", 2),
    ])
    txns, _ = assemble(log)
    assert [[(s.query, s.database) for s in t.statements] for t in txns] == [
        [("S1", "shop"), ("S4", "shop")], [("S2", "default"), ("S3", "we`ird")],
    ]


def test_chain_that_skips_a_file_is_a_gap(tmp_path: Path) -> None:
    from replicator._proto import binlog_pb2

    log = write_log(tmp_path / "log.bin", [("q", 1, "A"), ("c", 1), ("q", 2, "B")])
    chain = binlog_pb2.Chain(header=binlog_pb2.Header(timestamp=1, server_id=1, trans_id=0), next=3)
    with open(log, "ab") as f:
        f.write(encode_frame(0x02, chain.SerializeToString()))
    write_log(tmp_path / "log.bin.000003", [("c", 2)])
    asm = TransactionAssembler()
    seen = []
    with pytest.raises(DecodeError, match=r"gap in the log.*file number 3.*is number 2"):
        for e in read_binlog(log):
            if (t := asm.feed(e)) is not None:
                seen.append(t.gtid)
    assert seen == [(1, 1)]


def test_paths_must_start_at_the_first_file(tmp_path: Path) -> None:
    check_paths([tmp_path / "log.bin"])
    check_paths([tmp_path / "log.bin", tmp_path / "log.bin.000002", tmp_path / "other.bin"])
    with pytest.raises(ConfigError, match=r"give .*log.bin first"):
        check_paths([tmp_path / "log.bin.000002"])
    with pytest.raises(ConfigError):
        check_paths([])


# ---------------------------------------------------------------------------------------------
# Exactly once against a fake Delta: crash at every point, resume, compare


class Crash(BaseException):
    """A simulated kill: not an Exception, so nothing on the way converts or handles it."""


class FakeDelta:
    """What the applier relies on: per-appId idempotent writes, schemas per path, durable across runs."""

    def __init__(self) -> None:
        self.txn: dict[str, int] = {}
        self.schemas: dict[str, list[str]] = {}
        self.writes: list[tuple[str, str]] = []
        self.calls = 0
        self.crash_at: int | None = None
        self.crash_before = False
        self.conflicts: set[int] = set()  # calls Delta rejects, before anything commits


class FakeSpark:
    def __init__(self, delta: FakeDelta) -> None:
        self.delta = delta
        self.conf = SimpleNamespace(values={}, set=self._set, unset=self._unset, get=self._get)
        self.read = self

    def _set(self, key: str, value: str) -> None:
        self.conf.values[key] = value

    def _unset(self, key: str) -> None:
        self.conf.values.pop(key, None)

    def _get(self, key: str, default: str | None = None) -> str | None:
        return self.conf.values.get(key, default)  # type: ignore[no-any-return]

    def format(self, _: str) -> FakeSpark:
        return self

    def load(self, path: str) -> Any:
        cols = self.delta.schemas[path]
        return SimpleNamespace(schema=SimpleNamespace(fieldNames=lambda: list(cols)))

    def sql(self, text: str) -> Any:
        d = self.delta
        d.calls += 1
        assert self.conf.values.get(ba.VARIABLE_SUBSTITUTE) == "false", "${...} substitution must be off"
        if d.crash_at == d.calls and d.crash_before:
            raise Crash
        if d.calls in d.conflicts:
            raise RuntimeError("io.delta.exceptions.ConcurrentDeleteReadException: [DELTA_CONCURRENT_DELETE_READ] "
                               "a concurrent OPTIMIZE removed a file this transaction read")
        tree = sqlglot.parse_one(text, read="spark")
        table = tree.find(exp.Table)
        assert table is not None
        path = table.name
        if isinstance(tree, exp.Create):
            d.schemas.setdefault(path, [c.name for c in tree.this.expressions])
        elif isinstance(tree, exp.Alter):
            cols = d.schemas[path]
            for act in tree.args["actions"]:
                if isinstance(act, exp.Drop):
                    name = act.args["tables"][0].name
                    assert name in cols, "dropping a missing column: check-before-alter failed"
                    cols.remove(name)
                else:
                    name = act.expressions[0].name
                    assert name not in cols, "adding an existing column: check-before-alter failed"
                    cols.append(name)
        else:
            app, version = self.conf.values[TXN_APP_ID], int(self.conf.values[TXN_VERSION])
            assert self.conf.values[USER_METADATA]
            if d.txn.get(app, -1) < version:
                d.txn[app] = version
                d.writes.append((path, text))
        if d.crash_at == d.calls:
            raise Crash
        return SimpleNamespace(collect=list)


WORKLOAD: list[tuple[Any, ...]] = [
    ("q", 1, "CREATE TABLE whatever (nick VARCHAR(32) PRIMARY KEY, name VARCHAR(64))"),
    ("q", 1, "INSERT INTO whatever VALUES (@nick, @name)", {"nick": "mkindahl", "name": "Mats Kindahl"}),
    ("q", 2, "INSERT INTO whatever VALUES (@nick, @name)", {"nick": "krow", "name": "Brian Aker"}),
    ("c", 1),
    ("q", 3, "INSERT INTO whatever VALUES ('gone', 'rolled back')"),
    ("q", 2, "ALTER TABLE whatever ADD COLUMN n INT NOT NULL DEFAULT 5, ADD COLUMN m TEXT, DROP COLUMN name"),
    ("r", 3),
    ("q", 2, "REPLACE INTO whatever (nick, n) VALUES ('krow', 6), ('x', 1)"),
    ("c", 2),
    ("q", 4, "UPDATE whatever SET n = n + 1 WHERE nick = 'x'"),
    ("q", 4, "CREATE TABLE other (a INT)"),
    ("q", 4, "INSERT INTO other VALUES (1), (2)"),
    ("q", 4, "DROP TABLE whatever"),
    ("q", 4, "CREATE TABLE whatever (z INT)"),
    ("q", 4, "INSERT INTO whatever VALUES (9)"),
    ("c", 4),
    ("q", 5, "DELETE FROM other WHERE a = 1"),
    ("q", 5, "TRUNCATE other"),
    ("c", 5),
    ("q", 6, "INSERT INTO other VALUES (3)"),  # never committed
]


def outcome(delta: FakeDelta, wh: Path) -> tuple[Any, ...]:
    """Everything that must not depend on crashes, with the warehouse directory factored out."""
    state = json.loads((wh / "_replicator" / "binlog.json").read_text())
    found = delta.writes, delta.schemas, delta.txn, state["applied"], state["current"], state["tables"]
    return tuple(json.loads(json.dumps(found).replace(str(wh.resolve()), "<wh>")))


def apply(log: Path, wh: Path, delta: FakeDelta, hook: ba.Hook | None = None) -> ba.Summary:
    return BinlogApplier(wh, FakeSpark(delta), hook=hook).run([log])  # type: ignore[arg-type]


@pytest.fixture
def workload(tmp_path: Path) -> tuple[Path, tuple[Any, ...], int]:
    log = write_log(tmp_path / "log" / "log.bin", WORKLOAD, rotate_bytes=300)
    delta = FakeDelta()
    summary = apply(log, tmp_path / "ref", delta)
    assert (summary.applied, summary.rolled_back, summary.pending, summary.last_gtid) == (4, 1, [(1, 6)], (1, 5))
    assert summary.statements == 13
    return log, outcome(delta, tmp_path / "ref"), delta.calls


def test_reference_outcome(workload: tuple[Path, tuple[Any, ...], int], tmp_path: Path) -> None:
    log, ref_outcome, _ = workload
    writes, schemas, _, applied, current, tables = ref_outcome
    assert applied["seq"] == 4 and current is None
    assert sorted(map(sorted, schemas.values())) == [["a"], ["m", "n", "nick"], ["z"]]
    assert [t["status"] for t in tables] == ["dropped", "live", "live"]
    assert len(writes) == 9
    again = apply(log, tmp_path / "ref", FakeDelta())
    assert (again.applied, again.skipped, again.statements) == (0, 4, 0)  # nothing reaches Delta


def test_crash_at_every_delta_call_then_resume_equals_uninterrupted(
    workload: tuple[Path, tuple[Any, ...], int], tmp_path: Path
) -> None:
    log, ref_outcome, calls = workload
    for k in range(1, calls + 1):
        for before in (True, False):
            delta = FakeDelta()
            delta.crash_at, delta.crash_before = k, before
            wh = tmp_path / f"wh-{k}-{before}"
            with pytest.raises(Crash):
                apply(log, wh, delta)
            delta.crash_at = None
            resumed = apply(log, wh, delta)
            assert outcome(delta, wh) == ref_outcome, (k, before)
            assert resumed.skipped + resumed.applied == 4


def test_crash_at_every_hook_point_twice(workload: tuple[Path, tuple[Any, ...], int], tmp_path: Path) -> None:
    log, ref_outcome, _ = workload
    points = [(p, s, i) for s, n in ((1, 2), (2, 2), (3, 6), (4, 2)) for i in range(n) for p in ("before", "after")]
    for n, point in enumerate(points):
        later = points[min(n + 3, len(points) - 1)]

        def crash_at(target: tuple[str, int, int]) -> ba.Hook:
            def hook(p: str, seq: int, index: int) -> None:
                if (p, seq, index) == target:
                    raise Crash

            return hook

        delta = FakeDelta()
        wh = tmp_path / f"wh-{n}"
        with pytest.raises(Crash):
            apply(log, wh, delta, crash_at(point))
        if later != point:
            with pytest.raises(Crash):
                apply(log, wh, delta, crash_at(later))
        summary = apply(log, wh, delta)
        assert outcome(delta, wh) == ref_outcome, point
        assert summary.last_gtid == (1, 5)


def test_a_concurrent_commit_rejecting_any_statement_is_retried(
    workload: tuple[Path, tuple[Any, ...], int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delta rejecting a statement because a user's commit landed first (nothing of it committed):
    every kind of statement is re-run, and the outcome equals an undisturbed run."""
    monkeypatch.setattr("replicator.delta.session.time.sleep", lambda _: None)
    log, ref_outcome, calls = workload
    delta = FakeDelta()
    delta.conflicts = set(range(1, 2 * calls + 2, 2))  # every first attempt: calls 1, 3, 5, ...
    spark = FakeSpark(delta)
    applier = BinlogApplier(tmp_path / "wh", spark)  # type: ignore[arg-type]
    summary = applier.run([log])
    assert summary.applied == 4 and applier.delta.conflict_retries == calls
    assert outcome(delta, tmp_path / "wh") == ref_outcome
    assert spark.conf.values == {}, "idempotent-write and substitution confs must be unset (restored)"


def test_a_conflict_past_the_retries_names_the_statement(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("replicator.delta.session.time.sleep", lambda _: None)
    log = write_log(tmp_path / "log.bin", [("q", 1, "CREATE TABLE t (a INT)"), ("q", 1, "INSERT INTO t VALUES (1)"),
                                           ("c", 1)])
    delta = FakeDelta()
    delta.conflicts = set(range(2, 100))
    with pytest.raises(StateError, match=r"statement 2 of 2.*concurrent writer committed first 11 times"):
        apply(log, tmp_path / "wh", delta)
    assert delta.writes == []


def test_errors_name_the_gtid_and_statement(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.bin", [
        ("q", 1, "CREATE TABLE t (a INT)"), ("c", 1),
        ("q", 2, "INSERT INTO t VALUES (1)"), ("q", 2, "INSERT INTO t VALUES (UUID())"), ("c", 2),
        ("q", 3, "INSERT INTO t VALUES (3)"), ("c", 3),
    ], )
    delta = FakeDelta()
    with pytest.raises(UnsupportedError) as info:
        apply(log, tmp_path / "wh", delta)
    msg = str(info.value)
    assert "GTID (1,2) (commit #2, statement 2 of 2 at" in msg and "INSERT INTO t VALUES (UUID())" in msg
    assert "non-deterministic function UUID()" in msg
    # the first statement of the failing transaction is applied and recorded; a rerun stops at the same place
    assert len(delta.writes) == 1
    state = json.loads((tmp_path / "wh" / "_replicator" / "binlog.json").read_text())
    assert state["applied"]["seq"] == 1 and state["current"]["done"] == 1
    with pytest.raises(UnsupportedError, match=r"statement 2 of 2"):
        apply(log, tmp_path / "wh", delta)
    assert len(delta.writes) == 1


def test_resume_refuses_a_different_log(workload: tuple[Path, tuple[Any, ...], int], tmp_path: Path) -> None:
    log, _, _ = workload
    other = write_log(tmp_path / "o" / "log.bin", [("q", 1, "CREATE TABLE whatever (a INT)"), ("c", 7)])
    delta = FakeDelta()
    apply(other, tmp_path / "wh", delta)
    with pytest.raises(StateError, match=r"commit #1 is GTID \(1, 1\).*recorded GTID \(1, 7\)"):
        apply(log, tmp_path / "wh", delta)
    short = write_log(tmp_path / "s" / "log.bin", [("q", 1, "CREATE TABLE whatever (a INT)")])
    with pytest.raises(StateError, match=r"holds only 0 commits"):
        apply(short, tmp_path / "wh", delta)


def test_corrupt_frame_stops_and_nothing_after_is_applied(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.bin", [
        ("q", 1, "CREATE TABLE t (a INT)"), ("c", 1),
        ("q", 2, "INSERT INTO t VALUES (2)"), ("q", 3, "INSERT INTO t VALUES (3)"), ("c", 3),
        ("q", 2, "INSERT INTO t VALUES (22)"), ("c", 2),
        ("q", 4, "INSERT INTO t VALUES (4)"), ("c", 4),
    ])
    frames = [(e.offset, e.type, e.gtid) for e in read_binlog(log)]
    bad_at = next(off for off, typ, gtid in frames if typ == "Query" and gtid == (1, 2) and off > frames[5][0] - 1)
    data = bytearray(log.read_bytes())
    data[bad_at + 6] ^= 0xFF  # inside txn 2's second statement: txn 3 committed before it, txn 2 spans it
    log.write_bytes(bytes(data))
    delta = FakeDelta()
    applier = BinlogApplier(tmp_path / "wh", FakeSpark(delta))  # type: ignore[arg-type]
    with pytest.raises(FrameError, match=f"bad CRC.*byte offset {bad_at}"):
        applier.run([log])
    assert [w[1].split("VALUES ")[1] for w in delta.writes] == ["(CAST(3 AS INT))"]
    s = applier.summary
    assert (s.applied, s.last_gtid) == (2, (1, 3)) and s.stopped and "corrupt log" in s.stopped


def test_truncated_tail_is_read_next_time(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.bin", [("q", 1, "CREATE TABLE t (a INT)"), ("c", 1),
                                           ("q", 2, "INSERT INTO t VALUES (2)"), ("c", 2)])
    full = log.read_bytes()
    log.write_bytes(full[:-3])  # the writer is mid-append on the last Commit
    delta = FakeDelta()
    summary = apply(log, tmp_path / "wh", delta)
    assert summary.applied == 1 and summary.pending == [(1, 2)] and "ends inside a frame" in (summary.stopped or "")
    log.write_bytes(full)
    summary = apply(log, tmp_path / "wh", delta)
    assert (summary.applied, summary.skipped, len(delta.writes)) == (1, 1, 1)


def test_summary_render_and_json() -> None:
    s = ba.Summary(applied=2, skipped=1, rolled_back=1, statements=5, pending=[(1, 9)], last_gtid=(1, 3),
                   last_seq=3)
    assert s.render() == (
        "binlog: 2 transaction(s) applied (5 statement(s)), 1 already applied, 1 rolled back, 1 uncommitted\n"
        "last applied GTID: (1,3) (commit #3)"
    )
    assert s.to_json()["last_gtid"] == [1, 3] and s.to_json()["pending"] == [[1, 9]]


def test_chain_to_a_missing_file_is_a_gap(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.bin", [
        ("q", 1, "CREATE TABLE t (a INT)"), ("c", 1), ("q", 2, "INSERT INTO t VALUES (2)"),
        ("q", 3, "INSERT INTO t VALUES (3)"), ("c", 3), ("c", 2), ("q", 4, "INSERT INTO t VALUES (4)"), ("c", 4),
    ], rotate_bytes=150)
    files = sorted({e.file for e in read_binlog(log)})
    assert len(files) >= 3
    Path(files[1]).unlink()
    delta = FakeDelta()
    applier = BinlogApplier(tmp_path / "wh", FakeSpark(delta))  # type: ignore[arg-type]
    with pytest.raises(DecodeError, match=r"Chain names .*, which is missing"):
        applier.run([log])
    seen: list[Any] = []
    with pytest.raises(DecodeError):
        seen.extend(read_binlog(log))
    commits = [e.gtid for e in seen if e.type == "Commit"]
    assert applier.summary.stopped and applier.summary.stopped.startswith("log unreadable")
    assert 1 <= applier.summary.applied == len(commits) < 4  # what precedes the gap, and nothing after it
    assert len(delta.writes) == len([g for g in commits if g != (1, 1)])
