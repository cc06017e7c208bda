"""A small model upstream (TiDB-like tables) and the TiCDC-like event stream it would emit.

Test helper, independent of the engine: it knows the true final table contents, so tests can
compare what the replicator produced against it. The stream follows the seeds' restrictions:
per-table commit-ts order on first send, all changes of one row on one partition, resolved events
broadcast per partition, DDL broadcast, and at-least-once replays of recent events.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from replicator.events import Column, DdlEvent, Event, Flag, Op, Resolved, RowChange, TypeCode

SCHEMA = "shop"


def cols(table: str, image: dict[str, Any]) -> tuple[Column, ...]:
    out = []
    for name, value in image.items():
        if name == "id":
            out.append(Column(name, TypeCode.LONGLONG, Flag.HANDLE_KEY | Flag.PRIMARY_KEY, value))
        elif name == "qty":
            out.append(Column(name, TypeCode.LONG, Flag.NULLABLE, value))
        else:
            out.append(Column(name, TypeCode.VARCHAR, Flag.NULLABLE, value))
    return tuple(out)


@dataclass
class Stream:
    partitions: list[list[Event]]
    expected: dict[str, dict[int, dict[str, Any]]]
    tables: list[str]
    final_ts: int
    truncations: list[tuple[int, str]] = field(default_factory=list)
    history: list[tuple[int, str, int | None, dict[str, Any] | None]] = field(default_factory=list)

    def state_at(self, ts: int) -> dict[str, dict[int, dict[str, Any]]]:
        """The true upstream tables after every transaction with commit ts <= ts."""
        out: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in self.tables}
        for when, table, key, image in self.history:
            if when > ts:
                break
            if key is None:
                out[table].clear()
            elif image is None:
                out[table].pop(key, None)
            else:
                out[table][key] = dict(image)
        return out


def generate(seed: int, *, n_txn: int = 60, n_partitions: int = 3, n_tables: int = 3,
             replay_prob: float = 0.15, truncate_prob: float = 0.03) -> Stream:
    rnd = random.Random(seed)
    tables = [f"t{i}" for i in range(n_tables)]
    state: dict[str, dict[int, dict[str, Any]]] = {t: {} for t in tables}
    parts: list[list[Event]] = [[] for _ in range(n_partitions)]
    sent: list[list[Event]] = [[] for _ in range(n_partitions)]
    ts = 1000
    truncations: list[tuple[int, str]] = []
    history: list[tuple[int, str, int | None, dict[str, Any] | None]] = []

    def route(table: str, key: int) -> int:
        return (hash(table) * 31 + key) % n_partitions

    # CREATE TABLEs broadcast first.
    for t in tables:
        ts += 1
        q = f"CREATE TABLE `{SCHEMA}`.`{t}` (id BIGINT PRIMARY KEY, qty INT, note VARCHAR(20))"
        for p in range(n_partitions):
            parts[p].append(DdlEvent(ts, SCHEMA, t, 3, q))
    for _ in range(n_txn):
        ts += rnd.randint(1, 5)
        if rnd.random() < truncate_prob:
            t = rnd.choice(tables)
            state[t].clear()
            truncations.append((ts, t))
            history.append((ts, t, None, None))
            for p in range(n_partitions):
                parts[p].append(DdlEvent(ts, SCHEMA, t, 11, f"TRUNCATE TABLE `{SCHEMA}`.`{t}`"))
            continue
        touched: dict[tuple[str, int], None] = {}
        pending: list[tuple[int, RowChange]] = []
        for _ in range(rnd.randint(1, 4)):
            t = rnd.choice(tables)
            rows = state[t]
            key = rnd.randint(1, 12)
            if (t, key) in touched:
                continue  # one event per row per transaction (TiCDC merges them)
            roll = rnd.random()
            if key not in rows:
                image = {"id": key, "qty": rnd.choice([None, rnd.randint(-5, 100)]),
                         "note": rnd.choice(["a", "", None, "é✓"])}
                rows[key] = image
                history.append((ts, t, key, image))
                pending.append((route(t, key), RowChange(ts, SCHEMA, t, Op.INSERT, cols(t, image))))
                touched[(t, key)] = None
            elif roll < 0.3:
                old = rows.pop(key)
                history.append((ts, t, key, None))
                pending.append((route(t, key), RowChange(ts, SCHEMA, t, Op.DELETE, (), cols(t, {"id": old["id"]}))))
                touched[(t, key)] = None
            elif roll < 0.45:
                new_key = rnd.randint(13, 40)
                if new_key in rows or (t, new_key) in touched:
                    continue
                old = rows.pop(key)
                image = {**old, "id": new_key, "qty": rnd.randint(0, 9)}
                rows[new_key] = image
                history.append((ts, t, key, None))
                history.append((ts, t, new_key, image))
                # TiCDC splits a key change into delete + insert (each routed by its own key).
                pending.append((route(t, key), RowChange(ts, SCHEMA, t, Op.DELETE, (), cols(t, old))))
                pending.append((route(t, new_key), RowChange(ts, SCHEMA, t, Op.INSERT, cols(t, image))))
                touched[(t, key)] = None
                touched[(t, new_key)] = None
            else:
                old = rows[key]
                image = {**old, "qty": rnd.choice([None, rnd.randint(0, 50)]), "note": rnd.choice(["b", "ü", None])}
                rows[key] = image
                history.append((ts, t, key, image))
                pending.append((route(t, key), RowChange(ts, SCHEMA, t, Op.UPDATE, cols(t, image), cols(t, old))))
                touched[(t, key)] = None
        for p, ev in pending:
            parts[p].append(ev)
            sent[p].append(ev)
        # Occasionally: replay a few recent events of a partition (at-least-once delivery).
        if rnd.random() < replay_prob:
            p = rnd.randrange(n_partitions)
            if sent[p]:
                k = rnd.randint(1, min(4, len(sent[p])))
                parts[p].extend(sent[p][-k:])
        # Occasionally: resolved ts on every partition.
        if rnd.random() < 0.3:
            for p in range(n_partitions):
                parts[p].append(Resolved(ts))
    ts += 1
    for p in range(n_partitions):
        parts[p].append(Resolved(ts))
    return Stream(parts, {t: dict(v) for t, v in state.items()}, tables, ts, truncations, history)


def interleave(stream: Stream, seed: int) -> list[tuple[int, int, Event]]:
    """One arrival order across partitions: (partition, offset, event), per-partition order kept."""
    rnd = random.Random(seed)
    idx = [0] * len(stream.partitions)
    out: list[tuple[int, int, Event]] = []
    while True:
        live = [p for p in range(len(idx)) if idx[p] < len(stream.partitions[p])]
        if not live:
            return out
        p = rnd.choice(live)
        out.append((p, idx[p], stream.partitions[p][idx[p]]))
        idx[p] += 1
