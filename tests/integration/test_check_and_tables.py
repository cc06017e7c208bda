"""`replicator check` and `replicator tables` on a small simulated warehouse, through the CLI in
this process (the session's Spark is shared): simulate into an archive, `run --archive`, then check
(equal, then one row changed behind the replicator's back) and list (piped: whole paths, exact row
counts). Also the log-based row count against Spark's on a table with deletion vectors and checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replicator.delta.rowcount import count_rows
from replicator.sim.expected import ExpectedState
from replicator.warehouse import Warehouse
from tests.support.cli import run_cli

pytestmark = pytest.mark.integration



def test_check_and_tables_on_a_simulated_warehouse(spark: Any, tmp_path: Path) -> None:
    archive, truth, wh = tmp_path / "archive", tmp_path / "truth.json", tmp_path / "warehouse"
    assert run_cli("simulate", "--protocol", "open", "--out", str(archive), "--events", "200", "--tables", "2",
                "--partitions", "2", "--ddl", "none", "--seed", "29", "--expected", str(truth))[0] == 0
    code, out, err = run_cli("run", "--archive", str(archive), "--warehouse", str(wh))
    assert code == 0, out + err
    expected = ExpectedState.load(truth)
    total = sum(len(rows) for rows in expected.tables.values())

    code, out, err = run_cli("check", "--warehouse", str(wh), "--expected", str(truth))
    assert code == 0, out + err
    assert out == f"warehouse {wh} matches {truth}: {len(expected.tables)} tables, {total:,} rows compared\n"
    code, out, _ = run_cli("check", "--warehouse", str(wh), "--expected", str(truth), "--json")
    assert code == 0 and json.loads(out) == {
        "ok": True, "tables": len(expected.tables), "rows": total, "warehouse_tables": len(expected.tables),
        "warehouse_rows": total, "differences": [], "differences_total": 0}

    # `tables` piped (run_cli: stdout is not a terminal): tab-separated, whole paths, exact counts
    state = Warehouse(wh).load_state()
    code, out, _ = run_cli("tables", "--warehouse", str(wh))
    assert code == 0
    header, *lines = out.splitlines()
    assert header.split("\t") == ["schema", "table", "rows", "key", "applied", "reader_features", "path", "source",
                                   "catalog"]
    listed = {f"{c[0]}.{c[1]}": c for c in (line.split("\t") for line in lines)}
    assert {name: int(c[2]) for name, c in listed.items()} == {n: len(r) for n, r in expected.tables.items()}
    assert {name: c[6] for name, c in listed.items()} == {
        f"{e.schema_name}.{e.table}": e.path for e in state.live_tables()}
    assert all(len(c[6]) > 40 and c[6] in out for c in listed.values())
    code, out, _ = run_cli("tables", "--warehouse", str(wh), "--json")
    assert {f"{r['schema']}.{r['table']}": r["rows"] for r in json.loads(out)} == {
        n: len(r) for n, r in expected.tables.items()}

    # one row changed behind the replicator's back: exit 1 naming table, key and column
    entry = state.live_table("shop", "customers")
    assert entry is not None and expected.tables["shop.customers"]
    row = min(expected.tables["shop.customers"], key=lambda r: abs(int(r["id"])))
    spark.sql(f"UPDATE delta.`{entry.path}` SET name = 'tampered' WHERE id = {int(row['id'])}")
    code, out, _ = run_cli("check", "--warehouse", str(wh), "--expected", str(truth))
    assert code == 1
    assert out.splitlines()[0] == f"warehouse {wh} differs from {truth}: 1 difference (shop.customers: 1)"
    assert f"  shop.customers: row id={int(row['id'])} column name: expected {row['name']!r}, " \
           "warehouse 'tampered'" in out.splitlines()
    code, out, _ = run_cli("check", "--warehouse", str(wh), "--expected", str(truth), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and doc["differences_total"] == 1
    assert doc["differences"][0].startswith(f"shop.customers: row id={int(row['id'])} column name:")

    # an unreadable expected file or a directory that is no warehouse: one line, exit 2
    code, out, err = run_cli("check", "--warehouse", str(wh), "--expected", str(tmp_path / "nope.json"))
    assert (code, out) == (2, "") and err.startswith("replicator check: error: cannot read expected state ")
    assert err.count("\n") == 1
    code, out, err = run_cli("check", "--warehouse", str(archive), "--expected", str(truth))
    assert (code, out) == (2, "") and "is not a warehouse written by `replicator run`" in err


def test_log_row_count_equals_spark_count(spark: Any, tmp_path: Path) -> None:
    """Deletion vectors, removes and a checkpoint (every 2 commits) in the log replay."""
    path = str(tmp_path / "dv")
    spark.sql(f"CREATE TABLE delta.`{path}` (id INT, v STRING) USING delta TBLPROPERTIES "
              "('delta.enableDeletionVectors' = 'true', 'delta.checkpointInterval' = '2')")
    for batch in range(2):
        spark.sql(f"INSERT INTO delta.`{path}` SELECT id, 'x' FROM range({batch * 50}, {batch * 50 + 50})")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 7 = 0")  # deletion vectors on both files
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id BETWEEN 60 AND 80")  # one file's vector replaced
    log = Path(path) / "_delta_log"
    assert list(log.glob("*.checkpoint.parquet")), "the replay must start from a checkpoint"
    assert any('"deletionVector":{' in p.read_text() for p in log.glob("*.json"))
    assert count_rows(path) == spark.read.format("delta").load(path).count() == 100 - 15 - 18
