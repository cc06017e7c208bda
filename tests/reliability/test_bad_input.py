"""Bad input in both protocols: random bytes, truncations, wrong versions, impossible lengths,
unknown type codes, empty and null records, unparsable / unknown DDL, rows of a table the stream
never created, a table-breaking row, and an oversize (but valid) message.

The documented behaviour (docs/how-it-works.md "Bad input"): an undecodable message is dead-lettered with its
topic/partition/offset and stops the run (`--on-error skip` continues); a bad DDL stops it
(`--on-ddl-error skip` dead-letters it); nothing of a bad message is ever applied, so the tables
always equal the model's state at the applied watermark, and at the end its final state.
"""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from replicator.codec import craft, open_protocol
from replicator.delta.deadletter import read_dead_letters
from replicator.errors import DdlError, DecodeError, SchemaError
from replicator.events import Column, DdlEvent, Flag, Op, Resolved, RowChange, TypeCode
from replicator.warehouse import Warehouse
from tests.integration.helpers import encode_partition, run_engine
from tests.kafka_fixtures import new_topic
from tests.reliability.common import assert_model_state, size
from tests.streamgen import SCHEMA, Stream, cols, generate
from tests.support.warehouse import applied_ts

# Generous: other Spark jobs may share the machine; each scenario polls for its conditions.
pytestmark = [pytest.mark.integration, pytest.mark.reliability, pytest.mark.timeout(7200)]

Msg = tuple[bytes | None, bytes | None]
BIG_ROWS = 1000  # one valid message of ~1.6 MB: above Kafka's 1 MB default, inside the topic's limit


def _row_msg(protocol: str, rows: list[RowChange], batch: int = 16) -> list[Msg]:
    if protocol == "open":
        return list(open_protocol.encode_rows(rows, max_batch_size=batch))
    return [(None, v) for v in craft.encode_rows(rows, max_batch_size=batch)]


def _single(protocol: str, ev: DdlEvent | Resolved) -> Msg:
    if isinstance(ev, DdlEvent):
        return open_protocol.encode_ddl(ev) if protocol == "open" else (None, craft.encode_ddl(ev))
    return open_protocol.encode_resolved(ev.ts) if protocol == "open" else (None, craft.encode_resolved(ev.ts))


def _open_entry(key: dict[str, Any], value: dict[str, Any]) -> Msg:
    """One hand-framed Open Protocol batch (version 1, one entry)."""
    k, v = json.dumps(key).encode(), json.dumps(value).encode()
    return struct.pack(">QQ", 1, len(k)) + k, struct.pack(">Q", len(v)) + v


