"""`classify_ddl`: DDL text -> TiDB DDL type code, for every code the DDL rule table knows; never a guess."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.delta.ddl.rules import DDL_TYPES
from replicator.errors import DecodeError
from replicator.mysql.classify import CANAL_EVENT_TYPES, canal_event_type, classify_ddl
from replicator.mysql.tokens import tokenize

# code -> statements TiDB gives that code (several spellings each).
STATEMENTS: dict[int, list[str]] = {
    1: ["CREATE DATABASE `shop`", "create schema if not exists s", "CREATE DATABASE d CHARACTER SET utf8mb4"],
    2: ["DROP DATABASE `shop`", "drop schema if exists s"],
    3: ["CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `v` VARCHAR(16))", "create table if not exists t like u",
        "/* hint */ CREATE TABLE t (a int) /*T![clustered_index] CLUSTERED */;"],
    4: ["DROP TABLE `s`.`t`", "drop table if exists t"],
    5: ["ALTER TABLE `s`.`t` ADD COLUMN `c` INT NULL", "alter table t add c int", "ALTER TABLE t ADD (a INT, b INT)",
        "ALTER TABLE t ADD COLUMN a INT, ADD COLUMN b INT"],
    6: ["ALTER TABLE t DROP COLUMN c", "alter table `s`.`t` drop `c`"],
    7: ["ALTER TABLE t ADD INDEX i (c)", "CREATE UNIQUE INDEX i ON t (c)", "create index i on t(c)",
        "ALTER TABLE t ADD UNIQUE KEY u (c)", "alter table t add constraint u unique (c)"],
    8: ["ALTER TABLE t DROP INDEX i", "DROP INDEX i ON t", "alter table t drop key k"],
    9: ["ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (b)", "alter table t add foreign key (a) "
        "references u(b)"],
    10: ["ALTER TABLE t DROP FOREIGN KEY fk"],
    11: ["TRUNCATE TABLE `s`.`t`", "truncate t"],
    12: ["ALTER TABLE t MODIFY COLUMN c BIGINT", "alter table t change c d int", "ALTER TABLE t RENAME COLUMN a TO b"],
    13: ["ALTER TABLE t AUTO_INCREMENT = 100", "alter table t force auto_increment = 5",
         "ALTER TABLE t AUTO_INCREMENT 7"],
    14: ["RENAME TABLE a TO b", "RENAME TABLE a TO b, c TO d", "ALTER TABLE a RENAME TO b",
         "alter table a rename as b"],
    15: ["ALTER TABLE t ALTER COLUMN c SET DEFAULT 5", "alter table t alter c drop default"],
    16: ["ALTER TABLE t SHARD_ROW_ID_BITS = 4"],
    17: ["ALTER TABLE t COMMENT = 'orders'", "alter table t comment 'x'"],
    18: ["ALTER TABLE t RENAME INDEX a TO b", "alter table t rename key a to b"],
    19: ["ALTER TABLE t ADD PARTITION (PARTITION p3 VALUES LESS THAN (30), PARTITION p4 VALUES LESS THAN (40))"],
    20: ["ALTER TABLE t DROP PARTITION p1", "alter table t drop partition p1, p2"],
    21: ["CREATE VIEW v AS SELECT 1",
          "CREATE OR REPLACE ALGORITHM=MERGE DEFINER=`root`@`%` SQL SECURITY DEFINER VIEW v AS SELECT a FROM t"],
    22: ["ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", "ALTER TABLE t CHARACTER SET = utf8mb4 COLLATE utf8mb4_bin",
         "alter table t default charset = utf8mb4", "ALTER TABLE t DEFAULT CHARSET utf8mb4 DEFAULT COLLATE = x"],
    23: ["ALTER TABLE t TRUNCATE PARTITION p0", "alter table t truncate partition p0, p1"],
    24: ["DROP VIEW v", "drop view if exists v"],
    25: ["RECOVER TABLE t", "FLASHBACK TABLE t TO t2"],
    26: ["ALTER DATABASE d CHARACTER SET utf8mb4", "alter schema d collate = utf8mb4_bin"],
    27: ["LOCK TABLES t READ", "lock table t write"],
    28: ["UNLOCK TABLES"],
    29: ["ADMIN REPAIR TABLE t CREATE TABLE t (a INT)"],
    30: ["ALTER TABLE t SET TIFLASH REPLICA 1"],
    32: ["ALTER TABLE t ADD PRIMARY KEY (a)", "alter table t add constraint pk primary key (a, b)"],
    33: ["ALTER TABLE t DROP PRIMARY KEY"],
    34: ["CREATE SEQUENCE s", "create sequence if not exists s start with 3"],
    35: ["ALTER SEQUENCE s RESTART"],
    36: ["DROP SEQUENCE s", "drop sequence if exists s"],
}
UNREACHABLE = {31: "Update TiFlash Replica Status is a TiDB-internal job without a statement"}


def test_every_code_of_the_rule_table_is_covered() -> None:
    assert set(STATEMENTS) | set(UNREACHABLE) == set(DDL_TYPES)
    assert not set(STATEMENTS) & set(UNREACHABLE)


@pytest.mark.parametrize(("code", "query"), [(c, q) for c, qs in STATEMENTS.items() for q in qs])
def test_statement_classifies_to_its_tidb_code(code: int, query: str) -> None:
    assert classify_ddl(query) == code


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   ;",
        "SELECT 1",
        "INSERT INTO t VALUES (1)",
        "ALTER TABLE t ADD COLUMN a INT, ADD INDEX (a)",  # a multi-schema change (TiDB type 61)
        "ALTER TABLE t ENGINE = InnoDB",
        "ALTER TABLE t PARTITION BY HASH (a) PARTITIONS 4",
        "ALTER TABLE t ADD CONSTRAINT c CHECK (a > 0)",
        "ALTER TABLE t ALTER INDEX i INVISIBLE",
        "CREATE TEMPORARY TABLE t (a INT)",
        "CREATE PLACEMENT POLICY p PRIMARY_REGION='r'",
        "CREATE TABLE 't",
        "CREATE TABLE `t",
        "CREATE TABLE t /* unterminated",
        "ALTER DATABASE d PLACEMENT POLICY = p",
        "ALTER TABLE t AUTO_INCREMENT = 5 COMMENT = 'x'",  # two changes of different types in one clause
        "ALTER TABLE t COMMENT = 'x' ENGINE = InnoDB",
        "ALTER TABLE t COMMENT",
    ],
)
def test_anything_else_is_a_decode_error_not_a_guess(query: str) -> None:
    with pytest.raises(DecodeError, match=r"not applied|unterminated"):
        classify_ddl(query)


def test_mixed_alter_names_its_codes_and_what_to_do() -> None:
    with pytest.raises(DecodeError, match=r"different DDL types \[5, 7\].*split it"):
        classify_ddl("ALTER TABLE t ADD COLUMN a INT, ADD INDEX (a)")


def test_canal_event_types_follow_tiCDC() -> None:
    assert set(CANAL_EVENT_TYPES) == set(DDL_TYPES)
    assert [canal_event_type(c) for c in (3, 4, 11, 14, 7, 8, 5, 1)] == [
        "CREATE", "ERASE", "TRUNCATE", "RENAME", "CINDEX", "DINDEX", "ALTER", "QUERY"]
    assert canal_event_type(61) == "QUERY"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80) | st.builds(lambda a, b: a + b, st.sampled_from(
    ["CREATE ", "ALTER TABLE t ", "DROP ", "ALTER TABLE t ADD ", "RENAME ", "/*!", "`", "'"]), st.text(max_size=40)))
def test_any_text_gives_a_code_or_a_decode_error(query: str) -> None:
    try:
        code = classify_ddl(query)
    except DecodeError:
        return
    assert code in DDL_TYPES


def test_the_one_tokenizer_reads_executable_comments_only_when_asked() -> None:
    """Classification reads what the server runs (`/*! .. */`, `/*T![..] .. */`); the other DDL
    readers share the same tokenizer and see those comments dropped, as before."""
    query = "ALTER TABLE t /*T![ttl] TTL = `c` */ /*!50100 COMMENT = 'x' */ -- done"
    assert [t.text for t in tokenize(query)] == ["ALTER", "TABLE", "t"]
    assert [t.text for t in tokenize(query, executable=True)] == [
        "ALTER", "TABLE", "t", "TTL", "=", "c", "COMMENT", "=", "x"]
    assert classify_ddl("/*!40000 ALTER TABLE t COMMENT = 'x' */") == 17
    with pytest.raises(DecodeError, match=r"cannot be read: unterminated string"):
        classify_ddl("ALTER TABLE t COMMENT = 'x")
