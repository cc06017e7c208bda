"""`--shard I/N` end to end (issue 41): one simulated stream of three tables, shop.orders renamed to
shop.orders_v2 mid-stream, replicated by two shards in sequence (each caught up) into one
warehouse. Each table is in exactly one shard's state, the rename stayed with its owner (orders
hashes to shard 0, orders_v2 to shard 1), and the union equals the simulator's expected tables."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replicator.cli import main
from replicator.delta.explore import open_warehouse
from replicator.delta.shardview import ShardedView
from replicator.engine.sharding import ShardFilter
from replicator.errors import ConfigError
from replicator.events import TP, Event, Resolved
from replicator.shards import ShardSpec, table_shard
from replicator.sim.expected import ExpectedState
from replicator.sim.simcheck import check_warehouse, compare_tables, read_delta_table, read_snapshot
from replicator.sim.simulate import SimConfig, Simulation
from replicator.views.listing import list_tables
from replicator.views.status import warehouse_status
from replicator.warehouse import Warehouse
from tests.integration.helpers import produce, run_engine
from tests.kafka_fixtures import new_topic
from tests.reliability.common import size
from tests.support.cli import kill_group, start_replicator, tail
from tests.support.env import cli_env
from tests.support.waiting import wait_for
from tests.support.warehouse import applied_ts

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("protocol", ["open", "canal-json"])
def test_two_shards_one_warehouse(kafka_bootstrap: str, spark: Any, tmp_path: Path, protocol: str,
                                  monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """open: other shards' rows skipped when decoded; canal-json (DDLs on partition 0 only): here
    every row is decided at its step, as when partition 0 is read last. Either way the same
    tables, each by its owner."""
    if protocol == "canal-json":
        # private: partition 0 read last, without staging the reads so
        monkeypatch.setattr(ShardFilter, "_certain", lambda self, partition, ts: False)
    sim = Simulation(SimConfig(protocol=protocol, seed=41, events=200, partitions=2, tables=3, ddl="rename_table"))
    topic = new_topic(kafka_bootstrap, 2, prefix="shards")
    produce(kafka_bootstrap, topic, sim.messages())
    expected = sim.expected
    assert set(expected.tables) == {"shop.customers", "shop.orders_v2", "shop.attachments"}
    assert (table_shard(("shop", "orders"), 2), table_shard(("shop", "orders_v2"), 2)) == (0, 1)
    wh = tmp_path / "wh"

    actual: dict[str, Any] = {}
    for i in range(2):
        shard = ShardSpec(i, 2)
        summary = run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, shard=shard)
        assert summary.error is None and summary.to_json()["shard"] == str(shard)
        assert summary.filtered.rows["other_shard"] > 0
        state = Warehouse(wh, shard=shard).load_state()
        assert state.applied_ts >= expected.watermark
        assert state.shard_renames == [[state.shard_renames[0][0], [["shop", "orders", "shop", "orders_v2"]]]]
        for entry in state.live_tables():
            name = f"{entry.schema_name}.{entry.table}"
            assert name not in actual, f"{name} is in two shards"
            actual[name] = read_delta_table(spark, entry.path, entry.table_spec.key)
            owner = ("shop", "orders") if entry.table == "orders_v2" else (entry.schema_name, entry.table)
            assert shard.owns(owner), f"{name} in shard {shard}"
    assert compare_tables(expected, actual) == []
    assert not (wh / "_replicator" / "state.json").exists()

    # replay per shard (`replicator replay --shard 1/2 --from-offsets 0=0,1=0`): shard 1 re-reads the
    # stream from those offsets into its own state; what it holds is skipped, shard 0 is untouched
    if protocol == "open":
        other = (wh / "_replicator/shards/0-of-2/state.json").read_bytes()
        again = run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, shard=ShardSpec(1, 2),
                           start={TP(topic, 0): 0, TP(topic, 1): 0})
        assert again.error is None
        assert (wh / "_replicator/shards/0-of-2/state.json").read_bytes() == other
        assert check_warehouse(spark, wh, expected) == []
        # the commands read every shard: check compares all their tables, tables lists them
        expected.write(tmp_path / "expected.json")
        assert main(["check", "--warehouse", str(wh), "--expected", str(tmp_path / "expected.json"), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["tables"] == 3
        assert main(["tables", "--warehouse", str(wh), "--json"]) == 0
        assert {f"{t['schema']}.{t['table']}": t["shard"] for t in json.loads(capsys.readouterr().out)} == {
            "shop.customers": "1/2", "shop.attachments": "1/2", "shop.orders_v2": "0/2"}

    # the recorded layout refuses an unsharded run and another N, before anything is read or written
    with pytest.raises(ConfigError, match="sharded 2 ways"):
        run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol)
    with pytest.raises(ConfigError, match="sharded 2 ways"):
        run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, shard=ShardSpec(0, 3))


def _split_stream(config: SimConfig, fraction: float) -> tuple[list[tuple[int, bytes | None, bytes]], int, int]:
    """The simulated stream's records, the index to cut them at (right before a resolved event,
    about `fraction` in) and the global watermark the records before the cut reach: the smallest
    of the partitions' last resolved ts there."""
    sim = Simulation(config)
    out: list[tuple[int, bytes | None, bytes]] = []
    last: dict[int, int] = {}
    cuts: list[tuple[int, int]] = []
    events = sim.events

    def spy() -> Iterator[tuple[int, Event]]:
        for p, ev in events():
            if isinstance(ev, Resolved):  # every message of the events before it is out already
                if len(last) == config.partitions:
                    cuts.append((len(out), min(last.values())))
                last[p] = max(last.get(p, 0), ev.ts)
            yield p, ev

    sim.events = spy  # type: ignore[method-assign]
    for message in sim.messages():
        out.append(message)
    cut, watermark = min(cuts, key=lambda c: abs(c[0] - fraction * len(out)))
    return out, cut, watermark


