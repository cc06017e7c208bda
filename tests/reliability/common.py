"""Shared pieces of the reliability suite: sizes (CI vs `make soak`), a run with a fault in it, a
private broker that tests may stop, and checks against independently computed state (waiting, the
CLI, environments and progress files: tests/support).

Every scenario compares the final tables with a state computed without the engine: the streamgen
model (`tests/streamgen.py`, incl. `state_at(ts)`) or the simulator's expected tables
(`replicator/sim/simulate.py`, checked by `replicator.sim.simcheck`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kafka import KafkaProducer

from replicator.events import DdlEvent, Event, Resolved, RowChange
from replicator.sim import localkafka
from replicator.warehouse import Warehouse
from tests.integration.helpers import encode_partition
from tests.streamgen import SCHEMA, Stream
from tests.support.cli import start_replicator
from tests.support.env import cli_env

SOAK = os.environ.get("REPLICATOR_SOAK", "") not in ("", "0")


def size(ci: int, soak: int) -> int:
    """A scenario's size: reduced in CI, full under `make soak` (REPLICATOR_SOAK=1)."""
    return soak if SOAK else ci


# -- the replicator as a process ------------------------------------------------------------------

def start_run(bootstrap: str, topic: str, wh: Path, protocol: str, *args: str, fault: str | None = None,
              log: Path | None = None) -> subprocess.Popen[bytes]:
    """`replicator run --until-caught-up` in its own process group (so the JVM child can be killed
    with it); stderr to `log`. `topic` "~REGEX": `--topic-pattern REGEX` instead of `--topic`."""
    which = ["--topic-pattern", topic[1:]] if topic.startswith("~") else ["--topic", topic]
    return start_replicator("run", "--bootstrap-servers", bootstrap, *which, "--protocol", protocol,
                            "--warehouse", str(wh), "--until-caught-up", *args,
                            env=cli_env(**({"REPLICATOR_FAULT": fault} if fault else {})), log=log)


# -- a broker of our own ----------------------------------------------------------------------------

class PrivateBroker:
    """A broker on its own state dir that a test may stop and start again (same port)."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.handles: list[localkafka.BrokerHandle] = []
        self.port: int | None = None
        self.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        h = localkafka.start(self.state_dir, port=self.port, detach=False)
        self.port = h.port
        self.handles.append(h)

    def stop(self) -> None:
        localkafka.stop(self.state_dir)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            for h in self.handles:
                if h.process is not None and h.process.poll() is None:
                    h.process.kill()
                    h.process.wait(timeout=30)


def private_broker(tmp: Path) -> Iterator[PrivateBroker]:
    broker = PrivateBroker(tmp / "broker")
    try:
        yield broker
    finally:
        broker.close()


# -- streams ----------------------------------------------------------------------------------------

def produce_small_batches(bootstrap: str, topic: str, records: list[tuple[int, bytes | None, bytes | None]],
                          **producer: Any) -> None:
    """Produce in order per partition, in small record batches (so a consumer with small fetch
    sizes needs many round trips: a broker outage then hits the run mid-read)."""
    cfg: dict[str, Any] = {"acks": "all", "linger_ms": 0, "batch_size": 2048,
                           "max_in_flight_requests_per_connection": 1}
    cfg.update(producer)
    p = KafkaProducer(bootstrap_servers=bootstrap, **cfg)
    try:
        for part, key, value in records:
            p.send(topic, key=key, value=value, partition=part)
        p.flush()
    finally:
        p.close()


def stream_records(stream_parts: list[list[Event]], protocol: str) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(p, k, v) for p, events in enumerate(stream_parts) for k, v in encode_partition(events, protocol)]


def shifted(stream: Stream, after_ts: int, prefix: str) -> Stream:
    """The same model history moved after `after_ts`, its tables renamed t<i> -> <prefix><i>
    (a second phase of upstream activity on new tables, e.g. after partitions were added)."""
    names = {t: prefix + t[1:] for t in stream.tables}

    def move(ev: Event) -> Event:
        if isinstance(ev, Resolved):
            return Resolved(ev.ts + after_ts)
        if isinstance(ev, RowChange):
            return dataclasses.replace(ev, commit_ts=ev.commit_ts + after_ts, table=names[ev.table])
        assert isinstance(ev, DdlEvent)
        query = re.sub(r"`(t\d+)`", lambda m: f"`{names[m.group(1)]}`", ev.query)
        return dataclasses.replace(ev, commit_ts=ev.commit_ts + after_ts, table=names[ev.table], query=query)

    return Stream(
        [[move(e) for e in part] for part in stream.partitions],
        {names[t]: rows for t, rows in stream.expected.items()},
        [names[t] for t in stream.tables],
        stream.final_ts + after_ts,
        [(ts + after_ts, names[t]) for ts, t in stream.truncations],
        [(ts + after_ts, names[t], k, img) for ts, t, k, img in stream.history],
    )


# -- reading tables back ----------------------------------------------------------------------------

def read_model_tables(spark: Any, wh: Path, tables: list[str]) -> dict[str, dict[int, dict[str, Any]]]:
    """Tables of the streamgen model (schema shop, key id) as {table: {id: row}}; fails on a
    duplicated key (a dict would hide it)."""
    state = Warehouse(wh).load_state()
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for t in tables:
        entry = state.live_table(SCHEMA, t)
        if entry is None:
            out[t] = {}
            continue
        rows = [r.asDict() for r in spark.read.format("delta").load(entry.path).collect()]
        by_id = {r["id"]: r for r in rows}
        assert len(by_id) == len(rows), f"{SCHEMA}.{t}: duplicated keys in the warehouse"
        out[t] = by_id
    return out


def assert_model_state(spark: Any, wh: Path, expected: dict[str, dict[int, dict[str, Any]]], what: str) -> None:
    got = read_model_tables(spark, wh, sorted(expected))
    for t in sorted(expected):
        want = expected[t]
        have = got[t]
        lost = sorted(want.keys() - have.keys())
        extra = sorted(have.keys() - want.keys())
        changed = sorted(k for k in want.keys() & have.keys() if want[k] != have[k])
        assert not (lost or extra or changed), (
            f"{what}: {SCHEMA}.{t}: lost {lost[:10]}, resurrected/extra {extra[:10]}, wrong {changed[:10]}")
