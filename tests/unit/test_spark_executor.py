"""What `--reader spark` runs on executors, without Spark: decoding Kafka record batches into
events with their fates on arrival (as the driver reader's windower decides them), and turning a
table's rows into the MERGE source (as the driver reader's collapse does)."""

from __future__ import annotations

import datetime as dt
import pickle
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.changes import collapse
from replicator.codec import codec_for
from replicator.codec.values import DecodeOptions
from replicator.delta.typemap import spec_from_row
from replicator.delta.writer import TableWriter
from replicator.engine.window import Windower
from replicator.errors import ReplicatorError, SchemaError
from replicator.events import TP, Column, Flag, Op, Position, RowChange, TypeCode
from replicator.sim.simulate import SimConfig, Simulation
from replicator.sources import executor as ex

KAFKA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
                   ("timestamp", pa.timestamp("us", tz="UTC")), ("key", pa.binary()), ("value", pa.binary())])
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _records(msgs: list[tuple[int, bytes | None, bytes]], topic: str = "t") -> list[pa.RecordBatch]:
    offsets: dict[int, int] = {}
    rows = []
    for p, k, v in msgs:
        o = offsets.get(p, 0)
        offsets[p] = o + 1
        rows.append((topic, p, o, EPOCH, k, v))
    cols = list(zip(*rows, strict=True))
    return [pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(cols, KAFKA, strict=True)],
                                       schema=KAFKA)]


def _decoded(batches: list[pa.RecordBatch], **kw: Any) -> dict[str, list[Any]]:
    out = pa.Table.from_batches(list(ex.decode_batches(batches, protocol=kw.pop("protocol", "open"),
                                                        options=kw.pop("options", DecodeOptions()), **kw)),
                                schema=ex.EVENTS_SCHEMA)
    return out.to_pydict()


@pytest.mark.parametrize("protocol", ["open", "craft", "canal-json"])
def test_fates_on_arrival_are_the_windowers(protocol: str) -> None:
    sim = Simulation(SimConfig(protocol=protocol, seed=7, events=600, partitions=2, tables=3, ddl="auto"))  # type: ignore[arg-type]
    msgs = list(sim.messages())
    ev = _decoded(_records(msgs), protocol=protocol, watermarks={}, applied_ts=0)
    rows = [i for i, k in enumerate(ev["kind"]) if k == ex.ROW]
    # The driver reader's windower over the same records, in offset order per partition.
    w = Windower([TP("t", 0), TP("t", 1)])
    codec = codec_for(protocol)
    offsets: dict[int, int] = {}
    for p, k, v in msgs:
        o = offsets.get(p, 0)
        offsets[p] = o + 1
        w.offer(TP("t", p), o, codec.decode(k, v, options=DecodeOptions()))
    drops = [ev["drop"][i] for i in rows]
    assert len(rows) == w.stats.rows
    assert drops.count(ex.REPLAY) == w.stats.replays_dropped > 0
    assert drops.count(ex.APPLIED) == w.stats.already_applied == 0
    stats = pickle.loads(ev["payload"][ev["kind"].index(ex.STATS)])
    assert stats["records"] == len(msgs)
    assert ev["kind"].count(ex.DDL) == w.stats.ddl_events
    assert ev["kind"].count(ex.RESOLVED) == w.stats.resolved
    # Each row's watermark before it is its partition's highest resolved ts at an earlier offset.
    for i in rows[:200]:
        p, o = ev["partition"][i], ev["offset"][i]
        before = [ev["ts"][j] for j, k in enumerate(ev["kind"])
                  if k == ex.RESOLVED and ev["partition"][j] == p and ev["offset"][j] < o]
        assert ev["wm_before"][i] == max(before, default=0)


