"""`replicator maintain` on real Delta tables (issue 51 items 4 and 5), through the CLI in this
process (the session's Spark is shared): a warehouse written by `run --archive`, its busiest table
given many small files by one-row appends and an UPDATE (a change-data file); then a dry run (a
plan, nothing changed), a refused short retention, a refused lease, the compaction (fewer files,
the same rows, the same change-data-feed changes, an OPTIMIZE commit whose actions are all
dataChange=false) and a vacuum past an explicit short retention (only files no version needs are
gone, `_change_data/` included)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from replicator.delta.rowcount import log_version, read_snapshot
from replicator.views.listing import list_tables
from replicator.warehouse import Warehouse
from tests.support.cli import run_cli

pytestmark = pytest.mark.integration



def _rows(spark: Any, path: str) -> list[str]:
    return sorted(map(str, spark.read.format("delta").load(path).collect()))


def _changes(spark: Any, path: str, last: int) -> list[str]:
    df = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
          .option("endingVersion", last).load(path))
    return sorted(map(str, df.collect()))


def _commit(path: str, version: int) -> list[dict[str, Any]]:
    text = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def _commits_of(path: str, after: int, operation: str) -> list[int]:
    """The versions after `after` whose commit is `operation` (VACUUM also commits: START, END)."""
    return [v for v in range(after + 1, int(log_version(path) or 0) + 1)
            if any(a.get("commitInfo", {}).get("operation") == operation for a in _commit(path, v))]


def _on_disk(path: str) -> set[str]:
    return {str(p.relative_to(path)) for p in Path(path).rglob("*") if p.is_file() and not p.name.startswith(".")}


def test_maintain_compacts_and_vacuums_under_the_lease(spark: Any, tmp_path: Path) -> None:
    archive, wh = tmp_path / "archive", tmp_path / "warehouse"
    assert run_cli("simulate", "--protocol", "canal-json", "--out", str(archive), "--events", "120",
                "--tables", "2", "--partitions", "1", "--ddl", "none", "--seed", "51")[0] == 0
    code, out, err = run_cli("run", "--archive", str(archive), "--warehouse", str(wh))
    assert code == 0, out + err
    _, listed = list_tables(wh)
    tables = {f"{t.schema}.{t.table}": t.path for t in listed}
    busy, key = listed[0], listed[0].key[0]
    row = spark.read.format("delta").load(busy.path).limit(1)
    for i in range(5):  # each a small data file: a follower's step in miniature
        row.withColumn(key, F.lit(-1 - i).cast(row.schema[key].dataType)).write.format("delta").mode("append") \
            .save(busy.path)
    # a rewrite of a file and a change-data file
    spark.sql(f"UPDATE delta.`{busy.path}` SET {key} = {key} - 100 WHERE {key} = -1")
    versions = {n: log_version(p) for n, p in tables.items()}
    live = {n: len(s.live) for n, p in tables.items() if (s := read_snapshot(p)) is not None}
    disk = {n: _on_disk(p) for n, p in tables.items()}
    rows = {n: _rows(spark, p) for n, p in tables.items()}
    changes = {n: _changes(spark, p, int(versions[n] or 0)) for n, p in tables.items()}
    busiest = max(live, key=lambda n: live[n])
    assert live[busiest] >= 6, live  # many small steps: many small files
    small = str(min(live.values()) + 1)  # the busiest table is compacted, the least busy one is not
    assert max(live.values()) >= int(small)

    # --dry-run: the plan per table and the total, nothing changed
    code, out, err = run_cli("maintain", "--warehouse", str(wh), "--dry-run", "--min-small-files", small)
    assert code == 0, out + err
    lines = out.splitlines()
    assert len(lines) == len(tables) + 1
    line = next(ln for ln in lines if ln.startswith(busiest + ":"))
    assert f"{live[busiest]} files" in line and f"{live[busiest]} small" in line and "would compact to ~1 files" in line
    assert "would remove 0 files" in line  # every replaced file is younger than 7 days
    assert lines[-1].startswith(f"warehouse {wh}: {len(tables)} tables; would compact 1; would remove 0 files")
    assert lines[-1].endswith("s") and "(dry run: nothing changed)" in lines[-1]
    code, out, _ = run_cli("maintain", "--warehouse", str(wh), "--dry-run", "--json", "--min-small-files",
                           small, "--include", busiest)
    doc = json.loads(out)
    assert code == 0 and doc["dry_run"] is True and doc["retention_hours"] == 168
    assert doc["target_file_size"] == 128 * 2**20 and doc["compacted_tables"] == 1
    [plan] = doc["tables"]
    assert (plan["schema"] + "." + plan["table"], plan["files"], plan["small_files"], plan["compact"],
            plan["files_after"]) == (busiest, live[busiest], live[busiest], True, 1)
    assert {n: log_version(p) for n, p in tables.items()} == versions
    assert {n: _on_disk(p) for n, p in tables.items()} == disk
    assert not Warehouse(wh).load_state().compacted and not Warehouse(wh).load_state().vacuumed

    # a retention below the tables' own (7 days) is refused unless asked for; nothing changed
    code, out, err = run_cli("maintain", "--warehouse", str(wh), "--retention-hours", "1")
    assert (code, out) == (2, "") and "--allow-short-retention" in err and "delta.deletedFileRetentionDuration" in err
    # another holder of the lease: refused naming it, nothing changed
    with Warehouse(wh).locked():
        code, out, err = run_cli("maintain", "--warehouse", str(wh), "--min-small-files", small)
    assert code != 0 and "in use by another replicator run" in err and "--wait" in err
    assert {n: log_version(p) for n, p in tables.items()} == versions

    # the compaction: one OPTIMIZE commit on the busiest table only, nothing vacuumed yet
    code, out, err = run_cli("maintain", "--warehouse", str(wh), "--json", "--min-small-files", small)
    assert code == 0, out + err
    done = {t["schema"] + "." + t["table"]: t for t in json.loads(out)["tables"]}
    # when each table was maintained, in state.json: what `tables` and `status` show, what a
    # follower times its next VACUUM from
    state = Warehouse(wh).load_state()
    uids = {f"{e.schema_name}.{e.table}": e.uid for e in state.live_tables()}
    assert set(state.compacted) == {uids[busiest]} and set(state.vacuumed) == set(uids.values())
    assert state.epoch >= 1
    assert done[busiest]["compact"] and done[busiest]["files_after"] == 1 and done[busiest]["vacuum_files"] == 0
    path = tables[busiest]
    optimize = _commits_of(path, int(versions[busiest] or 0), "OPTIMIZE")
    assert len(optimize) == 1
    optimized = optimize[0]
    snapshot = read_snapshot(path)
    assert snapshot is not None and len(snapshot.live) == 1
    for name, p in tables.items():
        assert _rows(spark, p) == rows[name]
        assert _changes(spark, p, int(versions[name] or 0)) == changes[name]
        assert name == busiest or not _commits_of(p, int(versions[name] or 0), "OPTIMIZE")
    commit = _commit(path, optimized)
    info = next(a["commitInfo"] for a in commit if "commitInfo" in a)
    assert info["operation"] == "OPTIMIZE" and json.loads(info["userMetadata"])["replicator"]["kind"] == "maintain"
    actions = [a.get("add") or a.get("remove") for a in commit if "add" in a or "remove" in a]
    assert len(actions) == live[busiest] + 1 and all(a["dataChange"] is False for a in actions)
    # the change feed from the OPTIMIZE on is empty (dataChange=false: nothing to replay)
    assert _changes(spark, path, int(log_version(path) or 0)) == changes[busiest]
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert [h["operation"] for h in history if h["version"] == optimized] == ["OPTIMIZE"]

    # the vacuum past an explicit short retention: what no version needs is gone, the rest stays;
    # the step log keeps its newest step and rolls the others up
    steps = len(Warehouse(wh).windows())
    code, out, err = run_cli("maintain", "--warehouse", str(wh), "--json", "--retention-hours", "0",
                          "--allow-short-retention", "--include", busiest)
    assert code == 0, out + err
    [vac] = json.loads(out)["tables"]
    again = Warehouse(wh).load_state()
    assert again.compacted == state.compacted and again.vacuumed[uids[busiest]] > state.vacuumed[uids[busiest]]
    assert json.loads(out)["steps_rolled"] == steps - 1
    assert [w["kind"] for w in Warehouse(wh).windows()][:1] == (["rollup"] if steps > 1 else ["ddl"])
    remaining = _on_disk(path)
    live_files = {k[0] for k in (read_snapshot(path) or snapshot).live}
    data_left = {f for f in remaining if not f.startswith("_delta_log/")}
    assert data_left == live_files, data_left - live_files
    assert vac["vacuum_files"] == len(disk[busiest] - remaining)
    assert vac["vacuum_files"] >= live[busiest] and vac["vacuum_bytes"] > 0
    assert _rows(spark, path) == rows[busiest]
    cdf_before = any(f.startswith("_change_data/") for f in disk[busiest])
    assert vac["vacuum_change_data_files"] == sum(1 for f in disk[busiest] if f.startswith("_change_data/"))
    assert not any(f.startswith("_change_data/") for f in remaining) or not cdf_before