def _states_at_resolved(config: SimConfig) -> tuple[dict[int, ExpectedState], ExpectedState]:
    """The upstream tables at every resolved ts of the stream (and at its end), from the same seed."""
    sim = Simulation(config)
    states: dict[int, ExpectedState] = {}
    for _p, ev in sim.events():
        if isinstance(ev, Resolved) and ev.ts not in states:
            states[ev.ts] = sim.state_now()
    return states, sim.expected


def _follow(bootstrap: str, topic: str, wh: Path, shard: int, log: Path) -> subprocess.Popen[bytes]:
    return start_replicator("run", "--bootstrap-servers", bootstrap, "--topic", topic, "--protocol", "open",
                            "--warehouse", str(wh), "--shard", f"{shard}/3", env=cli_env(), log=log)


def _applied(wh: Path, shard: int) -> int:
    return applied_ts(wh, ShardSpec(shard, 3))


def _commits(wh: Path, shard: int) -> int:
    """Delta commits of the shard's tables so far."""
    path = Warehouse(wh, shard=ShardSpec(shard, 3)).state_path
    if not path.exists():
        return 0
    tables = json.loads(Path(path.path).read_text())["tables"].values()
    return sum(len(list(Path(t["path"], "_delta_log").glob("*.json"))) for t in tables)


