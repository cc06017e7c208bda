"""`--shard I/N` (issue 41): parsing, ownership by identity across renames, the shard filter at
decode and at the step, the per-shard layout and the refusals of a mismatched layout (pure, no Spark)."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.cli.settings import load_settings
from replicator.engine.filtering import FilterCounts
from replicator.engine.sharding import ShardFilter
from replicator.engine.window import Step
from replicator.errors import ConfigError, StateError
from replicator.events import TP, Column, DdlEvent, Op, Resolved, RowChange
from replicator.shards import Identities, ShardSpec, table_shard
from replicator.warehouse import State, Warehouse

P0, P1 = TP("t", 0), TP("t", 1)


def row(table: str, ts: int, schema: str = "shop") -> RowChange:
    return RowChange(ts, schema, table, Op.INSERT, (Column("id", 8, 0x0A, 1),))


def rename(query: str, ts: int) -> DdlEvent:
    return DdlEvent(ts, "shop", "", 14, query)


# -- parsing --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, index, count", [("0/1", 0, 1), ("2/3", 2, 3), (" 1 / 2 ", 1, 2)])
def test_shard_parses(text: str, index: int, count: int) -> None:
    spec = ShardSpec.parse(text)
    assert (spec.index, spec.count, spec.label, str(spec)) == (index, count, f"{index}-of-{count}", f"{index}/{count}")


@pytest.mark.parametrize("text", ["3/3", "-1/2", "a/b", "0/0", "1", "", "1/2/3", "0/-1"])
def test_malformed_shard_says_what_to_write(text: str) -> None:
    with pytest.raises(ConfigError, match=r"give --shard I/N with 0 <= I < N") as exc:
        ShardSpec.parse(text)
    assert exc.value.exit_code == 2


def test_shard_setting_from_flag_environment_and_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings({"shard": "1/3"}).shard == ShardSpec(1, 3)
    monkeypatch.setenv("REPLICATOR_SHARD", "0/2")
    assert load_settings({}).shard == ShardSpec(0, 2)
    monkeypatch.delenv("REPLICATOR_SHARD")
    config = tmp_path / "r.toml"
    config.write_text('shard = "2/4"\n')
    assert load_settings({}, config=str(config)).shard == ShardSpec(2, 4)
    with pytest.raises(ConfigError, match=r"--shard: give --shard I/N .*'3/3'"):
        load_settings({"shard": "3/3"})
    monkeypatch.setenv("REPLICATOR_SHARD", "a/b")
    with pytest.raises(ConfigError, match=r"REPLICATOR_SHARD: give --shard I/N"):
        load_settings({})


def test_default_consumer_group_per_shard() -> None:
    s = load_settings({"shard": "1/3"})
    assert s.group_id_for("tidb", shard=s.shard) == "replicator-tidb-shard-1-of-3"
    assert load_settings({}).group_id_for("tidb", shard=None) == "replicator-tidb"
    assert load_settings({"group_id": "mine", "shard": "1/3"}).group_id_for("tidb", shard=ShardSpec(1, 3)) == "mine"


# -- ownership ------------------------------------------------------------------------------------

names = st.tuples(st.sampled_from(["shop", "crm", "Shop"]), st.text("abcxyz_", min_size=1, max_size=6))


@given(names, st.integers(1, 9))
def test_every_table_has_exactly_one_owner(name: tuple[str, str], count: int) -> None:
    owners = [i for i in range(count) if ShardSpec(i, count).owns(name)]
    assert owners == [table_shard(name, count)]
    assert table_shard((name[0].upper(), name[1].upper()), count) == owners[0]  # names ignore case


def test_the_hash_is_stable() -> None:
    """crc32, not hash(): every process, machine and Python version agrees."""
    assert [table_shard(("shop", t), 3) for t in ("customers", "orders", "orders_v2", "attachments")] == [1, 1, 1, 0]


@given(st.lists(st.text("abcde", min_size=1, max_size=3), min_size=2, max_size=8, unique=True), st.integers(2, 5))
def test_a_rename_chain_keeps_the_owner(chain: list[str], count: int) -> None:
    ids = Identities()
    for i, (old, new) in enumerate(pairwise(chain)):
        ids.rename(10 * (i + 1), [(("shop", old), ("shop", new))])
    end = 10 * len(chain)
    assert ids.identity("shop", chain[-1], end) == ("shop", chain[0])
    # rows read late (another partition, a replay) get the identity their ts had
    for i, name in enumerate(chain):
        assert ids.identity("shop", name, 10 * i + 5) == ("shop", chain[0])
    # the same renames read in any order, twice: the same identities (every shard agrees)
    again = Identities()
    pairs = [(10 * (i + 1), [(("shop", o), ("shop", n))]) for i, (o, n) in enumerate(pairwise(chain))]
    for ts, p in [*reversed(pairs), *pairs]:
        again.rename(ts, p)
    assert again.to_json() == ids.to_json()
    assert all(again.identity("shop", n, t) == ids.identity("shop", n, t) for n in chain for t in range(0, end + 20, 5))
    assert Identities.from_json(json.loads(json.dumps(ids.to_json()))).identity("shop", chain[-1], end) == \
        ("shop", chain[0])


def test_drop_and_create_keeps_the_owner_and_a_freed_name_is_its_own() -> None:
    ids = Identities()
    ids.rename(10, [(("shop", "orders"), ("shop", "orders_v2"))])
    # DROP TABLE orders_v2 at 20 and CREATE TABLE orders_v2 at 30 change no identity
    assert ids.identity("shop", "orders_v2", 35) == ("shop", "orders")
    # a table created later under the old name is a new table: its identity is its name
    ids.rename(40, [(("shop", "other"), ("shop", "x"))])
    assert ids.identity("shop", "orders", 50) == ("shop", "orders")
    assert ids.identity("SHOP", "Orders_V2", 50) == ("shop", "orders")


def test_rename_tables_swap_follows_each_table() -> None:
    ids = Identities()
    pairs = [(("shop", "a"), ("shop", "tmp")), (("shop", "b"), ("shop", "a")), (("shop", "tmp"), ("shop", "b"))]
    assert ids.pair_identities(10, pairs) == [("shop", "a"), ("shop", "b"), ("shop", "a")]
    ids.rename(10, pairs)
    assert ids.identity("shop", "a", 11) == ("shop", "b")
    assert ids.identity("shop", "b", 11) == ("shop", "a")
    assert ids.identity("shop", "tmp", 11) == ("shop", "tmp")
    assert ids.identity("shop", "a", 9) == ("shop", "a")
    assert not ids.rename(10, pairs)  # a broadcast copy: known


# -- the shard filter -------------------------------------------------------------------------------

def _two_shards(mode: str = "partition") -> tuple[ShardFilter, ShardFilter]:
    # shop.orders hashes to 0 of 2, shop.orders_v2 and shop.customers to 1
    assert (table_shard(("shop", "orders"), 2), table_shard(("shop", "orders_v2"), 2)) == (0, 1)
    return (ShardFilter(ShardSpec(0, 2), Identities(), mode), ShardFilter(ShardSpec(1, 2), Identities(), mode))  # type: ignore[arg-type]


def test_rows_and_ddls_go_to_their_owner_across_a_rename() -> None:
    s0, s1 = _two_shards()
    ren = rename("RENAME TABLE shop.orders TO shop.orders_v2", 20)
    events = [row("orders", 10), row("customers", 11), ren, row("orders_v2", 30),
              DdlEvent(40, "shop", "orders_v2", 5, "ALTER TABLE shop.orders_v2 ADD COLUMN c INT"),
              DdlEvent(50, "shop", "", 1, "CREATE DATABASE shop2"), Resolved(60)]
    kept0, kept1 = s0.apply(events, P0), s1.apply(events, P0)
    assert kept0 == [events[0], ren, events[3], events[4], events[5], events[6]]
    assert kept1 == [events[1], events[5], events[6]]
    assert s1.counts.to_json() == {"rows": {"other_shard": 2}, "ddl": {"other_shard": 2}}
    assert s0.identities.to_json() == s1.identities.to_json() == [[20, [["shop", "orders", "shop", "orders_v2"]]]]
    # a row of the old name read late on another partition keeps its owner too
    assert s0.apply([row("orders", 15)], P1) != [] and s1.apply([row("orders", 15)], P1) == []


def test_a_rename_statement_is_cut_to_the_owners_pairs() -> None:
    s0, s1 = _two_shards()
    ren = rename("RENAME TABLE shop.orders TO shop.o2, shop.customers TO shop.c2", 20)
    (cut0,), (cut1,) = s0.apply([ren], P0), s1.apply([ren], P0)
    assert isinstance(cut0, DdlEvent) and cut0.query == "RENAME TABLE `shop`.`orders` TO `shop`.`o2`"
    assert isinstance(cut1, DdlEvent) and cut1.query == "RENAME TABLE `shop`.`customers` TO `shop`.`c2`"


def test_canal_rows_ahead_of_partition_zero_are_decided_at_the_step() -> None:
    """canal-json: DDLs on partition 0 only. A row on partition 1 newer than partition 0's last
    resolved ts may follow a rename not read yet: kept at decode, dropped at the step."""
    s0, s1 = _two_shards("partition0")
    late = row("orders_v2", 30)  # read before the rename at 20 on partition 0
    assert s0.apply([late], P1) == [late] and s1.apply([late], P1) == [late]
    ren = rename("RENAME TABLE shop.orders TO shop.orders_v2", 20)
    for s in (s0, s1):
        s.apply([ren, Resolved(35)], P0)
    step = Step(hi=35, rows={("shop", "orders_v2"): [late], ("shop", "customers"): [row("customers", 31)]})
    assert s0.step(step).rows == {("shop", "orders_v2"): [late]}
    assert s1.step(step).rows == {("shop", "customers"): step.rows[("shop", "customers")]}
    assert s1.counts.rows["other_shard"] == 1
    # once partition 0 has shown resolved 35, partition 1's rows up to 35 are decided at decode
    assert s1.apply([row("orders_v2", 33)], P1) == []


def test_step_mode_decides_ddls_at_the_step() -> None:
    s0, s1 = _two_shards("step")
    alter = DdlEvent(40, "shop", "orders", 5, "ALTER TABLE shop.orders ADD COLUMN c INT")
    assert s1.apply([alter, row("orders", 41)], P0) == [alter, row("orders", 41)]
    step = Step(hi=50, rows={("shop", "orders"): [row("orders", 41)]}, ddls=(alter,))
    assert s1.step(step).ddls == () and s1.step(step).rows == {}
    assert s0.step(step) is step


# -- layout ----------------------------------------------------------------------------------------

def test_unsharded_layout_is_unchanged_and_shards_have_their_own(tmp_path: Path) -> None:
    plain = Warehouse(tmp_path / "wh")
    assert (plain.state_path.path, plain.lease_path.path, plain.dead_letters_path.path) == (
        str(tmp_path / "wh/_replicator/state.json"), str(tmp_path / "wh/_replicator/lease.json"),
        str(tmp_path / "wh/_replicator/dead_letters"))
    plain.check_layout()
    assert not (tmp_path / "wh/_replicator/shards.json").exists()  # nothing written when unsharded
    assert "shard_renames" not in State().model_dump(by_alias=True)
    shard = Warehouse(tmp_path / "wh2", shard=ShardSpec(1, 3))
    base = tmp_path / "wh2/_replicator/shards/1-of-3"
    assert (shard.state_path.path, shard.lease_path.path, shard.dead_letters_path.path) == (
        str(base / "state.json"), str(base / "lease.json"), str(base / "dead_letters"))
    assert shard.steps.file == str(base / "windows.jsonl")


def test_layout_refusals(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    Warehouse(root, shard=ShardSpec(0, 3)).check_layout()
    assert json.loads((root / "_replicator/shards.json").read_text()) == {"shards": 3}
    Warehouse(root, shard=ShardSpec(2, 3)).check_layout()
    assert [w.state_path.path for w in Warehouse(root).shard_warehouses()] == [
        str(root / f"_replicator/shards/{i}-of-3/state.json") for i in range(3)]
    assert Warehouse(tmp_path / "fresh").shard_warehouses() == []
    with pytest.raises(ConfigError, match=r"is sharded 3 ways \(shards.json\): run each shard with --shard I/3") as e:
        Warehouse(root).check_layout()
    assert e.value.exit_code == 2 and "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"sharded 3 ways \(shards.json\), not 2"):
        Warehouse(root, shard=ShardSpec(0, 2)).check_layout()
    # an unsharded warehouse with progress refuses a sharded run; a fresh one becomes sharded
    plain = tmp_path / "plain"
    (plain / "_replicator").mkdir(parents=True)
    (plain / "_replicator/state.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"is unsharded \(its progress is _replicator/state.json\)"):
        Warehouse(plain, shard=ShardSpec(0, 2)).check_layout()
    assert not (plain / "_replicator/shards.json").exists()
    # readers read a sharded warehouse whole: no shard has progress yet, so no tables
    from replicator.views.listing import list_tables

    assert list_tables(root) == (str(root), [])
    with pytest.raises(ConfigError, match="is not a replicator warehouse"):
        list_tables(tmp_path / "fresh")


def test_state_keeps_the_renames(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh", shard=ShardSpec(0, 2))
    state = State(shard_renames=[[20, [["shop", "orders", "shop", "orders_v2"]]]])
    wh.save_state(state)
    again = wh.load_state()
    assert Identities.from_json(again.shard_renames).identity("shop", "orders_v2", 30) == ("shop", "orders")


def test_filter_counts_share_the_summary() -> None:
    counts = FilterCounts()
    f = ShardFilter(ShardSpec(1, 2), Identities(), "partition", counts)
    f.apply([row("orders", 5)], P0)
    assert counts.rows == {"other_shard": 1}


def test_a_shards_lease_refuses_a_second_run_of_it_not_the_others(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    second = Warehouse(root, shard=ShardSpec(0, 2))
    with Warehouse(root, shard=ShardSpec(0, 2)).locked(), Warehouse(root, shard=ShardSpec(1, 2)).locked(), \
            pytest.raises(StateError, match=r"shard 0/2 of warehouse .* is in use by another replicator run"), \
            second.locked():
        pass


@pytest.mark.parametrize("text", ["3/3", "-1/2", "a/b", "0/0"])
def test_cli_refuses_a_malformed_shard_with_exit_2(text: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from replicator.cli import main

    code = main(["run", f"--shard={text}", "--warehouse", str(tmp_path / "wh"), "--topic", "t",
                 "--bootstrap-servers", "127.0.0.1:9", "--protocol", "open", "--until-caught-up"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1] == f"replicator run: error: --shard: give --shard I/N with 0 <= I < N (e.g. --shard 0/3 for the " \
                      f"first of 3 shards) (got {text!r})"
    assert not (tmp_path / "wh").exists()


ops = st.lists(st.tuples(st.sampled_from(["row", "row", "row", "rename", "swap", "drop"]),
                         st.sampled_from("abcdef"), st.sampled_from("abcdef")), max_size=40)


def _kept_rows(s: ShardFilter, events: list[RowChange | DdlEvent], ts: int) -> list[RowChange]:
    """What a shard applies of one message's events: decoded, then (what is left) at its step."""
    decoded = s.apply(events, P1)
    rows = [ev for ev in decoded if isinstance(ev, RowChange)]
    step = s.step(Step(hi=ts, rows={(r.schema, r.table): [r] for r in rows},
                       ddls=tuple(ev for ev in decoded if isinstance(ev, DdlEvent))))
    return [r for table_rows in step.rows.values() if isinstance(table_rows, list) for r in table_rows]