def test_cursor_watermark_and_applied_watermark_drop_rows() -> None:
    sim = Simulation(SimConfig(protocol="open", seed=8, events=300, partitions=1, tables=2, ddl="none"))
    msgs = list(sim.messages())
    plain = _decoded(_records(msgs), watermarks={}, applied_ts=0)
    ts = sorted(t for t, k in zip(plain["ts"], plain["kind"], strict=True) if k == ex.ROW)
    mid = ts[len(ts) // 2]
    by_cursor = _decoded(_records(msgs), watermarks={0: mid}, applied_ts=0)
    by_applied = _decoded(_records(msgs), watermarks={}, applied_ts=mid)
    for ev, fate in ((by_cursor, ex.REPLAY), (by_applied, ex.APPLIED)):
        for t, k, d in zip(ev["ts"], ev["kind"], ev["drop"], strict=True):
            if k == ex.ROW and t <= mid:
                assert d in (fate, ex.REPLAY)
            elif k == ex.ROW:
                assert d in (ex.KEEP, ex.REPLAY)


def test_bad_message_is_a_dead_event_and_the_partition_goes_on() -> None:
    sim = Simulation(SimConfig(protocol="craft", seed=9, events=100, partitions=1, tables=1, ddl="none"))
    msgs = list(sim.messages())
    msgs.insert(3, (0, None, b"\x00\x01garbage\xff"))
    ev = _decoded(_records(msgs), protocol="craft", watermarks={}, applied_ts=0)
    dead = [i for i, k in enumerate(ev["kind"]) if k == ex.DEAD]
    assert [ev["offset"][i] for i in dead] == [3]
    millis, key, value, reason, stop = pickle.loads(ev["payload"][dead[0]])
    assert (millis, key, value) == (int(EPOCH.timestamp() * 1000), None, b"\x00\x01garbage\xff")
    assert reason.startswith("DecodeError: ")
    assert stop.endswith("in topic 't' partition 0 offset 3")
    assert max(o for o, k in zip(ev["offset"], ev["kind"], strict=True) if k == ex.ROW) > 3


def test_compressed_values_decode_and_claim_check_references_are_stopping_dead_events(tmp_path: Any) -> None:
    """Large messages on executors: values decompressed; a reference is not resolved there but
    becomes a DEAD event whose reason makes the driver stop (engine/batch.py), not dead-letter."""
    config = SimConfig(protocol="open", seed=9, events=100, partitions=1, tables=2, ddl="none")
    plain = _decoded(_records(list(Simulation(config).messages())), watermarks={}, applied_ts=0)
    sim = Simulation(SimConfig(protocol="open", seed=9, events=100, partitions=1, tables=2, ddl="none",
                               compression="lz4"))
    ev = _decoded(_records(list(sim.messages())), options=DecodeOptions(compression="lz4"), watermarks={},
                  applied_ts=0)
    assert ev == plain
    sim = Simulation(SimConfig(protocol="open", seed=9, events=100, partitions=1, tables=2, ddl="none",
                               compression="lz4", claim_check_dir=str(tmp_path), max_message_bytes=700))
    ev = _decoded(_records(list(sim.messages())), options=DecodeOptions(compression="lz4"), watermarks={},
                  applied_ts=0)
    dead = [pickle.loads(ev["payload"][i]) for i, k in enumerate(ev["kind"]) if k == ex.DEAD]
    assert 0 < len(dead) <= sim.claim_check_files  # one per message holding references
    for _millis, _key, _value, reason, stop in dead:
        assert reason.startswith(ex.CLAIM_CHECK_REASON) and "--reader driver --claim-check-storage" in reason
        assert "in topic 't' partition 0 offset" in stop


def test_records_out_of_offset_order_are_refused() -> None:
    batch = _records([(0, None, b"x"), (0, None, b"y")])[0]
    swapped = batch.take([1, 0])
    with pytest.raises(ReplicatorError, match="partition 0: offset 0 read after 1"):
        _decoded([swapped], watermarks={}, applied_ts=0)


# -- change sets ---------------------------------------------------------------------------------

def _col(name: str, value: Any, key: bool = False) -> Column:
    return Column(name, TypeCode.LONGLONG if name != "note" else TypeCode.VARCHAR,
                  (Flag.HANDLE_KEY | Flag.PRIMARY_KEY) if key else 0, value)


def _image(k: int, note: str | None) -> tuple[Column, ...]:
    return (_col("id", k, key=True), _col("note", note))


SPEC = spec_from_row(RowChange(1, "s", "t", Op.INSERT, _image(1, "x")))


@st.composite
def _row_changes(draw: st.DrawFn) -> list[RowChange]:
    n = draw(st.integers(1, 30))
    out = []
    for i in range(n):
        op = draw(st.sampled_from([Op.INSERT, Op.UPDATE, Op.DELETE]))
        k = draw(st.integers(0, 5))
        note = draw(st.one_of(st.none(), st.text(max_size=3)))
        ts = draw(st.integers(1, 8))
        old: tuple[Column, ...] = ()
        if op is Op.UPDATE:
            old = _image(draw(st.integers(0, 5)), None)
        cols = _image(k, note) if op is not Op.DELETE else ()
        if op is Op.DELETE:
            old = _image(k, note)
        out.append(RowChange(ts, "s", "t", op, cols, old, position=Position("t", 0, i)))
    return out


def _in_batch(rows: list[RowChange]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "ts": pa.array([r.commit_ts for r in rows], pa.int64()),
        "partition": pa.array([r.position.partition for r in rows if r.position], pa.int32()),
        "offset": pa.array([r.position.offset for r in rows if r.position], pa.int64()),
        "idx": pa.array([0] * len(rows), pa.int32()),
        "payload": pa.array([ex.row_payload(r) for r in rows], pa.binary()),
    })


