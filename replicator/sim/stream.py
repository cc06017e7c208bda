"""The simulated stream: transactions, DDL, resolved events and replays over the model upstream.

Deterministic per seed; streaming (one transaction at a time: memory holds the live rows and a
bounded replay history). Records are encoded through the one codec interface
(`replicator.codec.codec_for`), batched as TiCDC batches rows.
"""

from __future__ import annotations

import random
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from replicator.codec import Message, codec_for
from replicator.codec.large import ClaimCheckWriter, claim_check_envelope
from replicator.events import Column, DdlEvent, Event, Op, Resolved, RowChange, Value
from replicator.sim.columns import column, gen_value, quote, table_value
from replicator.sim.expected import ExpectedState, SimStats
from replicator.sim.model import ModelTable, SimConfig
from replicator.sim.templates import DDL_PLAN, TEMPLATES, resolve_ddl_kinds


class SimMessage(NamedTuple):
    """One Kafka record of the simulated topic."""

    partition: int
    key: bytes | None
    value: bytes
    timestamp_ms: int


def _route(schema: str, table: str, key: tuple[Value, ...], partitions: int,
           dispatcher: str = "index-value") -> int:
    """Partition of a row: a stable hash of table and handle key (TiCDC's index-value dispatcher), or
    of the table alone (its table dispatcher: every row of a table on one partition)."""
    if dispatcher == "table":
        return zlib.crc32(f"{schema}.{table}".encode("utf-8", "surrogatepass")) % partitions
    return zlib.crc32(f"{schema}.{table}\x00{key!r}".encode("utf-8", "surrogatepass")) % partitions