@given(ops, st.integers(2, 4), st.sampled_from(["partition", "step"]))
def test_every_row_has_one_owner_and_each_table_one_shard(steps: list[tuple[str, str, str]], count: int,
                                                          mode: str) -> None:
    """A random history of rows, renames (also swaps through a temporary name) and drops, read by
    every shard: each row is kept by exactly one shard, and all the rows of one table (followed
    through its renames; a table created again is a new one) by the same shard, whether decided
    when decoded or at the step."""
    shards = [ShardFilter(ShardSpec(i, count), Identities(), mode) for i in range(count)]  # type: ignore[arg-type]
    live: dict[str, int] = {}  # name -> table number
    owners: dict[int, set[int]] = {}
    made = 0
    for ts, (op, x, y) in enumerate(steps, start=1):
        events: list[RowChange | DdlEvent] = []
        if op == "row":
            if x not in live:
                made += 1
                live[x] = made
            events.append(row(x, ts))
        elif op == "rename" and x in live and y not in live:
            live[y] = live.pop(x)
            events.append(rename(f"RENAME TABLE shop.{x} TO shop.{y}", ts))
        elif op == "swap" and x in live and y in live and x != y:
            live[x], live[y] = live[y], live[x]
            events.append(rename(f"RENAME TABLE shop.{x} TO shop.tmp, shop.{y} TO shop.{x}, shop.tmp TO shop.{y}", ts))
        elif op == "drop" and x in live:
            del live[x]
            events.append(DdlEvent(ts, "shop", x, 4, f"DROP TABLE shop.{x}"))
        kept = [i for i, s in enumerate(shards) for _ in _kept_rows(s, events, ts)]
        if op == "row":
            assert len(kept) == 1
            owners.setdefault(live[x], set()).add(kept[0])
    assert all(len(s) == 1 for s in owners.values())


