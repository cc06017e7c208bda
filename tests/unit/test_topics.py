"""Many topics in one replicator, without a broker: the window over (topic, partition), quiet topics
of dropped tables, the simulated topic-per-table changefeed replicated in memory, and the
--topic / --from-offsets forms."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.cli import build_parser
from replicator.cli.common import settings_from
from replicator.codec import codec_for
from replicator.codec.values import DecodeOptions
from replicator.delta.ddl.scope import ddl_scope
from replicator.engine.window import Windower, tables_gone
from replicator.errors import ConfigError
from replicator.events import TP, Column, DdlEvent, Flag, Op, Position, Resolved, RowChange, TypeCode
from replicator.progress import Progress
from replicator.sim.simcheck import compare_tables
from replicator.sim.simulate import SimConfig, Simulation
from replicator.sim.topics import TopicDispatch, topic_for
from replicator.sources.kafka import KafkaSettings, parse_offsets
from replicator.warehouse import State
from tests.unit.test_simulate import MemoryWarehouse


def ins(ts: int, table: str, key: int) -> RowChange:
    return RowChange(ts, "s", table, Op.INSERT, (Column("id", TypeCode.LONG, Flag.HANDLE_KEY, key),))


def drop(ts: int, table: str) -> DdlEvent:
    return DdlEvent(ts, "s", table, 4, f"DROP TABLE `s`.`{table}`")


def create(ts: int, table: str) -> DdlEvent:
    return DdlEvent(ts, "s", table, 3, f"CREATE TABLE `s`.`{table}` (`id` BIGINT PRIMARY KEY)")


# -- the window over topics ------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(wms=st.dictionaries(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2)),
                           st.integers(1, 1000), min_size=1),
       quiet=st.sets(st.sampled_from(["a", "b", "c"])))
def test_the_window_is_the_minimum_over_the_partitions_of_the_active_topics(
        wms: dict[tuple[str, int], int], quiet: set[str]) -> None:
    parts = [TP(t, p) for t, p in wms]
    w = Windower(parts, Progress(quiet_topics={t: 0 for t in quiet}))
    for tp in parts:
        w.offer(tp, 0, [Resolved(wms[tp])])
    active = [wm for tp, wm in zip(parts, [wms[tp] for tp in parts], strict=True) if tp.topic not in quiet]
    # every topic quiet: none is waited for less than another, they all count again
    assert w.watermark == (min(active) if active else min(wms.values()))
    assert w.excluded_topics() == (sorted({tp.topic for tp in parts} & quiet) if active else [])


def test_a_partition_of_an_active_topic_without_a_resolved_event_holds_the_window_at_zero() -> None:
    w = Windower([TP("a", 0), TP("a", 1), TP("d", 0)])
    w.offer(TP("a", 0), 0, [Resolved(10)])
    w.offer(TP("d", 0), 0, [Resolved(10)])
    assert w.watermark == 0
    w.add_partition(TP("new", 0))  # a topic found mid-run joins before the window moves past it
    w.offer(TP("a", 1), 0, [Resolved(10)])
    assert w.watermark == 0
    w.offer(TP("new", 0), 0, [Resolved(12)])
    assert w.watermark == 10


def test_a_dropped_tables_topic_goes_quiet_and_rejoins_with_a_later_row_or_ddl() -> None:
    """TiCDC stops sending watermarks to the topic of a dropped table: after its DROP it must not hold
    the window back; a resolved event alone does not wake it, a later CREATE (or row) does."""
    w = Windower([TP("s_x", 0), TP("s_x", 1), TP("s_y", 0), TP("default", 0)], scope_of=ddl_scope)
    w.offer(TP("s_x", 0), 0, [create(5, "x"), ins(6, "x", 1), Resolved(8)])
    w.offer(TP("s_x", 1), 0, [create(5, "x"), Resolved(8)])
    w.offer(TP("s_y", 0), 0, [create(5, "y"), ins(7, "y", 1), Resolved(20)])
    w.offer(TP("default", 0), 0, [Resolved(20)])
    assert w.watermark == 8
    w.offer(TP("s_x", 0), 1, [drop(9, "x")])  # the first copy: the topic is quiet from ts 9
    assert w.quiet_topics == {"s_x": 9} and w.excluded_topics() == ["s_x"]
    assert w.watermark == 20
    step = w.next_step()
    assert step is not None and step.hi == 20 and [d.commit_ts for d in step.ddls] == [5, 5, 9]
    w.commit(step)
    w.offer(TP("s_x", 1), 1, [drop(9, "x"), Resolved(25)])  # its other copy, a late watermark: still quiet
    assert w.quiet_topics == {"s_x": 9}
    w.offer(TP("s_x", 0), 2, [create(30, "x")])  # re-created: waited for again, its watermark 9 < 20
    assert w.quiet_topics == {} and w.watermark == 8
    # the quiet set is part of the persisted progress: a restart after the DROP does not wait for it
    w.offer(TP("s_y", 0), 1, [drop(40, "y")])
    restored = State.model_validate_json(State(progress=w.progress).model_dump_json(by_alias=True)).progress
    assert restored.quiet_topics == {"s_y": 40}


def test_a_topic_shared_by_tables_stays_active_until_its_last_table_is_gone() -> None:
    w = Windower([TP("shared", 0), TP("default", 0)])
    w.offer(TP("shared", 0), 0, [ins(5, "a", 1), ins(5, "b", 1), drop(6, "a")])
    assert w.quiet_topics == {}
    w.offer(TP("shared", 0), 1, [DdlEvent(7, "s", "b2", 14, "RENAME TABLE `s`.`b` TO `s`.`b2`")])
    assert w.quiet_topics == {"shared": 7}
    w.offer(TP("default", 0), 0, [DdlEvent(8, "s", "", 2, "DROP DATABASE `s`")])
    assert w.quiet_topics == {"shared": 7}  # the default topic carries no table: it never goes quiet


def test_tables_gone_by_ddl() -> None:
    known = {("s", "a"), ("s", "b"), ("t", "c")}
    assert tables_gone(drop(1, "a"), known) == {("s", "a")}
    assert tables_gone(DdlEvent(1, "s", "", 2, "DROP DATABASE s"), known) == {("s", "a"), ("s", "b")}
    assert tables_gone(DdlEvent(1, "s", "z", 14, "RENAME TABLE a TO z, t.c TO t.d"), known) == {("s", "a"), ("t", "c")}
    assert tables_gone(DdlEvent(1, "s", "a", 11, "TRUNCATE TABLE a"), known) == set()


# -- the simulated topic-per-table changefeed ------------------------------------------------------

def _dispatch(protocol: str, seed: int, events: int = 900) -> TopicDispatch:
    sim = Simulation(SimConfig(protocol=protocol, seed=seed, events=events, partitions=2, tables=4,  # type: ignore[arg-type]
                               ddl="auto", recreate_dropped=False))
    return TopicDispatch(sim, prefix="cdc_")


def test_the_simulator_dispatches_a_topic_per_table_and_broadcasts_watermarks_to_active_topics() -> None:
    d = _dispatch("open", 3)
    by_topic: dict[str, list[tuple[int, object]]] = {}
    for topic, p, ev in d.events():
        by_topic.setdefault(topic, []).append((p, ev))
    assert d.default_topic in by_topic and len(by_topic) >= 6  # 4 tables, a renamed one, the default topic
    assert all(t == d.default_topic or t == topic_for("cdc_", ev.schema, ev.table)
               for t, evs in by_topic.items() for _, ev in evs if isinstance(ev, RowChange))
    # schema DDL on the default topic only; every other DDL on its table's topic
    for topic, evs in by_topic.items():
        for _, ev in evs:
            if isinstance(ev, DdlEvent):
                assert (ev.ddl_type in (1, 2)) == (topic == d.default_topic)
    final = d.sim.expected.watermark
    quiet = [t for t, evs in by_topic.items() if max(ev.ts for _, ev in evs if isinstance(ev, Resolved)) < final]
    # the dropped table's topic and the renamed table's old topic got no more watermarks
    assert len(quiet) == 2, quiet
    assert all(any(isinstance(ev, DdlEvent) and ev.ddl_type in (4, 14) for _, ev in by_topic[t]) for t in quiet)


def replicate_topics(d: TopicDispatch, seed: int) -> tuple[MemoryWarehouse, Windower]:
    """Read the topics as the engine does: partitions in a random interleaving (each in its order),
    a topic read once it exists, every step only once each quiet topic was read to its end."""
    records: dict[TP, list[tuple[bytes | None, bytes]]] = {}
    born: dict[str, int] = {}  # the topic's first record's index in the whole stream
    for i, (topic, m) in enumerate(d.records()):
        born.setdefault(topic, i)
        records.setdefault(TP(topic, m.partition), []).append((m.key, m.value))
    for topic in born:
        for p in range(d.partitions):
            records.setdefault(TP(topic, p), [])
    codec = codec_for(d.sim.config.protocol)
    windower = Windower([], scope_of=ddl_scope)
    wh = MemoryWarehouse()
    nxt = dict.fromkeys(records, 0)
    rnd = random.Random(seed)
    opts = DecodeOptions()
    order = sorted(born, key=born.__getitem__)
    known: set[str] = set()
    clock = 0

    def discover() -> None:
        for topic in order:
            if topic not in known and born[topic] <= clock:
                known.add(topic)
                for p in range(d.partitions):
                    windower.add_partition(TP(topic, p))

    def drain() -> None:
        discover()  # metadata refreshed before a step
        if any(nxt[tp] < len(records[tp]) for tp in records if tp.topic in windower.excluded_topics()):
            return  # a quiet topic has unread records: read them first
        while (step := windower.next_step()) is not None:
            wh.apply(step)
            windower.commit(step)

    while any(nxt[tp] < len(rs) for tp, rs in records.items() if tp.topic in known) or len(known) < len(born):
        clock += rnd.randint(1, 40)
        discover()
        live = [tp for tp in records if tp.topic in known and nxt[tp] < len(records[tp])]
        if not live:
            continue
        tp = rnd.choice(live)
        for _ in range(rnd.randint(1, 8)):
            if nxt[tp] >= len(records[tp]):
                break
            key, value = records[tp][nxt[tp]]
            windower.offer(tp, nxt[tp], codec.decode(key, value, options=opts,
                                                     position=Position(tp.topic, tp.partition, nxt[tp])))
            nxt[tp] += 1
        if rnd.random() < 0.2:
            drain()
    clock = 1 << 30
    drain()
    return wh, windower


@pytest.mark.parametrize("protocol", ["open", "canal-json"])
@pytest.mark.parametrize("seed", [1, 7])
def test_a_topic_per_table_changefeed_replicates_exactly_in_memory(protocol: str, seed: int) -> None:
    d = _dispatch(protocol, seed)
    wh, windower = replicate_topics(d, seed)
    # the dropped table's topic and the renamed one's old topic are quiet: the window reached the end
    assert windower.applied_ts == d.sim.expected.watermark
    assert len(windower.quiet_topics) == 2
    assert compare_tables(d.sim.expected, wh.tables()) == []


# -- flags -----------------------------------------------------------------------------------------

def test_from_offsets_names_topics_and_keeps_the_bare_form_for_one_topic() -> None:
    assert parse_offsets("0=5,1=7", ["t"]) == {TP("t", 0): 5, TP("t", 1): 7}
    assert parse_offsets("a:0=5, b.x:1=7", ["a", "b.x"]) == {TP("a", 0): 5, TP("b.x", 1): 7}
    with pytest.raises(ConfigError, match="name the topic"):
        parse_offsets("0=5", ["a", "b"])
    with pytest.raises(ConfigError, match="expects"):
        parse_offsets("a:x=5", ["a"])
    with pytest.raises(ConfigError, match="do not have"):
        parse_offsets("a:3=5", ["a"], [TP("a", 0)])


@pytest.mark.usefixtures("no_replicator_env")
def test_topics_from_flags_environment_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(argv: list[str]) -> list[str] | None:
        return settings_from(build_parser().parse_args(argv)).topic

    assert parse(["run", "--topic", "a", "--topic", "b"]) == ["a", "b"]
    monkeypatch.setenv("REPLICATOR_TOPIC", "a, b,c")
    assert parse(["run"]) == ["a", "b", "c"]
    monkeypatch.delenv("REPLICATOR_TOPIC")
    cfg = tmp_path / "r.toml"
    cfg.write_text('topic = ["x", "y"]\ntopic-pattern = "cdc_.*"\n')
    s = settings_from(build_parser().parse_args(["run", "--config", str(cfg)]))
    assert s.topic == ["x", "y"] and s.topic_pattern == "cdc_.*"


def test_a_pattern_matches_whole_topic_names() -> None:
    k = KafkaSettings("b:1", topic_pattern=r"cdc_.*")
    assert k.matches("cdc_shop_orders") and not k.matches("xcdc_a") and not k.matches("__consumer_offsets")
    assert k.source_name == "~cdc_.*" and k.single_topic is None
    assert KafkaSettings("b:1", topics=("b", "a")).source_name == "a,b"
    assert KafkaSettings("b:1", topic="t").single_topic == "t"
