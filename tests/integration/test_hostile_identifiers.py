"""Hostile upstream names replicate correctly and cannot break out of generated SQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replicator.codec import open_protocol
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, run_engine
from tests.kafka_fixtures import new_topic

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

SCHEMA = "we`ird; DROP TABLE x; --"
TABLE = "t.a b'\"ü名"
INFERRED = "select"  # a reserved word, and a table whose CREATE predates the stream
LONG = "c" * 200
COLS = ["`id`", "a'b", "c;d", 'q"uote', "ü名 x", "select", "path", "with.dot", "${env:HOME}", "${x}", LONG]


def mysql_ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def image(key: int, salt: str) -> tuple[Column, ...]:
    cols = [Column(COLS[0], TypeCode.LONGLONG, Flag.HANDLE_KEY | Flag.PRIMARY_KEY, key)]
    cols += [Column(name, TypeCode.VARCHAR, Flag.NULLABLE, f"{salt}{i}'; --`") for i, name in enumerate(COLS[1:])]
    return tuple(cols)


def test_hostile_identifiers_replicate(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    col_defs = ", ".join([f"{mysql_ident(COLS[0])} BIGINT PRIMARY KEY"]
                         + [f"{mysql_ident(c)} VARCHAR(64)" for c in COLS[1:]])
    create = f"CREATE TABLE {mysql_ident(SCHEMA)}.{mysql_ident(TABLE)} ({col_defs})"
    ts = 1 << 40
    events: list[Any] = [DdlEvent(ts, SCHEMA, TABLE, 3, create)]
    rows = [RowChange(ts + 10, SCHEMA, TABLE, Op.INSERT, image(k, "v")) for k in range(1, 6)]
    rows.append(RowChange(ts + 20, SCHEMA, TABLE, Op.UPDATE, image(2, "new"), image(2, "v")))
    rows.append(RowChange(ts + 30, SCHEMA, TABLE, Op.DELETE, (), image(3, "v")))
    rows.append(RowChange(ts + 30, SCHEMA, INFERRED, Op.INSERT, image(7, "inf")))
    msgs = [open_protocol.encode_ddl(events[0]), *open_protocol.encode_rows(rows),
            open_protocol.encode_resolved(Resolved(ts + 100))]
    topic = new_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, k, v) for k, v in msgs])
    wh = tmp_path / "wh"
    run_engine(kafka_bootstrap, topic, wh, spark)

    state = Warehouse(wh).load_state()
    entry = state.live_table(SCHEMA, TABLE)
    assert entry is not None and entry.key == [COLS[0]]
    df = spark.read.format("delta").load(entry.path)
    assert df.columns == COLS
    got = {r[COLS[0]]: r.asDict() for r in df.collect()}
    assert sorted(got) == [1, 2, 4, 5]
    assert got[2]["a'b"] == "new0'; --`" and got[1]["path"] == "v5'; --`" and got[5][LONG] == "v9'; --`"
    assert got[4]["${env:HOME}"] == "v7'; --`" and got[4]["${x}"] == "v8'; --`"
    inferred = state.live_table(SCHEMA, INFERRED)
    assert inferred is not None
    assert [r["select"] for r in spark.read.format("delta").load(inferred.path).collect()] == ["inf4'; --`"]
    # Nothing outside the warehouse was touched and no table named x was dropped/created.
    assert sorted(p.name for p in wh.iterdir()) == ["_replicator", "tables"]