def test_open_protocol_leaves_other_shards_rows_undecoded() -> None:
    """The Open Protocol names a row's table in its key: a row certainly another shard's is
    skipped before its value entry is parsed, and counted once."""
    from replicator.codec import codec_for
    from replicator.codec.values import DecodeOptions
    from replicator.events import Position

    codec = codec_for("open")
    events = [row("orders", 10), row("customers", 11), row("orders", 12)]
    (key, value), = codec.encode_rows(events)
    s1 = ShardFilter(ShardSpec(1, 2), Identities(), "partition")
    parsed: list[int] = []

    def skip(schema: str, table: str, ts: int, position: Position | None) -> bool:
        skipped = s1.skip_row(schema, table, ts, position)
        parsed.extend([] if skipped else [ts])
        return skipped

    out = codec.decode(key, value, options=DecodeOptions(skip_row=skip), position=Position("t", 1, 0))
    assert [(e.table, e.commit_ts) for e in out if isinstance(e, RowChange)] == [("customers", 11)]
    assert parsed == [11] and s1.counts.rows == {"other_shard": 2}
    # not certain (canal-json mode, a partition ahead of partition 0): decoded, left to the step
    s1p0 = ShardFilter(ShardSpec(1, 2), Identities(), "partition0")
    assert not s1p0.skip_row("shop", "orders", 10, Position("t", 1, 0))
    assert s1p0.skip_row("shop", "orders", 10, Position("t", 0, 0))


