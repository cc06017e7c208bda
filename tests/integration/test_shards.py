"""`--shard I/N` end to end (issue 41): one simulated stream of three tables, shop.orders renamed to
shop.orders_v2 mid-stream, replicated by two shards in sequence (each caught up) into one
warehouse. Each table is in exactly one shard's state, the rename stayed with its owner (orders
hashes to shard 0, orders_v2 to shard 1), and the union equals the simulator's expected tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from replicator.delta.warehouse import Warehouse
from replicator.engine.sharding import ShardFilter
from replicator.errors import ConfigError
from replicator.shards import ShardSpec, table_shard
from replicator.sim.simcheck import compare_tables, read_delta_table
from replicator.sim.simulate import SimConfig, Simulation
from tests.integration.helpers import produce, run_engine
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("protocol", ["open", "canal-json"])
def test_two_shards_one_warehouse(kafka_bootstrap: str, spark: Any, tmp_path: Path, protocol: str,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """open: other shards' rows skipped when decoded; canal-json (DDLs on partition 0 only): here
    every row is decided at its step, as when partition 0 is read last. Either way the same
    tables, each by its owner."""
    if protocol == "canal-json":
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

    # the recorded layout refuses an unsharded run and another N, before anything is read or written
    with pytest.raises(ConfigError, match="sharded 2 ways"):
        run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol)
    with pytest.raises(ConfigError, match="sharded 2 ways"):
        run_engine(kafka_bootstrap, topic, wh, spark, protocol=protocol, shard=ShardSpec(0, 3))
