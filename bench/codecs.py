"""Section 1, codecs: the reference's "case 0" message (ns per decode/encode, best of N, single
core) next to the seed's Go figures; events/s and MB/s over a simulated multi-table workload, the
same events in every protocol; message sizes raw and zlib-compressed. Every codec is reached
through `replicator.codec.codec_for`, the interface the engine decodes with.
"""

from __future__ import annotations

import datetime as dt
import functools
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from bench.common import BenchConfig, best_of, log, time_ns
from replicator.codec import PROTOCOLS, Message, codec_for
from replicator.codec.state import CodecState
from replicator.codec.values import DecodeOptions
from replicator.events import Column, Event, Op, RowChange, TypeCode

GO_ENCODE_NS = 4809  # the seed's Go benchmark, case 0 (ns/op)
GO_DECODE_NS = 7944
SEED_SIZES = {"craft": 300, "open": 708, "craft_zlib": 168, "open_zlib": 223}  # the seed's size table, case 0
CASE0_DECODE_TARGET_NS = 15_000


def case0_row() -> RowChange:
    """The reference's "case 0": one update of a.b, 8 new + 8 old columns, no flags."""

    def image(day: int, n: int) -> tuple[Column, ...]:
        return (
            Column("varchar", TypeCode.VARCHAR, 0, f"varchar{n}"),
            Column("string", TypeCode.STRING, 0, f"string{n}"),
            Column("date", TypeCode.DATE, 0, dt.date(2021, 1, day)),
            Column("timestamp", TypeCode.TIMESTAMP, 0, dt.datetime(2021, 1, day, tzinfo=dt.UTC)),
            Column("datetime", TypeCode.DATETIME, 0, dt.datetime(2021, 1, day)),
            Column("float", TypeCode.FLOAT, 0, float(n + 1)),
            Column("long", TypeCode.LONG, 0, 1000 * (n + 1)),
            Column("null", TypeCode.NULL, 0, None),
        )

    return RowChange(424316552636792833, "a", "b", Op.UPDATE, image(2, 1), image(1, 0))


def _relaxed(msg: bytes) -> bytes:
    """The reference's case-0 data writes MySQL relaxed dates ('2021/01/02'); same length."""
    return msg.replace(b"2021-01-02", b"2021/01/02").replace(b"2021-01-01", b"2021/01/01")


def _sizes(key: bytes | None, value: bytes) -> dict[str, int]:
    data = (key or b"") + value
    return {"raw": len(data), "zlib": len(zlib.compress(data))}


def workload_events(cfg: BenchConfig, n: int) -> list[tuple[int, Event]]:
    """(partition, event) of a simulated multi-table stream (rows, resolved, CREATE TABLE)."""
    from replicator.sim.simulate import SimConfig, Simulation

    sim = Simulation(SimConfig(protocol="open", seed=cfg.seed + 100, events=n, partitions=cfg.partitions,
                               tables=cfg.tables, ddl="none"))
    return list(sim.events())


def _encode_partitions(protocol: str, per_partition: Sequence[Sequence[Event]]) -> list[Message]:
    codec = codec_for(protocol)
    out: list[Message] = []
    for events in per_partition:
        out.extend(codec.encode(events, max_batch_size=16))
    return out


def _decode_all(protocol: str, messages: Sequence[Message]) -> int:
    """Decode a stream as a run does: one `CodecState` for it all (Simple's schemas from its BOOTSTRAPs)."""
    codec = codec_for(protocol)
    opts = DecodeOptions(state=CodecState())
    n = 0
    for key, value in messages:
        n += len(codec.decode(key, value, options=opts))
    return n


def _case0_fns(row: RowChange, protocol: str, key: bytes | None, relaxed: bytes,
               ticdc: bytes) -> dict[str, Callable[[], object]]:
    """The timed case-0 calls of one codec: decode (relaxed dates), encode, decode (TiCDC's dates)."""
    codec = codec_for(protocol)
    return {"decode": lambda: codec.decode(key, relaxed), "encode": lambda: codec.encode_rows([row]),
            "decode_ticdc": lambda: codec.decode(key, ticdc)}