def test_craft_leaves_other_shards_rows_undecoded() -> None:
    from replicator.codec import codec_for
    from replicator.codec.values import DecodeOptions
    from replicator.events import Position

    codec = codec_for("craft")
    events = [row("orders", 10), row("customers", 11), row("orders", 12)]
    (key, value), = codec.encode_rows(events)
    s1 = ShardFilter(ShardSpec(1, 2), Identities(), "partition")
    out = codec.decode(key, value, options=DecodeOptions(skip_row=s1.skip_row), position=Position("t", 1, 0))
    assert [(e.table, e.commit_ts) for e in out if isinstance(e, RowChange)] == [("customers", 11)]
    assert s1.counts.rows == {"other_shard": 2}
    assert codec.decode(key, value, position=Position("t", 1, 0)) == events  # unsharded: every row


def test_what_shards_do_not_do_yet_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from replicator.cli import main
    from replicator.engine.options import RunOptions
    from replicator.engine.pipeline import Engine

    class NoSource:  # the refusal comes before anything is read
        name = "t"

    code = main(["run", "--shard", "0/2", "--warehouse", str(tmp_path / "wh"), "--binlog", str(tmp_path / "b")])
    assert code == 2 and "a statement binlog (--binlog) is applied whole" in capsys.readouterr().err
    opts = RunOptions(warehouse=str(tmp_path / "wh"), protocol="open", reader="spark", shard=ShardSpec(0, 2))
    with pytest.raises(ConfigError, match="--shard works with --reader driver only"):
        Engine(NoSource(), opts)  # type: ignore[arg-type]
