"""DDL mixed with DML through the real engine: Open Protocol messages on a 2-partition Kafka topic.

The final tables are compared with an expected state computed independently by a plain-Python
model of the same upstream history (dicts per table; DDL effects written out by hand).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from replicator.codec.open_protocol import encode_ddl, encode_resolved, encode_rows
from replicator.events import Column, DdlEvent, Flag, Op, RowChange, TypeCode
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, read_table, run_engine
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration

PK = Flag.HANDLE_KEY | Flag.PRIMARY_KEY
UK = Flag.HANDLE_KEY | Flag.UNIQUE_KEY
INT, BIGINT, VARCHAR = TypeCode.LONG, TypeCode.LONGLONG, TypeCode.VARCHAR
Row = dict[str, Any]


class Stream:
    """Builds the upstream history as Kafka records: rows routed by key, DDL/resolved broadcast."""

    def __init__(self) -> None:
        self.ts = itertools.count(450_000_000_000_000_000, 1 << 18)
        self.records: list[tuple[int, bytes, bytes]] = []

    def ddl(self, table: str, code: int, query: str) -> None:
        ev = DdlEvent(next(self.ts), "db", table, code, query)
        for p in (0, 1):
            self.records.append((p, *encode_ddl(ev)))
        self.resolve()

    def txn(self, table: str, changes: list[tuple[Op, list[Column], list[Column]]]) -> None:
        ts = next(self.ts)
        for op, new, old in changes:
            image = old if op is Op.DELETE else new
            key = next(c.value for c in image if c.flags & Flag.HANDLE_KEY)
            assert isinstance(key, int)
            row = RowChange(ts, "db", table, op, tuple(new), tuple(old))
            self.records.extend((key % 2, k, v) for k, v in encode_rows([row]))
        self.resolve()

    def resolve(self) -> None:
        ts = next(self.ts)
        for p in (0, 1):
            self.records.append((p, *encode_resolved(ts)))


def s_cols(id_: int, v: str | None, c: Any = None, w: int | None = None, n: int | None = None, *,
           has_n: bool = True, has_c: bool = False, w_code: int = INT, c_code: int = INT) -> list[Column]:
    cols = [Column("id", INT, PK, id_), Column("v", VARCHAR, 0, v), Column("w", w_code, 0, w)]
    if has_n:
        cols.append(Column("n", INT, 0, n))
    if has_c:
        cols.append(Column("c", c_code, 0, c))
    return cols


def late_cols(id_: int, v: str | None, c: str | None, w: int | None) -> list[Column]:
    """The s2 shape after DROP COLUMN n, w BIGINT, c VARCHAR."""
    return s_cols(id_, v, c, w, has_n=False, has_c=True, w_code=BIGINT, c_code=VARCHAR)


def k_cols(a: int, b: int, v: str, key: str) -> list[Column]:
    return [Column("a", INT, PK if key == "a" else 0, a), Column("b", INT, UK if key == "b" else 0, b),
            Column("v", VARCHAR, 0, v)]


def test_mixed_ddl_and_dml_stream_equals_expected_state(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    st = Stream()
    s: dict[int, Row] = {}  # the model of table s1 / s2, keyed by id
    k: dict[int, Row] = {}  # the model of table k, keyed by its current merge key

    st.ddl("s1", 3, "CREATE TABLE s1 (id INT PRIMARY KEY, v VARCHAR(20), w INT, n INT)")
    st.txn("s1", [(Op.INSERT, s_cols(i, f"v{i}", w=i, n=i * 10), []) for i in range(1, 5)])
    s.update({i: {"id": i, "v": f"v{i}", "w": i, "n": i * 10} for i in range(1, 5)})

    st.ddl("s1", 5, "ALTER TABLE s1 ADD COLUMN c INT NOT NULL DEFAULT 7 AFTER id")  # existing rows get 7
    for r in s.values():
        r["c"] = 7
    st.txn("s1", [(Op.INSERT, s_cols(5, "v5", 9, 5, 50, has_c=True), []),
                  (Op.UPDATE, s_cols(1, "x", 7, 1, 10, has_c=True), s_cols(1, "v1", 7, 1, 10, has_c=True))])
    s[5] = {"id": 5, "v": "v5", "w": 5, "n": 50, "c": 9}
    s[1]["v"] = "x"

    st.ddl("s1", 6, "ALTER TABLE s1 DROP COLUMN n")
    for r in s.values():
        del r["n"]
    st.ddl("s1", 12, "ALTER TABLE s1 MODIFY COLUMN w BIGINT")  # widened in place
    st.txn("s1", [(Op.INSERT, s_cols(6, "v6", 6, 6, has_n=False, has_c=True, w_code=BIGINT), []),
                  (Op.INSERT, s_cols(7, "v7", 1, 2**40, has_n=False, has_c=True, w_code=BIGINT), []),
                  (Op.DELETE, [], s_cols(2, "v2", 7, 2, has_n=False, has_c=True, w_code=BIGINT))])
    s[6] = {"id": 6, "v": "v6", "w": 6, "c": 6}
    s[7] = {"id": 7, "v": "v7", "w": 2**40, "c": 1}
    del s[2]

    st.ddl("s1", 12, "ALTER TABLE s1 MODIFY COLUMN c VARCHAR(10)")  # rewritten: int values become text
    for r in s.values():
        r["c"] = str(r["c"])
    st.ddl("s2", 14, "RENAME TABLE s1 TO s2")
    st.txn("s2", [(Op.UPDATE, late_cols(3, "v3", "c3", 3), late_cols(3, "v3", "7", 3)),
                  (Op.INSERT, late_cols(8, "v8", "8", 8), []),
                  (Op.UPDATE, late_cols(4, "y", "7", 4), late_cols(4, "v4", "7", 4))])
    s[3]["c"] = "c3"
    s[8] = {"id": 8, "v": "v8", "w": 8, "c": "8"}
    s[4]["v"] = "y"
    expected_before_truncate = sorted(s.values(), key=lambda r: r["id"])

    st.ddl("s2", 11, "TRUNCATE TABLE s2")
    s.clear()
    st.txn("s2", [(Op.INSERT, late_cols(9, None, None, None), [])])
    s[9] = {"id": 9, "v": None, "w": None, "c": None}

    # Primary key dropped and re-added: the merge key follows (a -> TiCDC's fallback unique b -> a).
    st.ddl("k", 3, "CREATE TABLE k (a INT NOT NULL, b INT NOT NULL, v VARCHAR(10), PRIMARY KEY (a), UNIQUE KEY uk (b))")
    st.txn("k", [(Op.INSERT, k_cols(1, 10, "p", "a"), []), (Op.INSERT, k_cols(2, 20, "q", "a"), [])])
    k.update({10: {"a": 1, "b": 10, "v": "p"}, 20: {"a": 2, "b": 20, "v": "q"}})  # keyed by b from here on
    st.ddl("k", 33, "ALTER TABLE k DROP PRIMARY KEY")
    # An update without old values (the row's image only): keyed by b it replaces (1, 10); keyed by a
    # it would leave (1, 10) behind next to (3, 10).
    st.txn("k", [(Op.UPDATE, k_cols(3, 10, "p2", "b"), [])])
    k[10] = {"a": 3, "b": 10, "v": "p2"}
    st.ddl("k", 32, "ALTER TABLE k ADD PRIMARY KEY (a)")
    st.txn("k", [(Op.INSERT, k_cols(4, 40, "r", "a"), []), (Op.DELETE, [], k_cols(2, 20, "q", "a"))])
    k[40] = {"a": 4, "b": 40, "v": "r"}
    del k[20]

    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, st.records)
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark)

    assert summary.error is None and summary.ddl_applied == 10 and summary.ddl_skipped == 0
    assert read_table(spark, wh, "db", "s2") == sorted(s.values(), key=lambda r: r["id"])
    assert sorted(read_table(spark, wh, "db", "k"), key=lambda r: r["a"]) == sorted(k.values(), key=lambda r: r["a"])
    state = Warehouse(wh).load_state()
    assert [(e.table, e.key) for e in state.live_tables()] == [("k", ["a"]), ("s2", ["id"])]  # s1 is gone
    s2 = state.live_table("db", "s2")
    assert s2 is not None
    cols = {f.name: f.dataType.simpleString() for f in spark.read.format("delta").load(s2.path).schema.fields}
    assert cols == {"id": "int", "v": "string", "w": "bigint", "c": "string"}
    # Time travel to just before the truncate shows the renamed table's full history is kept.
    hist = spark.sql(f"DESCRIBE HISTORY delta.`{s2.path}`").collect()
    truncate_version = next(h.version for h in hist if h.operation == "DELETE")
    before = spark.read.format("delta").option("versionAsOf", truncate_version - 1).load(s2.path).collect()
    assert sorted((r.asDict() for r in before), key=lambda r: r["id"]) == expected_before_truncate


def test_bad_ddl_stops_with_position_then_skip_dead_letters_it(kafka_bootstrap: str, spark: Any,
                                                               tmp_path: Path) -> None:
    from replicator.delta.deadletter import read_dead_letters
    from replicator.errors import DdlError

    st = Stream()
    st.ddl("t", 3, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(5), w INT)")
    st.txn("t", [(Op.INSERT, s_cols(1, "a", has_n=False), [])])
    st.ddl("t", 5, "ALTER TABLE t ADD COLUMN (((")
    st.txn("t", [(Op.INSERT, s_cols(2, "b", has_n=False), [])])
    topic = new_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, st.records)
    wh = tmp_path / "wh"

    with pytest.raises(DdlError) as err:
        run_engine(kafka_bootstrap, topic, wh, spark)
    msg = str(err.value)
    assert "DDL type 5 (Add Column)" in msg and "ADD COLUMN (((" in msg
    assert f"topic {topic!r} partition " in msg and " offset " in msg
    assert read_table(spark, wh, "db", "t") == [{"id": 1, "v": "a", "w": None}]  # rows before it applied

    summary = run_engine(kafka_bootstrap, topic, wh, spark, on_ddl_error="skip")
    assert summary.ddl_skipped == 1
    assert read_table(spark, wh, "db", "t") == [{"id": 1, "v": "a", "w": None}, {"id": 2, "v": "b", "w": None}]
    dead = read_dead_letters(spark, Warehouse(wh))
    assert len(dead) == 1 and "DDL type 5" in str(dead[0]["error"])
    assert dead[0]["value"] == b"ALTER TABLE t ADD COLUMN ((("
