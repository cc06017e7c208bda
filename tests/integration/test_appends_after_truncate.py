"""Appends after a TRUNCATE (engine/merging.py, `WrittenKeys`): the keys a run wrote to a table are
forgotten when a TRUNCATE empties it, so inserting the same keys again is appended, not MERGEd.
Real broker, real Delta, canal-json (which names INSERTs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.codec import codec_for
from replicator.delta.writer import delta_ref
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, read_table, run_engine
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration

KEY = int(Flag.HANDLE_KEY | Flag.PRIMARY_KEY | Flag.BINARY)


def _ins(ts: int, key: int, v: str) -> RowChange:
    cols = (Column("id", TypeCode.LONG, KEY, key), Column("v", TypeCode.VARCHAR, 0, v))
    return RowChange(ts, "s", "t", Op.INSERT, cols)


def test_inserts_of_the_same_keys_after_a_truncate_are_appended(kafka_bootstrap: str, spark: Any,
                                                                tmp_path: Path) -> None:
    create = DdlEvent(10, "s", "t", 3, "CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `v` VARCHAR(8))")
    truncate = DdlEvent(20, "s", "t", 11, "TRUNCATE TABLE `s`.`t`")
    events: list[Any] = [
        create, _ins(11, 1, "a1"), _ins(12, 2, "a2"), _ins(13, 3, "a3"), Resolved(14),
        # 4..6 share the TRUNCATE's step: written right before it, forgotten when it is applied
        _ins(15, 4, "a4"), _ins(16, 5, "a5"), _ins(17, 6, "a6"), truncate, Resolved(21),
        _ins(22, 1, "b1"), _ins(23, 2, "b2"), Resolved(24),  # into the emptied table
        _ins(25, 3, "b3"), _ins(26, 4, "b4"), Resolved(27),  # keys written before the TRUNCATE
        _ins(28, 5, "b5"), _ins(29, 6, "b6"), Resolved(40),
    ]
    topic = new_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, k, v) for k, v in codec_for("canal-json").encode(events)])
    wh = tmp_path / "wh"
    # a full buffer applies each complete step at once: one step per resolved ts above
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", max_buffer_rows=2, spill_rows=0)
    assert summary.error is None and summary.watermark == 40 and summary.ddl_applied == 2

    assert [(r["id"], r["v"]) for r in read_table(spark, wh, "s", "t")] == [(k, f"b{k}") for k in range(1, 7)]
    warehouse = Warehouse(wh)
    entry = warehouse.load_state().live_table("s", "t")
    assert entry is not None
    history = sorted(spark.sql(f"DESCRIBE HISTORY {delta_ref(entry.path)}").collect(), key=lambda h: h["version"])
    ops = [h["operation"] for h in history]
    cut = ops.index("DELETE")  # the TRUNCATE
    assert ops[:cut] == ["CREATE TABLE", "WRITE", "WRITE"], ops
    assert ops[cut + 1:] == ["WRITE", "WRITE", "WRITE"], f"every write after the TRUNCATE is an append: {ops}"
    steps = [json.loads(h["userMetadata"])["replicator"]["applied_ts"] for h in history[cut + 1:]]
    assert steps == [24, 27, 40], "three steps after the TRUNCATE"
    [step] = [w for w in warehouse.windows() if any(d["type"] == 11 for d in w.get("ddls", []))]
    assert (step["hi"], step["tables"][entry.uid]["upserts"]) == (21, 3), \
        "keys 4..6 were written in the TRUNCATE's own step, right before it"


def test_a_spilled_key_inserted_again_is_merged_not_appended(kafka_bootstrap: str, spark: Any,
                                                             tmp_path: Path) -> None:
    """The spill's keys are held like driver keys (sources/spill_index.py): a key a spilled step
    appended and a later step sends again as an INSERT (an upsert a foreign producer sent so) is
    MERGEd, and the spilled table is still appended to when its next keys are new."""
    create = DdlEvent(10, "s", "t", 3, "CREATE TABLE `s`.`t` (`id` INT PRIMARY KEY, `v` VARCHAR(8))")
    events: list[Any] = [
        create, _ins(11, 1, "a1"), _ins(12, 2, "a2"), _ins(13, 3, "a3"), Resolved(14),
        _ins(15, 4, "a4"), _ins(16, 5, "a5"), Resolved(17),  # new keys: appended
        _ins(18, 1, "b1"), _ins(19, 6, "a6"), Resolved(40),  # key 1 again: MERGEd
    ]
    topic = new_topic(kafka_bootstrap, 1)
    produce(kafka_bootstrap, topic, [(0, k, v) for k, v in codec_for("canal-json").encode(events)])
    wh = tmp_path / "wh"
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol="canal-json", max_buffer_rows=1, spill_rows=2)
    assert summary.error is None and summary.watermark == 40

    assert [(r["id"], r["v"]) for r in read_table(spark, wh, "s", "t")] == [
        (1, "b1"), (2, "a2"), (3, "a3"), (4, "a4"), (5, "a5"), (6, "a6")]
    entry = Warehouse(wh).load_state().live_table("s", "t")
    assert entry is not None
    history = sorted(spark.sql(f"DESCRIBE HISTORY {delta_ref(entry.path)}").collect(), key=lambda h: h["version"])
    assert [h["operation"] for h in history] == ["CREATE TABLE", "WRITE", "WRITE", "MERGE"]
