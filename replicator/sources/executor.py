"""What `--reader spark` runs on Spark executors: pure functions over Arrow record batches.

`decode_batches` turns the Kafka records of one task (Spark's Kafka batch source gives each task
one Kafka partition's offset range, in offset order) into one event per output row: row changes,
resolved events, DDLs, dead letters and the task's counts (records, events, invalid text). Each row change already
carries what the driver reader's windower decides on arrival: the partition watermark before its
message and whether it is a replay or already applied. `change_batches` turns a table's row
changes into the positional MERGE source of `replicator.delta.writer` (`_c<i>`, `_op`) plus the
order columns the last change per key is chosen by.

No Spark, no Kafka here (only pyarrow and the codecs), so everything is unit-tested without a
JVM; `replicator.sources.spark_reader` is the Spark side.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from replicator.changes import key_of
from replicator.codec import codec_for
from replicator.codec.large import HANDLE_KEY_ONLY_REMEDY
from replicator.codec.values import DecodeOptions, InvalidText
from replicator.delta.typemap import converter_for
from replicator.errors import ClaimCheckError, DecodeError, ReplicatorError, SchemaError, UnsupportedError
from replicator.events import Column, DdlEvent, Op, Position, Resolved, RowChange
from replicator.filters import TableFilter
from replicator.tables import TableSpec

ROW, RESOLVED, DDL, DEAD, STATS = 0, 1, 2, 3, 4
"""Event kinds (`kind` column)."""
KEEP, REPLAY, APPLIED = 0, 1, 2
"""A row change's fate on arrival (`drop` column): buffered, a replay, already applied."""

EVENTS_SCHEMA = pa.schema([
    ("partition", pa.int32()), ("offset", pa.int64()), ("idx", pa.int32()), ("kind", pa.int8()),
    ("ts", pa.int64()), ("wm_before", pa.int64()), ("drop", pa.int8()),
    ("schema", pa.string()), ("table", pa.string()), ("payload", pa.binary()),
])
"""One decoded event per row; `ts` is a row's or DDL's commit ts or a resolved ts."""
EVENTS_DDL = ("`partition` INT, `offset` BIGINT, idx INT, kind TINYINT, ts BIGINT, wm_before BIGINT, "
              "`drop` TINYINT, `schema` STRING, `table` STRING, payload BINARY")

ORDER_COLUMNS = ("_ts", "_p", "_o", "_i", "_sub")
"""Order of a table's changes: commit ts, then position (partition, offset, index in the message),
then an update's delete of its old key before its new image."""

CLAIM_CHECK_REASON = ClaimCheckError.__name__ + ":"
"""How the reason of a DEAD event for an unresolved claim-check reference starts: it stops the run."""

_BATCH_ROWS = 4096
_DELETE, _UPDATE, _INSERT = Op.DELETE.value, Op.UPDATE.value, Op.INSERT.value


def check_row(ev: RowChange) -> None:
    """Refuse a row TiCDC sent without its full image (large-message handling): both readers.

    The driver reader resolves claim-check references before this (sources/claimcheck.py); a
    reference that reaches it comes from the Spark reader, which does not resolve them. A reference
    is checked first: Simple's also says handleKeyOnly, but its full row exists in the file."""
    if ev.claim_check:  # stops the run (never dead-lettered: the row exists)
        raise ClaimCheckError(
            f"row of {ev.schema}.{ev.table} at ts {ev.commit_ts} is a claim-check reference {ev.claim_check!r} "
            "(TiCDC large-message handling), which --reader spark does not resolve: run with --reader "
            "driver --claim-check-storage <the changefeed's claim-check-storage-uri>"
        )
    if ev.only_handle_key:
        raise UnsupportedError(f"row of {ev.schema}.{ev.table} at ts {ev.commit_ts}: {HANDLE_KEY_ONLY_REMEDY}")


def _columns(cols: tuple[Column, ...]) -> tuple[tuple[str, int, int, Any], ...]:
    return tuple((c.name, c.type_code, c.flags, c.value) for c in cols)


def row_payload(ev: RowChange) -> bytes:
    """A row change without what its event row already holds (commit ts, names, position), as
    plain tuples: five times faster to pickle and unpickle than the dataclasses."""
    return pickle.dumps((ev.op.value, _columns(ev.columns), _columns(ev.old_columns), ev.partition_id, ev.row_id),
                        protocol=pickle.HIGHEST_PROTOCOL)


def row_from_payload(payload: bytes, *, commit_ts: int, schema: str, table: str, position: Position) -> RowChange:
    op, cols, old, partition_id, row_id = pickle.loads(payload)
    return RowChange(commit_ts, schema, table, Op(op), tuple(Column(*c) for c in cols),
                     tuple(Column(*c) for c in old), partition_id, row_id, position=position)