class Simulation:
    """One simulated stream. Iterate ``events()``, ``messages()`` or ``records()`` once; afterwards
    ``expected`` holds the true final state and ``stats`` the counts."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.ddl_kinds = resolve_ddl_kinds(config.ddl)
        self.stats = SimStats(messages={p: 0 for p in range(config.partitions)})
        self._expected: ExpectedState | None = None
        self._used = False
        n = config.tables
        self._tables: list[ModelTable] = []
        for i in range(n):
            tpl = TEMPLATES[i % len(TEMPLATES)]
            suffix = "" if i < len(TEMPLATES) else f"_{i // len(TEMPLATES) + 1}"
            self._tables.append(ModelTable(tpl, tpl.table + suffix, list(tpl.columns),
                                           insert_only=i < config.insert_only))
        self._rnd = random.Random(config.seed)
        self._ms = int(config.start_time.timestamp() * 1000)
        self._logical = 0
        self.ts = 0
        self._resolved = [0] * config.partitions
        self._history: list[deque[Event]] = [deque() for _ in range(config.partitions)]
        self._checkpoint = 0
        self._broadcast_ddl = codec_for(config.protocol).broadcasts_ddl
        self.claim_check_files = 0  # claim-check files written (large-message handling)

    # -- public ---------------------------------------------------------------------------------
    @property
    def expected(self) -> ExpectedState:
        if self._expected is None:
            raise RuntimeError("the expected state is known once the stream has been fully iterated")
        return self._expected

    def live_table(self, schema: str, name: str) -> ModelTable | None:
        """The model table of that name now (its columns as of the last event handed out, once the
        stream moved past it); None when there is none."""
        return next((t for t in self._tables if t.schema == schema and t.name == name), None)

    def events(self) -> Iterator[tuple[int, Event]]:
        """(partition, event) in emission order; per partition this is the Kafka order."""
        if self._used:
            raise RuntimeError("a Simulation is single-use: create a new one to iterate again")
        self._used = True
        if self._broadcast_ddl:
            yield from self._run()
        else:
            # TiCDC puts canal-json's DDL on partition 0 only. The model still broadcasts (so one seed
            # is one upstream, with the same retries and restarts, whatever the protocol) and the
            # copies on the other partitions are left out here.
            for p, ev in self._run():
                if p == 0 or not isinstance(ev, DdlEvent):
                    yield p, ev
        self._expected = self._final_state()

    def records(self) -> Iterator[SimMessage]:
        """Encoded Kafka records: rows batched per partition (up to ``max_batch_size``), every
        DDL and resolved event a message of its own, as TiCDC writes them."""
        cfg = self.config
        pending: list[list[RowChange]] = [[] for _ in range(cfg.partitions)]
        batch = cfg.max_batch_size
        encode_rows, encode_event = self._encoders()
        for p, ev in self.events():
            if isinstance(ev, RowChange):
                rows = pending[p]
                rows.append(ev)
                if len(rows) >= batch:
                    yield from self._emit(p, encode_rows(rows))
                    rows.clear()
                continue
            if pending[p]:
                yield from self._emit(p, encode_rows(pending[p]))
                pending[p].clear()
            yield from self._emit(p, [encode_event(ev)])
        for p, rows in enumerate(pending):
            if rows:
                yield from self._emit(p, encode_rows(rows))

    def _encoders(self) -> tuple[Callable[[list[RowChange]], list[Message]], Callable[[Event], Message]]:
        """The codec's encoders; with large-message handling, as TiCDC's encoder for the protocol
        does it (codec/large.py): values compressed, oversized rows written to claim-check files
        and sent as references."""
        cfg = self.config
        codec = codec_for(cfg.protocol)
        store = Path(cfg.claim_check_dir) if cfg.claim_check_dir else None
        write: ClaimCheckWriter | None = None
        if store is not None:
            names = random.Random(cfg.seed)  # the files' uuids: not the stream's random, which stays as it is
            store.mkdir(parents=True, exist_ok=True)

            def write(key: bytes | None, value: bytes) -> str:
                name = f"{uuid.UUID(int=names.getrandbits(128), version=4)}.json"
                (store / name).write_bytes(claim_check_envelope(key, value))
                self.claim_check_files += 1
                return f"{store.resolve().as_uri()}/{name}"

        def rows_(rows: list[RowChange]) -> list[Message]:
            return codec.encode_rows(rows, max_batch_size=cfg.max_batch_size, max_message_bytes=cfg.max_message_bytes,
                                     compression=cfg.compression, claim_check=write)

        def event(ev: Event) -> Message:
            return codec.encode_event(ev, compression=cfg.compression)  # type: ignore[arg-type]

        return rows_, event

    def messages(self) -> Iterator[tuple[int, bytes | None, bytes]]:
        """(partition, key, value) of every Kafka record (``records()`` without timestamps)."""
        for m in self.records():
            yield m.partition, m.key, m.value

    # -- stream ---------------------------------------------------------------------------------
    def _emit(self, p: int, encoded: list[Message]) -> Iterator[SimMessage]:
        for key, value in encoded:
            self.stats.messages[p] += 1
            yield SimMessage(p, key, value, self._ms)

    def _tick(self) -> int:
        """The next commit ts: physical ms advances 0-5 ms, the logical part counts within one ms."""
        step = self._rnd.choice((0, 1, 1, 2, 3, 5))
        if step:
            self._ms += step
            self._logical = 0
        else:
            self._logical += 1
        self.ts = (self._ms << 18) | self._logical
        return self.ts

    def _plan(self) -> list[tuple[int, str, int]]:
        n = len(self._tables)
        plan: list[tuple[int, str, int]] = []
        for frac, kind, target in DDL_PLAN:
            if kind not in self.ddl_kinds or (kind == "create_table" and n < 2):
                continue
            idx = n - 1 if target < 0 else target % n
            plan.append((int(frac * self.config.events), kind, idx))
            if kind == "drop_table" and self.config.recreate_dropped:
                plan.append((int(0.8 * self.config.events), "recreate_table", idx))
        return sorted(plan, key=lambda x: x[0])

    def _run(self) -> Iterator[tuple[int, Event]]:
        cfg, rnd = self.config, self._rnd
        plan = deque(self._plan())
        late = {idx for _, kind, idx in plan if kind == "create_table"}
        if "create_schema" in self.ddl_kinds:
            for schema in dict.fromkeys(t.schema for t in self._tables):
                yield from self._ddl_event(schema, "", 1, f"CREATE DATABASE {quote(schema)}")
        for i, table in enumerate(self._tables):
            if i not in late:
                yield from self._create(table)
        restart_at = cfg.events // 2 if cfg.events >= 100 else -1
        while self.stats.row_changes < cfg.events:
            # With no live table (the only one dropped) no transaction can move the stream on: the
            # plan's next DDL (its re-creation) comes now instead of waiting for rows that never come.
            while plan and (plan[0][0] <= self.stats.row_changes or not any(t.live for t in self._tables)):
                _, kind, idx = plan.popleft()
                yield from self._apply_ddl(kind, self._tables[idx])
            if not any(t.live for t in self._tables):
                break  # nothing left to write to
            yield from self._transaction()
            for p in range(cfg.partitions):
                if rnd.random() * cfg.resolved_every < 1:
                    yield from self._resolve(p)
            if restart_at >= 0 and self.stats.row_changes >= restart_at:
                restart_at = -1
                yield from self._restart()
            elif rnd.random() < cfg.restart_rate:
                yield from self._restart()
            elif rnd.random() < cfg.retry_rate:
                yield from self._retry()
        while plan:
            _, kind, idx = plan.popleft()
            yield from self._apply_ddl(kind, self._tables[idx])
        self._tick()
        for p in range(cfg.partitions):
            yield from self._resolve(p)

    def _send(self, p: int, ev: Event) -> Iterator[tuple[int, Event]]:
        self._history[p].append(ev)
        yield p, ev

    def _resolve(self, p: int) -> Iterator[tuple[int, Event]]:
        self._resolved[p] = self.ts
        self.stats.resolved += 1
        yield p, Resolved(self.ts)
        checkpoint = min(self._resolved)
        if checkpoint > self._checkpoint:
            self._checkpoint = checkpoint
            for hist in self._history:
                while hist and _ts(hist[0]) <= checkpoint:
                    hist.popleft()

    def _retry(self) -> Iterator[tuple[int, Event]]:
        """A producer retry: the last few events of one partition arrive a second time."""
        p = self._rnd.randrange(self.config.partitions)
        hist = self._history[p]
        if not hist:
            return
        k = self._rnd.randint(1, min(4, len(hist)))
        self.stats.retries += 1
        for ev in list(hist)[-k:]:
            self.stats.replayed_events += 1
            yield p, ev

    def _restart(self) -> Iterator[tuple[int, Event]]:
        """A changefeed restart: every partition re-sends all it sent after the checkpoint."""
        total = sum(len(h) for h in self._history)
        if total > 20_000:  # bound the blow-up of a pathological case
            yield from self._retry()
            return
        self.stats.restarts += 1
        for p, hist in enumerate(self._history):
            for ev in list(hist):
                self.stats.replayed_events += 1
                yield p, ev

    # -- DDL ------------------------------------------------------------------------------------
    def _ddl_event(self, schema: str, table: str, code: int, query: str) -> Iterator[tuple[int, Event]]:
        ddl = DdlEvent(self._tick(), schema, table, code, query)
        self.stats.ddl += 1
        for p in range(self.config.partitions):
            yield from self._send(p, ddl)

    def _create(self, table: ModelTable) -> Iterator[tuple[int, Event]]:
        table.live = True
        yield from self._ddl_event(table.schema, table.name, 3, table.create_sql())

    def _apply_ddl(self, kind: str, table: ModelTable) -> Iterator[tuple[int, Event]]:
        tpl = table.template
        if kind in ("create_table", "recreate_table"):
            if not table.live:
                table.clear()
                yield from self._create(table)
            return
        if not table.live:
            return
        if kind == "add_column":
            col = tpl.add_column
            if table.column_def(col.name) is None:
                yield from self._ddl_event(table.schema, table.name, 5,
                                           f"ALTER TABLE {table.qualified} ADD COLUMN {col.definition()}")
                table.set_columns([*table.columns, col])
                for row in table.rows.values():
                    row[col.name] = None
        elif kind == "modify_column":
            name, sql = tpl.modify
            old = table.column_def(name)
            if old is not None:
                new = column(name, sql, old.nullable)
                yield from self._ddl_event(table.schema, table.name, 12,
                                           f"ALTER TABLE {table.qualified} MODIFY COLUMN {new.definition()}")
                table.set_columns([new if c.name == name else c for c in table.columns])
        elif kind == "truncate":
            yield from self._ddl_event(table.schema, table.name, 11, f"TRUNCATE TABLE {table.qualified}")
            for key in table.rows:
                table.freed.append(key)
            table.clear()
        elif kind == "drop_column":
            name = tpl.drop_column
            if table.column_def(name) is not None and name not in table.key:
                yield from self._ddl_event(table.schema, table.name, 6,
                                           f"ALTER TABLE {table.qualified} DROP COLUMN {quote(name)}")
                table.set_columns([c for c in table.columns if c.name != name])
                for row in table.rows.values():
                    row.pop(name, None)
        elif kind == "drop_table":
            yield from self._ddl_event(table.schema, table.name, 4, f"DROP TABLE {table.qualified}")
            table.live = False
        elif kind == "rename_table":
            new_name = table.name + "_v2"
            old_qualified = table.qualified
            table.name = new_name
            yield from self._ddl_event(table.schema, new_name, 14,
                                       f"RENAME TABLE {old_qualified} TO {table.qualified}")
        else:  # pragma: no cover - the plan only holds known kinds
            raise AssertionError(kind)

    # -- rows -----------------------------------------------------------------------------------
    def _txn_size(self) -> int:
        r = self._rnd.random()
        if r < 0.4:
            n = 1
        elif r < 0.85:
            n = self._rnd.randint(2, 5)
        elif r < 0.98:
            n = self._rnd.randint(6, 20)
        else:
            n = self._rnd.randint(21, 60)
        return max(1, min(n, self.config.max_txn_rows, self.config.events - self.stats.row_changes))

    def _transaction(self) -> Iterator[tuple[int, Event]]:
        live = [t for t in self._tables if t.live]
        if not live:
            self._tick()
            return
        rnd = self._rnd
        ts = self._tick()
        weights = [t.template.weight for t in live]
        if self.config.hot_share and len(live) > 1 and live[0] is self._tables[0]:
            weights[0] = sum(weights[1:]) * self.config.hot_share / (1.0 - self.config.hot_share)
        touched: set[tuple[str, tuple[Value, ...]]] = set()
        out: list[tuple[int, RowChange]] = []
        # Live rows per table: grows with the stream, capped so a million events stay in bounded memory.
        target = max(20, min(20_000, self.config.events // (len(self._tables) * 4)))
        for _ in range(self._txn_size()):
            table = rnd.choices(live, weights)[0]
            size = len(table.keys)
            p_insert = 1.0 if size == 0 else 0.6 if size < target // 2 else 0.35 if size < target else 0.12
            r = rnd.random()
            if r < p_insert or table.insert_only:
                self._insert(table, ts, touched, out)
                continue
            key = table.keys.items[rnd.randrange(size)]
            if (table.name, key) in touched:
                continue  # TiDB sends one change per row per transaction
            r = rnd.random()
            if r < 0.7:
                self._update(table, ts, key, touched, out)
            elif r < 0.92:
                self._delete(table, ts, key, touched, out)
            else:
                self._change_key(table, ts, key, touched, out)
        self.stats.transactions += 1
        for p, ev in out:
            yield from self._send(p, ev)

    def _new_key(self, table: ModelTable, touched: set[tuple[str, tuple[Value, ...]]]) -> tuple[Value, ...]:
        rnd = self._rnd
        if table.freed and rnd.random() < 0.1:
            key = table.freed.popleft()  # re-insert a key deleted earlier
            if key not in table.rows and (table.name, key) not in touched:
                return key
        while True:
            table.counter += 1
            key = table.template.key_fn(rnd, table.counter)
            if key not in table.rows and (table.name, key) not in touched:
                return key

    def _route(self, table: ModelTable, key: tuple[Value, ...]) -> int:
        return _route(table.schema, table.name, key, self.config.partitions, self.config.dispatcher)

    def _count(self, attr: str) -> None:
        setattr(self.stats, attr, getattr(self.stats, attr) + 1)
        self.stats.row_changes += 1

    def _insert(self, table: ModelTable, ts: int, touched: set[tuple[str, tuple[Value, ...]]],
                out: list[tuple[int, RowChange]], key: tuple[Value, ...] | None = None,
                base: Mapping[str, Value] | None = None) -> None:
        key = key if key is not None else self._new_key(table, touched)
        rnd = self._rnd
        row = {c.name: (base[c.name] if base is not None and c.name in base else gen_value(c, rnd))
               for c in table.columns}
        row.update(zip(table.key, key, strict=True))
        table.rows[key] = row
        touched.add((table.name, key))
        if table.insert_only:  # never updated or deleted: memory holds its rows alone
            new = tuple(Column(n, code, flags, row[n]) for n, code, flags in table.shape)
        else:
            table.keys.add(key)
            new = table.image(key, row)
        out.append((self._route(table, key), RowChange(ts, table.schema, table.name, Op.INSERT, new)))
        self._count("inserts")

    def _update(self, table: ModelTable, ts: int, key: tuple[Value, ...],
                touched: set[tuple[str, tuple[Value, ...]]], out: list[tuple[int, RowChange]]) -> None:
        rnd = self._rnd
        old_row = table.rows[key]
        old = table.image(key, old_row)
        row = dict(old_row)
        candidates = [c for c in table.columns if c.name not in table.key]
        changed = {c.name for c in rnd.sample(candidates, min(len(candidates), rnd.randint(1, 3)))}
        for c in table.columns:
            if c.name in changed:
                row[c.name] = gen_value(c, rnd)
        new = tuple(Column(n, code, flags, row[n]) if n in changed else prev
                    for (n, code, flags), prev in zip(table.shape, old, strict=True))
        table.rows[key] = row
        table.images[key] = new
        touched.add((table.name, key))
        out.append((self._route(table, key), RowChange(ts, table.schema, table.name, Op.UPDATE, new, old)))
        self._count("updates")

    def _delete(self, table: ModelTable, ts: int, key: tuple[Value, ...],
                touched: set[tuple[str, tuple[Value, ...]]], out: list[tuple[int, RowChange]]) -> None:
        old = table.image(key, table.rows[key])
        del table.rows[key]
        del table.images[key]
        table.keys.remove(key)
        table.freed.append(key)
        touched.add((table.name, key))
        out.append((self._route(table, key), RowChange(ts, table.schema, table.name, Op.DELETE, (), old)))
        self._count("deletes")

    def _change_key(self, table: ModelTable, ts: int, key: tuple[Value, ...],
                    touched: set[tuple[str, tuple[Value, ...]]], out: list[tuple[int, RowChange]]) -> None:
        """UPDATE ... SET pk = new: TiCDC sends a delete of the old key and an insert of the new one."""
        old = dict(table.rows[key])
        new_key = self._new_key(table, touched)
        self._delete(table, ts, key, touched, out)
        self._insert(table, ts, touched, out, key=new_key, base=old)
        # One upstream change, two row events (both count as row changes).
        self.stats.key_changes += 1
        self.stats.deletes -= 1
        self.stats.inserts -= 1

    # -- result ---------------------------------------------------------------------------------
    def state_now(self) -> ExpectedState:
        """The tables as of the events handed out so far: read when `events()` has just yielded a
        resolved event at ts R, the upstream state at R (events come in commit-ts order; re-sent
        ones change nothing), its `watermark` R."""
        return self._final_state()

    def _final_state(self) -> ExpectedState:
        tables: dict[str, list[dict[str, Any]]] = {}
        schemas: dict[str, dict[str, Any]] = {}
        for table in self._tables:
            if not table.live:
                continue
            name = f"{table.schema}.{table.name}"
            rows = [{c.name: table_value(c, row[c.name]) for c in table.columns}
                    for _, row in sorted(table.rows.items(), key=lambda kv: _sort_key(kv[0]))]
            tables[name] = rows
            schemas[name] = {"key": list(table.key), "columns": [[c.name, c.sql] for c in table.columns]}
        cfg = self.config
        generator: dict[str, Any] = {
            "protocol": cfg.protocol, "seed": cfg.seed, "events": cfg.events, "partitions": cfg.partitions,
            "tables": cfg.tables, "ddl": list(self.ddl_kinds), "start_time": cfg.start_time.isoformat(),
            "max_batch_size": cfg.max_batch_size}
        if cfg.insert_only:
            generator["insert_only"] = cfg.insert_only
        if cfg.dispatcher != "index-value" or cfg.hot_share:
            generator["dispatcher"], generator["hot_share"] = cfg.dispatcher, cfg.hot_share
        return ExpectedState(tables, schemas, self.ts, generator, self.stats.to_json())


def _ts(ev: Event) -> int:
    return ev.ts if isinstance(ev, Resolved) else ev.commit_ts


def _sort_key(key: tuple[Value, ...]) -> tuple[tuple[int, Any], ...]:
    return tuple((0, v) if isinstance(v, int) else (1, str(v)) for v in key)


def generate(**kwargs: Any) -> Simulation:
    """``Simulation(SimConfig(**kwargs))``: iterate ``.messages()`` (partition, key, value), then
    read ``.expected``."""
    return Simulation(SimConfig(**kwargs))


def expected_state(config: SimConfig) -> ExpectedState:
    """The expected final state alone (generates the events without encoding them)."""
    sim = Simulation(config)
    for _ in sim.events():
        pass
    return sim.expected