def test_three_shards_side_by_side_one_killed_and_resumed(kafka_bootstrap: str, spark: Any, tmp_path: Path) -> None:
    """Three followers `--shard I/3` on one warehouse and one stream (a table renamed mid-stream,
    one dropped and created again, each shard with tables of its own): the first part of the
    stream, then the rest, during which shard 1 is SIGKILLed (with its JVM) after a step and
    started again. The tables equal the simulator's, and a snapshot across shards at the first
    part's watermark equals the upstream tables at that point. 200 changes in CI; 3,000 under
    `make soak` (REPLICATOR_SOAK=1)."""
    config = SimConfig(protocol="open", seed=41, events=size(200, 3000), partitions=3, tables=6,
                       ddl=["drop_table", "rename_table"], resolved_every=4)
    records, cut, first = _split_stream(config, 0.5)
    states, expected = _states_at_resolved(config)
    owners = {name: table_shard(tuple(name.split(".")), 3) for name in expected.tables if name != "shop.orders_v2"}
    assert set(owners.values()) == {0, 1, 2} and first in states
    assert "shop.orders_v2" in expected.tables and "shop.orders" in states[first].tables  # renamed after the cut
    assert set(expected.tables) == set(states[first].tables) - {"shop.orders"} | {"shop.orders_v2"}
    topic = new_topic(kafka_bootstrap, 3, prefix="shards3")
    produce(kafka_bootstrap, topic, records[:cut])
    wh, log = tmp_path / "wh", tmp_path / "runs.log"
    procs = {i: _follow(kafka_bootstrap, topic, wh, i, log) for i in range(3)}
    try:
        wait_for("every shard to apply the first part",
                 lambda: any(p.poll() is not None for p in procs.values())
                 or all(_applied(wh, i) >= first for i in range(3)), timeout=size(240, 900))
        assert all(p.poll() is None for p in procs.values()), tail(log)
        assert [_applied(wh, i) for i in range(3)] == [first] * 3
        commits = _commits(wh, 1)
        produce(kafka_bootstrap, topic, records[cut:])
        # SIGKILL shard 1 (the run and its Spark JVM) mid-run: as soon as a table of its has a new
        # Delta commit, mostly before the step's progress is (else just after it)
        wait_for("shard 1 to write into the second part",
                 lambda: procs[1].poll() is not None or _commits(wh, 1) > commits or _applied(wh, 1) > first,
                 timeout=120, every=0.05)
        kill_group(procs[1])
        procs[1] = _follow(kafka_bootstrap, topic, wh, 1, log)
        wait_for("every shard to apply the whole stream",
                 lambda: any(p.poll() is not None for p in procs.values())
                 or all(_applied(wh, i) >= expected.watermark for i in range(3)), timeout=size(240, 900))
        assert all(p.poll() is None for p in procs.values()), tail(log)
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        assert [p.wait(timeout=120) for p in procs.values()] == [0, 0, 0], tail(log)
    finally:
        for p in procs.values():
            if p.poll() is None:
                kill_group(p)

    assert check_warehouse(spark, wh, expected) == []
    view = ShardedView.read(Warehouse(wh))
    assert view is not None and view.applied_ts >= expected.watermark
    points = view.watermarks()
    assert first in points and points[-1] == view.applied_ts
    snapshot = read_snapshot(spark, wh, first)  # tables by their names now, as unsharded snapshots
    snapshot["shop.orders"] = snapshot.pop("shop.orders_v2")
    assert set(snapshot) == set(states[first].tables)
    assert compare_tables(states[first], snapshot) == []
    # a notebook's view is the same: open_warehouse reads every shard
    ex = open_warehouse(wh, spark=spark)
    assert ex.sharded and ex.watermarks() == points
    assert set(ex.windows()["shard"]) == {"0/3", "1/3", "2/3"}
    assert {name: df.count() for name, df in ex.snapshot(first).items()} == {
        ("shop.orders_v2" if name == "shop.orders" else name): len(rows) for name, rows in states[first].tables.items()}
    with pytest.raises(ValueError, match="not applied by shard"):
        ex.snapshot(view.applied_ts + 1)
    # the readers see every shard: tables with their owners, status with each shard's watermark
    listed = {f"{t.schema}.{t.table}": t.shard for t in list_tables(wh)[1]}
    assert listed == {name: f"{owners.get(name, 1)}/3" for name in expected.tables}
    frame = ex.tables()
    assert {f"{r.schema}.{r.table}": r.shard for r in frame.itertuples()} == listed
    status = warehouse_status(str(wh)).to_json()
    assert [s["shard"] for s in status["shards"]] == ["0/3", "1/3", "2/3"]
    assert status["applied_watermark"] == view.applied_ts and status["holder"] is None