def bench_codecs(cfg: BenchConfig, rounds: int | None = None) -> dict[str, Any]:
    """Section 1: case 0 ns/message, workload events/s and MB/s, message sizes. `rounds`: timed
    rounds of each (None: the bench's, fewer with --quick; 1 where the figures do not matter)."""
    row = case0_row()
    case0_protocols = ("craft", "open")  # the report's column order
    msgs: dict[str, tuple[bytes | None, bytes, bytes]] = {}  # protocol -> key, relaxed value, TiCDC's value
    for protocol in case0_protocols:
        ((key, ticdc),) = codec_for(protocol).encode_rows([row])
        msgs[protocol] = (key, _relaxed(ticdc), ticdc)
    (c_ev,), (o_ev,) = (codec_for(proto).decode(msgs[proto][0], msgs[proto][1]) for proto in case0_protocols)
    assert isinstance(c_ev, RowChange) and isinstance(o_ev, RowChange)
    assert sorted(c_ev.columns, key=str) == sorted(o_ev.columns, key=str)  # Open Protocol sorts by name
    ops = ("decode", "encode", "decode_ticdc")
    per_codec = {proto: _case0_fns(row, proto, *msgs[proto]) for proto in case0_protocols}
    # Rounds interleave every operation of every codec.
    t = time_ns({f"{proto} {op}": per_codec[proto][op] for op in ops for proto in case0_protocols},
                rounds or (5 if cfg.quick else 9))
    case0: dict[str, dict[str, Any]] = {proto: {op: t[f"{proto} {op}"] for op in ops} for proto in case0_protocols}
    for proto in case0_protocols:
        case0[proto]["size"] = _sizes(msgs[proto][0], msgs[proto][1])
    log.info("codec case 0: craft decode %.0f ns, open decode %.0f ns", case0["craft"]["decode"]["min_ns"],
             case0["open"]["decode"]["min_ns"])

    events = workload_events(cfg, cfg.workload_events)
    per_partition: list[list[Event]] = [[] for _ in range(cfg.partitions)]
    for p, ev in events:
        per_partition[p].append(ev)
    n_rows = sum(1 for _, ev in events if isinstance(ev, RowChange))
    workload: dict[str, Any] = {"events": len(events), "row_events": n_rows, "tables": cfg.tables}
    encoded = {protocol: _encode_partitions(protocol, per_partition) for protocol in PROTOCOLS}
    fns: dict[str, Callable[[], object]] = {}
    for protocol, messages in encoded.items():
        decoded = _decode_all(protocol, messages)
        assert decoded == len(events), (protocol, decoded, len(events))
        fns[f"{protocol} decode"] = functools.partial(_decode_all, protocol, messages)
        fns[f"{protocol} encode"] = functools.partial(_encode_partitions, protocol, per_partition)
    times = best_of(fns, rounds or (3 if cfg.quick else 5))
    for protocol, messages in encoded.items():
        nbytes = sum(len(k or b"") + len(v) for k, v in messages)
        enc, dec = times[f"{protocol} encode"], times[f"{protocol} decode"]
        enc_min, dec_min = enc["min_s"], dec["min_s"]
        compressed = sum(len(zlib.compress((k or b"") + v)) for k, v in messages)
        workload[protocol] = {
            "messages": len(messages), "bytes": nbytes, "zlib_bytes": compressed,
            "bytes_per_row": nbytes / max(n_rows, 1), "zlib_bytes_per_row": compressed / max(n_rows, 1),
            "decode_s": dec_min, "decode_median_s": dec["median_s"], "decode_wall_s": dec["wall_min_s"],
            "encode_s": enc_min, "encode_median_s": enc["median_s"], "encode_wall_s": enc["wall_min_s"],
            "decode_events_per_s": len(events) / dec_min, "decode_mb_per_s": nbytes / dec_min / 1e6,
            "decode_ns_per_event": dec_min / len(events) * 1e9,
            "encode_events_per_s": len(events) / enc_min, "encode_mb_per_s": nbytes / enc_min / 1e6,
        }
        log.info("codec workload %s: decode %.0f events/s", protocol, workload[protocol]["decode_events_per_s"])

    # A multi-row message: the first 16 row events of partition 0, one message in each protocol.
    rows16 = [ev for ev in per_partition[0] if isinstance(ev, RowChange)][:16]
    batch16: dict[str, Any] = {}
    for protocol in case0_protocols:
        ((k16, v16),) = codec_for(protocol).encode_rows(rows16, max_batch_size=16)
        batch16[protocol] = _sizes(k16, v16)
    batch16["rows"] = len(rows16)
    crc = bench_crc(b"".join((k or b"") + v for k, v in encoded["open"])[: 1 << 20])
    sizes = {"case0": {p: case0[p]["size"] for p in case0_protocols}, "batch16": batch16}
    from bench.sinkcodec import bench_storage_sink

    sink = bench_storage_sink(cfg, 3 if cfg.quick else 5,
                              functools.partial(_decode_all, "canal-json", encoded["canal-json"]), n_rows)
    return {"case0": case0, "workload": workload, "sizes": sizes, "crc": crc, "storage_sink": sink}


def bench_crc(data: bytes) -> dict[str, Any]:
    """kafka-python checks the CRC-32C of every fetched record batch: its pure-Python fallback
    against the `crc32c` C extension it uses when installed (a project dependency for that reason)."""
    from kafka.record import _crc32c as pure

    out: dict[str, Any] = {"bytes": len(data)}
    fns: dict[str, Callable[[], object]] = {"pure_python": lambda: pure.crc(data)}
    try:
        import crc32c

        assert crc32c.crc32c(data) == pure.crc(data)
        fns["c_extension"] = lambda: crc32c.crc32c(data)
    except ImportError:
        pass
    for name, t in time_ns(fns, 3).items():
        out[name] = t["min_ns"] / len(data)
    return out