class EventRows:
    """Column lists of EVENTS_SCHEMA, flushed as record batches (decoded here, spilled by the driver)."""

    def __init__(self) -> None:
        self.cols: list[list[Any]] = [[] for _ in EVENTS_SCHEMA]

    def add(self, *values: Any) -> None:
        for col, v in zip(self.cols, values, strict=True):
            col.append(v)

    def __len__(self) -> int:
        return len(self.cols[0])

    def flush(self) -> pa.RecordBatch:
        batch = pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(self.cols, EVENTS_SCHEMA,
                                                                                    strict=True)],
                                           schema=EVENTS_SCHEMA)
        self.cols = [[] for _ in EVENTS_SCHEMA]
        return batch


def decode_batches(batches: Iterable[pa.RecordBatch], *, protocol: str, options: DecodeOptions,
                   watermarks: Mapping[int, int], applied_ts: int,
                   table_filter: TableFilter | None = None) -> Iterator[pa.RecordBatch]:
    """Decode Kafka records (`topic`, `partition`, `offset`, `timestamp`, `key`, `value`), each
    partition's in offset order, into EVENTS_SCHEMA batches.

    `watermarks`: each partition's watermark before its first record (its restart cursor's);
    `applied_ts`: the warehouse's applied watermark. A message that does not decode becomes one
    DEAD event (its record, the dead letter's error text and a stopped run's, pickled); the
    partition's watermark goes on as if it was skipped, and the driver cuts the partition there
    when the run stops on errors. `table_filter`: rows of tables outside it are skipped here and
    counted per reason in the STATS event (DDLs go to the driver, which filters them).
    """
    codec = codec_for(protocol)
    invalid = InvalidText()
    opts = dataclasses.replace(options, invalid_text=invalid)
    wm = dict(watermarks)
    last: dict[int, int] = {}
    records = decoded = 0
    filtered: dict[str, int] = {}
    active = table_filter if table_filter is not None and table_filter.active else None
    out = EventRows()
    for batch in batches:
        cols = batch.to_pydict()
        for topic, p, o, stamp, key, value in zip(cols["topic"], cols["partition"], cols["offset"], cols["timestamp"],
                                                  cols["key"], cols["value"], strict=True):
            if o <= last.get(p, -1):
                raise ReplicatorError(f"topic {topic!r} partition {p}: offset {o} read after {last[p]}; the Spark "
                                      "reader needs each partition's records in offset order in one task")
            last[p] = o
            records += 1
            pos = Position(topic, p, o)
            before = wm.get(p, 0)
            try:
                events = codec.decode(key, value, options=opts, position=pos)
                for ev in events:
                    if isinstance(ev, RowChange):
                        check_row(ev)
            except (DecodeError, UnsupportedError, ClaimCheckError) as exc:
                # A ClaimCheckError's DEAD event (reason CLAIM_CHECK_REASON...) stops the driver without
                # a dead letter (engine/batch.py), also with --on-error skip.
                millis = int(stamp.timestamp() * 1000) if stamp is not None else -1
                reason = f"{type(exc).__name__}: {exc}"  # what the dead-letter table says, as the driver reader
                failure = exc if isinstance(exc, DecodeError) else DecodeError(str(exc))
                if failure.position is None:  # what a run stopped by it says, as the driver reader
                    failure.at(str(Position(topic, p, o)))
                out.add(p, o, 0, DEAD, 0, before, KEEP, None, None,
                        pickle.dumps((millis, key, value, reason, str(failure))))
                continue
            decoded += len(events)
            for i, ev in enumerate(events):
                if isinstance(ev, RowChange):
                    if active is not None and (skip := active.reason(ev.schema, ev.table)) is not None:
                        filtered[skip] = filtered.get(skip, 0) + 1
                        continue
                    ts = ev.commit_ts
                    drop = REPLAY if ts <= wm.get(p, 0) else APPLIED if ts <= applied_ts else KEEP
                    out.add(p, o, i, ROW, ts, before, drop, ev.schema, ev.table, row_payload(ev))
                elif isinstance(ev, Resolved):
                    wm[p] = max(wm.get(p, 0), ev.ts)
                    out.add(p, o, i, RESOLVED, ev.ts, before, KEEP, None, None, None)
                elif isinstance(ev, DdlEvent):
                    out.add(p, o, i, DDL, ev.commit_ts, before, KEEP, ev.schema, ev.table,
                            pickle.dumps(dataclasses.replace(ev, position=pos)))
            if len(out) >= _BATCH_ROWS:
                yield out.flush()
    out.add(-1, -1, 0, STATS, 0, 0, KEEP, None, None,
            pickle.dumps({"records": records, "events": decoded, "invalid": invalid.counts,
                          "filtered": filtered}))
    if len(out):
        yield out.flush()


def change_schema(spec: TableSpec) -> pa.Schema:
    """`_c<i>` per table column (typed as the table's), `_op` (0 upsert, 1 delete), ORDER_COLUMNS,
    `_ins` (the change is an INSERT's) and `_pre` (an UPDATE's with its pre-image)."""
    from replicator.delta.writer import arrow_type

    fields = [pa.field(f"_c{i}", arrow_type(c.spark_type)) for i, c in enumerate(spec.columns)]
    fields += [pa.field("_op", pa.int8()), pa.field("_ts", pa.int64()), pa.field("_p", pa.int32()),
               pa.field("_o", pa.int64()), pa.field("_i", pa.int32()), pa.field("_sub", pa.int8()),
               pa.field("_ins", pa.int8()), pa.field("_pre", pa.int8())]
    return pa.schema(fields)


