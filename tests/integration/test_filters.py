"""Table filters end to end (issue 31 part 2): one simulated stream of three tables, one of them
renamed mid-stream (shop.orders -> shop.orders_v2), replicated three times with different filters.
The tables kept equal the simulator's expected ones; the others never reach the warehouse; the
skipped rows and DDLs are counted per reason in the summary; a rename out of the filter leaves the
table as it was, one into the filter creates it from the rows that follow."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from replicator.filters import TableFilter
from replicator.sim.simcheck import canonical, compare_tables, read_warehouse
from replicator.sim.simulate import SimConfig, Simulation
from tests.integration.helpers import produce, run_engine
from tests.kafka_fixtures import new_topic

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("reader", ["driver", "spark"])
def test_filters_and_renames_across_them(kafka_bootstrap: str, spark: Any, tmp_path: Path, reader: str) -> None:
    """--reader spark skips the rows on the executors and the DDLs on the driver: the same outcome."""
    sim = Simulation(SimConfig(protocol="open", seed=31, events=400, partitions=2, tables=3, ddl="rename_table"))
    topic = new_topic(kafka_bootstrap, 2, prefix="filters")
    produce(kafka_bootstrap, topic, sim.messages())
    expected = sim.expected
    assert set(expected.tables) == {"shop.customers", "shop.orders_v2", "shop.attachments"}

    def run(name: str, include: list[str], exclude: list[str] = []) -> Any:  # noqa: B006 - never mutated
        return run_engine(kafka_bootstrap, topic, tmp_path / name, spark,
                          table_filter=TableFilter(include, exclude), reader=reader)

    # 1. Everything of shop but one table (back-quoted): the rename stays inside the filter.
    s1 = run("wh1", ["shop.*"], ["shop.`attachments`"])
    kept = {k: v for k, v in expected.tables.items() if k != "shop.attachments"}
    assert compare_tables(dataclasses.replace(expected, tables=kept), read_warehouse(spark, tmp_path / "wh1")) == []
    assert s1.filtered.rows["excluded"] > 0 and s1.filtered.ddl["excluded"] >= 1  # its rows and CREATE TABLE
    assert set(s1.filtered.rows) == {"excluded"} and "shop.attachments" not in s1.tables

    # 2. The rename moves shop.orders out of the filter: the table stays as it was, the new name is skipped.
    s2 = run("wh2", ["shop.customers", "shop.ord?rs"])
    actual = read_warehouse(spark, tmp_path / "wh2")
    assert set(actual) == {"shop.customers", "shop.orders"}
    only_customers = {"shop.customers": expected.tables["shop.customers"]}
    assert compare_tables(dataclasses.replace(expected, tables=only_customers),
                          {"shop.customers": actual["shop.customers"]}) == []
    assert actual["shop.orders"].rows, "the table renamed out of the filter was emptied"
    assert s2.filtered.ddl["renamed_out_of_filter"] == 1
    assert s2.filtered.rows["not_included"] > 0  # shop.attachments and shop.orders_v2

    # 3. The rename moves the table into the filter: created from the rows that follow it, each
    #    row as upstream has it at the end; the rows nobody changed after the rename are missing.
    s3 = run("wh3", ["shop.orders_v[0-9]"])
    actual = read_warehouse(spark, tmp_path / "wh3")
    assert set(actual) == {"shop.orders_v2"}
    assert s3.filtered.ddl["renamed_into_filter"] == 1
    table = actual["shop.orders_v2"]
    key = expected.schemas["shop.orders_v2"]["key"]
    types = table.types

    def by_key(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], dict[str, Any]]:
        return {tuple(canonical(r[k], types[k]) for k in key): r for r in rows}

    want, have = by_key(expected.tables["shop.orders_v2"]), by_key(table.rows)
    assert have and set(have) <= set(want) and len(have) < len(want)
    for k, row in have.items():
        for col, v in row.items():
            assert canonical(v, types[col]) == canonical(want[k].get(col), types[col]), (k, col)