@settings(max_examples=200, deadline=None)
@given(_row_changes())
def test_last_change_per_key_equals_the_drivers_collapse(rows: list[RowChange]) -> None:
    out = pa.Table.from_batches(list(ex.change_batches([_in_batch(rows)], topic="t", spec=SPEC))).to_pylist()
    last: dict[Any, dict[str, Any]] = {}
    for r in sorted(out, key=lambda r: tuple(r[c] for c in ex.ORDER_COLUMNS)):
        last[r["_c0"]] = r
    # The driver: rows in (commit ts, arrival) order; arrival is offset order within a partition (a
    # key's changes all travel on one partition: TiCDC routes by table or key).
    ordered = sorted(rows, key=lambda r: (r.commit_ts, r.position.offset if r.position else 0))
    want = TableWriter.source_table(None, SPEC, collapse(ordered, SPEC.key)).to_pylist()  # type: ignore[arg-type]
    got = [{k: v for k, v in r.items() if k.startswith("_c") or k == "_op"} for r in last.values()]
    assert sorted(got, key=lambda r: r["_c0"]) == sorted(want, key=lambda r: r["_c0"])


def test_a_column_the_table_lacks_names_the_row() -> None:
    row = RowChange(5, "s", "t", Op.INSERT, (*_image(1, "x"), _col("extra", 1)), position=Position("t", 2, 41))
    with pytest.raises(SchemaError, match=r"column 'extra'.*partition 2 offset 41"):
        list(ex.change_batches([_in_batch([row])], topic="t", spec=SPEC))


def test_a_row_without_its_key_names_the_row() -> None:
    row = RowChange(5, "s", "t", Op.INSERT, (_col("note", "x"),), position=Position("t", 0, 7))
    with pytest.raises(SchemaError, match=r"lacks handle-key column 'id'.*offset 7"):
        list(ex.change_batches([_in_batch([row])], topic="t", spec=SPEC))


@settings(max_examples=200, deadline=None)
@given(_row_changes())
def test_first_change_per_key_marks_fresh_inserts_as_the_drivers_collapse(rows: list[RowChange]) -> None:
    # The Spark side keeps, per key, `_ins` of its first change in ORDER_COLUMNS order (`_fresh`)
    # and whether any change was an update with its pre-image (`_pre`).
    out = pa.Table.from_batches(list(ex.change_batches([_in_batch(rows)], topic="t", spec=SPEC))).to_pylist()
    first: dict[Any, int] = {}
    pre: dict[Any, int] = {}
    for r in sorted(out, key=lambda r: tuple(r[c] for c in ex.ORDER_COLUMNS)):
        first.setdefault(r["_c0"], r["_ins"])
        pre[r["_c0"]] = max(pre.get(r["_c0"], 0), r["_pre"])
    ordered = sorted(rows, key=lambda r: (r.commit_ts, r.position.offset if r.position else 0))
    want = {c.key[0]: c.fresh for c in collapse(ordered, SPEC.key, trust_inserts=True)}
    assert {k: bool(v) for k, v in first.items()} == want
    assert any(pre.values()) == any(r.op is Op.UPDATE and r.old_columns for r in rows)