def bad_messages(protocol: str, valid_row: Msg, rnd: random.Random) -> dict[str, Msg]:
    """Messages the decoder must refuse, by what is wrong with them."""
    key, value = valid_row
    assert value is not None
    noise = bytes(rnd.getrandbits(8) for _ in range(300))
    huge = bytes(rnd.getrandbits(8) for _ in range(3 << 20))
    if protocol == "open":
        assert key is not None
        return {
            "random bytes": (noise[:40], noise[40:]),
            "truncated value": (key, value[: len(value) // 2]),
            "truncated key": (key[: len(key) - 3], value),
            "wrong batch version": (struct.pack(">Q", 2) + key[8:], value),
            "unknown event type": _open_entry({"ts": 1, "scm": SCHEMA, "tbl": "t0", "t": 9}, {}),
            "unknown column type code": _open_entry(
                {"ts": 1, "scm": SCHEMA, "tbl": "t0", "t": 1}, {"u": {"id": {"t": 250, "h": True, "v": 1}}}),
            "impossible length": (struct.pack(">QQ", 1, 1 << 40) + huge[:64], huge),
            "null value": (key, None),
            "null key": (None, value),
        }
    version_byte = bytes([craft.VERSION + 1])
    resolved = craft.encode_resolved(5)
    ts_len = 1  # uvarint of 5
    bad_kind = resolved[: 1 + ts_len] + b"\x09" + resolved[2 + ts_len:]
    return {
        "random bytes": (None, noise),
        "truncated": (None, value[: len(value) // 2]),
        "wrong version": (None, version_byte + value[1:]),
        "unknown event type": (None, bad_kind),
        "impossible size table": (None, value[:-1] + b"\x7f"),
        "oversize garbage": (None, huge),
        "empty value": (None, b""),
        "null value": (b"k", None),
    }


class Layout:
    """The topic: the model stream (2 partitions) with bad messages spliced in, then bad DDLs,
    rows of tables the stream never created (inferred), an oversize valid message, and the end."""

    def __init__(self, protocol: str, stream: Stream) -> None:
        rnd = random.Random(7)
        self.stream = stream
        f = stream.final_ts
        self.parts: list[list[Msg]] = [list(encode_partition(events, protocol)) for events in stream.partitions]
        one = RowChange(f, SCHEMA, "t0", Op.INSERT, cols("t0", {"id": 1, "qty": 2, "note": "n"}))
        valid = _row_msg(protocol, [one])
        bad = list(bad_messages(protocol, valid[0], rnd).items())
        self.bad: dict[tuple[int, int], tuple[str, Msg]] = {}
        for p, (lo, hi) in enumerate(((0, len(bad) // 2), (len(bad) // 2, len(bad)))):
            at = len(self.parts[p]) // (3 if p == 0 else 2)
            chunk = bad[lo:hi]
            self.parts[p][at:at] = [m for _, m in chunk]
            for i, (what, m) in enumerate(chunk):
                self.bad[(p, at + i)] = (what, m)
        # Bad DDL (broadcast): an unparsable query, an unknown action type code.
        self.bad_ddl = [DdlEvent(f + 1, SCHEMA, "t0", 5, "ALTER TABLE `shop`.`t0` ADD COLUMN ((( nonsense"),
                        DdlEvent(f + 2, SCHEMA, "t1", 250, "FROBNICATE TABLE `shop`.`t1`")]
        self.ddl_positions: dict[str, set[tuple[int, int]]] = {d.query: set() for d in self.bad_ddl}
        for p in (0, 1):
            for d in self.bad_ddl:
                self.ddl_positions[d.query].add((p, len(self.parts[p])))
                self.parts[p].append(_single(protocol, d))
        # Rows of tables never created upstream in the stream: inferred from the row events.
        ghost = [RowChange(f + 3, SCHEMA, "ghost", Op.INSERT, cols("ghost", {"id": k, "qty": k, "note": "g"}))
                 for k in (1, 2, 3)]
        big = [RowChange(f + 3, SCHEMA, "big", Op.INSERT,
                         cols("big", {"id": k, "qty": k, "note": f"{k:06d}" + "é" * 800})) for k in range(BIG_ROWS)]
        self.parts[1] += _row_msg(protocol, ghost)
        self.big_at = len(self.parts[0])
        self.parts[0] += _row_msg(protocol, big, batch=BIG_ROWS)
        assert len(self.parts[0]) == self.big_at + 1 and len(self.parts[0][-1][1] or b"") > 1 << 20
        self.final_ts = f + 4
        for p in (0, 1):
            self.parts[p].append(_single(protocol, Resolved(self.final_ts)))
        self.extra: dict[str, dict[int, dict[str, Any]]] = {
            "ghost": {k: _image(r) for k, r in zip((1, 2, 3), ghost, strict=True)},
            "big": {k: _image(r) for k, r in enumerate(big)}}

    def expected_at(self, ts: int) -> dict[str, dict[int, dict[str, Any]]]:
        out = self.stream.state_at(ts)
        for t, rows in self.extra.items():
            out[t] = dict(rows) if ts >= self.stream.final_ts + 3 else {}
        return out

    def produce(self, bootstrap: str, topic: str) -> None:
        p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_request_size=16 << 20)
        try:
            for part, msgs in enumerate(self.parts):
                for k, v in msgs:
                    p.send(topic, key=k, value=v, partition=part)
            p.flush()
        finally:
            p.close()


def _image(row: RowChange) -> dict[str, Any]:
    return {c.name: c.value for c in row.columns}


def _dead(spark: Any, wh: Path) -> list[dict[str, Any]]:
    return read_dead_letters(spark, Warehouse(wh))


@pytest.mark.parametrize("protocol", ["open", "craft"])
def test_bad_input_is_dead_lettered_with_position_and_never_applied(kafka_bootstrap: str, spark: Any,
                                                                    tmp_path: Path, protocol: str) -> None:
    stream = generate(seed=61 if protocol == "open" else 62, n_txn=size(80, 1500), n_partitions=2, n_tables=2,
                      truncate_prob=0.02)
    lay = Layout(protocol, stream)
    topic = new_topic(kafka_bootstrap, 2, prefix=f"rel-bad-{protocol}", configs={"max.message.bytes": str(16 << 20)})
    lay.produce(kafka_bootstrap, topic)
    wh = tmp_path / "wh"
    tables = sorted(lay.expected_at(lay.final_ts))

    def consistent(what: str) -> int:
        applied = applied_ts(wh)
        assert_model_state(spark, wh, {t: v for t, v in lay.expected_at(applied).items() if t in tables}, what)
        return applied

    # 1. Stop at the first bad message read: named by position, dead-lettered, nothing of it
    #    applied; (soak:) a rerun stops again, at the same message or the other partition's first one.
    for _ in range(size(1, 2)):
        with pytest.raises(DecodeError) as info:
            run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, max_buffer_rows=200)
        named = [pos for pos in lay.bad if f"topic {topic!r} partition {pos[0]} offset {pos[1]}" in str(info.value)]
        assert len(named) == 1, str(info.value)
        by_pos = {(row["partition"], row["offset"]): row for row in _dead(spark, wh)}
        assert named[0] in by_pos and set(by_pos) <= set(lay.bad) and len(by_pos) == len(_dead(spark, wh))
        for pos, row in by_pos.items():
            assert row["topic"] == topic and (row["key"], row["value"]) == lay.bad[pos][1], lay.bad[pos][0]
        applied = consistent(f"stopped at {lay.bad[named[0]][0]}")
        assert applied < stream.final_ts

    # 2. --on-error skip: every bad message dead-lettered (once, with its position); the run then
    #    stops at the unparsable DDL, naming it, with everything before the DDL applied.
    with pytest.raises(DdlError) as ddl_info:
        run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, on_error="skip", max_buffer_rows=200)
    assert "nonsense" in str(ddl_info.value) and f"topic {topic!r} partition" in str(ddl_info.value)
    dead = _dead(spark, wh)
    assert {(d["partition"], d["offset"]) for d in dead} == set(lay.bad)
    assert len(dead) == len(lay.bad)
    for d in dead:
        what, (key, value) = lay.bad[(d["partition"], d["offset"])]
        assert (d["key"], d["value"]) == (key, value), what
        assert d["topic"] == topic and d["error"], what
    # Every row before the DDL is applied (a step ends at a window's W or at a DDL's ts, so the
    # applied watermark is at least the stream's last row commit ts, and below the DDL).
    last_row_ts = max(ev.commit_ts for part in stream.partitions for ev in part if isinstance(ev, RowChange))
    assert last_row_ts <= consistent("stopped at the unparsable DDL") <= stream.final_ts

    # 3. --on-ddl-error skip as well: both bad DDLs dead-lettered with a position of one of their
    #    copies; the rest (inferred tables, the oversize message) applies; final state exact.
    summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, on_error="skip",
                         on_ddl_error="skip", max_buffer_rows=200)
    assert summary.watermark == lay.final_ts and summary.ddl_skipped == 2
    dead = _dead(spark, wh)
    ddl_dead = [d for d in dead if (d["partition"], d["offset"]) not in lay.bad]
    assert len(ddl_dead) == 2 and len(dead) == len(lay.bad) + 2
    for d in ddl_dead:
        query = d["value"].decode()
        assert (d["partition"], d["offset"]) in lay.ddl_positions[query] and d["error"].startswith("DdlError")
    assert_model_state(spark, wh, lay.expected_at(lay.final_ts), "after skipping")

    # 4. A row that does not fit its table (a column the table does not have): a clear stop naming
    #    the column and the row's position; the table is not touched; (soak:) a rerun stops the same way.
    bogus = Column("bogus", TypeCode.LONG, Flag.NULLABLE, 1)
    image = (*cols("t0", {"id": 99, "qty": 1, "note": "x"}), bogus)
    bad_row = RowChange(lay.final_ts + 1, SCHEMA, "t0", Op.INSERT, image)
    tail = [(0, *m) for m in _row_msg(protocol, [bad_row])]
    tail += [(p, *_single(protocol, Resolved(lay.final_ts + 2))) for p in (0, 1)]
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for p, k, v in tail:
        producer.send(topic, key=k, value=v, partition=p)
    producer.flush()
    producer.close()
    entry = Warehouse(wh).load_state().live_table(SCHEMA, "t0")
    assert entry is not None
    versions = spark.sql(f"DESCRIBE HISTORY delta.`{entry.path}`").count()
    for _ in range(size(1, 2)):
        with pytest.raises(SchemaError, match="'bogus'") as schema_info:
            run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, on_error="skip", on_ddl_error="skip")
        assert f"topic {topic!r} partition 0 offset {len(lay.parts[0])}" in str(schema_info.value)
        assert spark.sql(f"DESCRIBE HISTORY delta.`{entry.path}`").count() == versions
        assert applied_ts(wh) == lay.final_ts
    assert_model_state(spark, wh, lay.expected_at(lay.final_ts), "after the schema stop")