def change_shape(spec: TableSpec) -> tuple[Any, ...]:
    """What `change_batches` makes of rows depends on, of a spec: the same shape, the same changes."""
    return tuple(spec.key), tuple((c.name, c.spark_type.upper().replace(" ", ""), tuple(c.labels), c.is_set)
                                  for c in spec.columns)


def change_batches(batches: Iterable[pa.RecordBatch], *, topic: str, spec: TableSpec,
                   key_hashes: list[int] | None = None) -> Iterator[pa.RecordBatch]:
    """A table's row changes (`ts`, `partition`, `offset`, `idx`, `payload`) as key changes, as the
    driver reader's `collapse` sees them: a delete of a key, an upsert of a full image, and for an
    update that changed the key, a delete of the old key first. The last change per key is
    chosen afterwards (by ORDER_COLUMNS); raises SchemaError for a row with a column the table does
    not have or without its key, naming the row's position. `key_hashes` (the driver's spill)
    gains `hash(Change.key)` of each change made, in order."""
    schema = change_schema(spec)
    names = {c.name for c in spec.columns}
    key = tuple(spec.key)
    key_index = {k: i for i, k in enumerate(key)}
    convs = [converter_for(c) for c in spec.columns]
    for batch in batches:
        d = batch.to_pydict()
        images: list[dict[str, Any] | None] = []
        keys: list[tuple[Any, ...]] = []
        order: list[tuple[int, int, int, int, int]] = []
        flags: list[tuple[int, int]] = []  # (_ins, _pre) of each change
        for ts, p, o, i, payload in zip(d["ts"], d["partition"], d["offset"], d["idx"], d["payload"], strict=True):
            # Plain tuples on the hot path (name, type, flags, value); a RowChange only to name a bad row.
            op, cols, old_cols = pickle.loads(payload)[:3]
            if not names.issuperset([c[0] for c in cols or old_cols]):
                row = row_from_payload(payload, commit_ts=ts, schema=spec.schema, table=spec.table,
                                       position=Position(topic, p, o))
                name = next(c.name for c in row.columns or row.old_columns if c.name not in names)
                raise SchemaError(
                    f"row of {row.schema}.{row.table} at commit ts {ts} has column {name!r} that the "
                    f"replicated table does not have ({row.position}); a DDL is missing from the stream")
            image = {c[0]: c[3] for c in ((old_cols or cols) if op == _DELETE else cols)}
            try:
                new_key = tuple([image[k] for k in key])
            except KeyError:
                row = row_from_payload(payload, commit_ts=ts, schema=spec.schema, table=spec.table,
                                       position=Position(topic, p, o))
                key_of(row.old_columns or row.columns if row.op is Op.DELETE else row.columns, key, row)
                raise  # key_of raised the SchemaError naming the row; this line is not reached
            if op == _DELETE:
                keys.append(new_key)
                images.append(None)
                order.append((ts, p, o, i, 1))
                flags.append((0, 0))
                continue
            pre = 1 if op == _UPDATE and old_cols else 0
            if pre:
                old = {c[0]: c[3] for c in old_cols}
                if all(k in old for k in key):
                    old_key = tuple([old[k] for k in key])
                    if old_key != new_key:
                        keys.append(old_key)
                        images.append(None)
                        order.append((ts, p, o, i, 0))
                        flags.append((0, 1))
            keys.append(new_key)
            images.append(image)
            order.append((ts, p, o, i, 1))
            flags.append((1 if op == _INSERT else 0, pre))
        arrays: list[pa.Array] = []
        for ci, spec_col in enumerate(spec.columns):
            conv, ki = convs[ci], key_index.get(spec_col.name)
            values_ = [conv(img.get(spec_col.name)) if img is not None else (conv(k[ki]) if ki is not None else None)
                       for img, k in zip(images, keys, strict=True)]
            try:
                arrays.append(pa.array(values_, type=schema.field(ci).type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                offsets = sorted({(p, o) for _, p, o, _, _ in order})
                raise SchemaError(
                    f"column {spec.schema}.{spec.table}.{spec_col.name}: value does not fit "
                    f"{spec_col.spark_type}: {exc}; "
                    f"the rows came from topic {topic!r} partition/offset {offsets[0]}..{offsets[-1]}") from None
        arrays.append(pa.array([1 if img is None else 0 for img in images], type=pa.int8()))
        for j, t in enumerate((pa.int64(), pa.int32(), pa.int64(), pa.int32(), pa.int8())):
            arrays.append(pa.array([x[j] for x in order], type=t))
        for j in (0, 1):
            arrays.append(pa.array([f[j] for f in flags], type=pa.int8()))
        if key_hashes is not None:
            key_hashes.extend(map(hash, keys))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)
