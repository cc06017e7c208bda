"""The statement binlog applied into real Delta: the seed's session, interleaved / rolled-back /
chained transactions, hostile identifiers and values, crashes (hook and real SIGKILL), corruption."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from replicator.binlog_apply import BinlogApplier, load_state
from replicator.cli import main
from replicator.delta.typemap import spec_from_create
from replicator.delta.writer import TableWriter
from replicator.formats.binlog import BinlogWriter, read_binlog
from replicator.warehouse import State, TableEntry, Warehouse
from tests.integration.concurrency import CommitDuringScan
from tests.support.cli import cli_stdout, kill_group, replicator_argv
from tests.support.env import cli_env
from tests.support.waiting import poll_until

pytestmark = pytest.mark.integration

K1 = "'; DROP TABLE whatever; --"
V1 = "".join(chr(i) for i in range(1, 128)) + "\0é😀\u2028 ${x} */ `; \\' \\\\"
K2 = "`), (`x"
V2 = "\\' OR 1=1 -- \\"
WEIRD_TABLE = "we`ird;tbl'"
WEIRD_COL = "co'l`;--"

SEED_WRITES = [("mkindahl", "Mats Kindahl"), ("krow", "Brian Aker"), ("mtaylor", "Monty Taylor")]
SEED_SHAPE = "\n".join(
    f"# Global Id: (1,1)\n# Timestamp: <ts>\nset @name = '{name}'\nset @nick = '{nick}'\n"
    "INSERT INTO whatever VALUES (@nick,@name)"
    for nick, name in SEED_WRITES
)


def q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def write_workload(log: Path) -> None:
    """The seed's session (through the CLI) plus interleaved, rolled-back and chained transactions."""
    cli_stdout("binlog", "write", "--file", str(log), "--trans", "100",
               "CREATE TABLE whatever (nick VARCHAR(32) PRIMARY KEY, name VARCHAR(64))")
    cli_stdout("binlog", "write", "--file", str(log), "--trans", "100", "--commit")
    for nick, name in SEED_WRITES:  # the seed's three binlog_writer commands ...
        cli_stdout("binlog", "write", "--file", str(log), "--trans", "1", "--set", f"nick={nick}",
                   "--set", f"name={name}", "INSERT INTO whatever VALUES (@nick,@name)")
    out = cli_stdout("binlog", "read", str(log))  # ... and its binlog_reader
    assert SEED_SHAPE in re.sub(r"# Timestamp: \d+", "# Timestamp: <ts>", out)
    cli_stdout("binlog", "write", "--file", str(log), "--trans", "1", "--commit")
    t = f"shop.{q(WEIRD_TABLE)}"
    with BinlogWriter(log, rotate_bytes=700) as w:
        w.write_query(2, f"CREATE TABLE {t} ({q(WEIRD_COL)} VARCHAR(300) PRIMARY KEY, v TEXT, n INT)")
        w.write_query(3, "INSERT INTO whatever VALUES ('gone', 'rolled back')")
        w.write_query(2, f"INSERT INTO {t} VALUES (@k1, @v1, 1), (@k2, @v2, 2)",
                      {"k1": K1, "v1": V1, "k2": K2, "v2": V2})
        w.write_query(4, "USE shop", session_id=9)
        w.write_query(4, f"UPDATE {q(WEIRD_TABLE)} SET n = n + 10, v = CONCAT(v, n) WHERE {q(WEIRD_COL)} = @k",
                      {"k": K1}, session_id=9)
        w.write_rollback(3)
        w.write_commit(2)
        w.write_query(5, "REPLACE INTO whatever VALUES ('krow', 'Brian \"krow\" Aker'), ('new', 'x')")
        w.write_query(5, "ALTER TABLE whatever ADD COLUMN age INT DEFAULT 40 AFTER nick")
        w.write_query(5, "DELETE FROM whatever WHERE nick = 'mtaylor'")
        w.write_commit(5)
        w.write_commit(4)
        for sql in ("CREATE TABLE tmp (a INT)", "INSERT INTO tmp VALUES (1), (2)", "TRUNCATE tmp",
                    "INSERT INTO tmp VALUES (3)", "ALTER TABLE whatever DROP COLUMN name", "DROP TABLE tmp"):
            w.write_query(6, sql)
        w.write_commit(6)
        w.write_query(7, "INSERT INTO whatever (nick) VALUES ('never committed')")
    assert len({e.file for e in read_binlog(log)}) >= 3, "the workload should span chained files"


EXPECTED = {
    "default.whatever": (["nick", "age"], [("krow", 40), ("mkindahl", 40), ("new", 40)]),
    f"shop.{WEIRD_TABLE}": ([WEIRD_COL, "v", "n"], [(K1, V1 + "11", 11), (K2, V2, 2)]),
}


def tables(spark: Any, wh: Path) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Live tables of a binlog warehouse: name -> (columns, sorted rows)."""
    out = {}
    for t in load_state(wh / "_replicator" / "binlog.json").tables:
        if t.status == "live":
            df = spark.read.format("delta").load(t.path)
            out[t.name] = (df.columns, sorted(tuple(r) for r in df.collect()))
    return out


@dataclass
class Reference:
    log: Path
    wh: Path
    tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]]


@pytest.fixture(scope="module")
def reference(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    base = tmp_path_factory.mktemp("binlog")
    log = base / "log" / "log.bin"
    log.parent.mkdir()
    write_workload(log)
    wh = base / "ref"
    summary = BinlogApplier(wh, spark).run([log])
    assert (summary.applied, summary.rolled_back, summary.pending, summary.statements) == (6, 1, [(1, 7)], 16)
    return Reference(log, wh, tables(spark, wh))


def test_workload_applies_to_the_expected_tables(spark: Any, reference: Reference) -> None:
    assert reference.tables == EXPECTED
    state = load_state(reference.wh / "_replicator" / "binlog.json")
    assert state.applied is not None and tuple(state.applied.gtid) == (1, 6) and state.applied.seq == 6
    assert state.epoch == 1, "written under the run's lease, by token"
    assert [t.table for t in state.tables if t.status == "dropped"] == ["tmp"]
    whatever = next(t for t in state.tables if t.table == "whatever")
    history = spark.sql(f"DESCRIBE HISTORY delta.{q(whatever.path)}").collect()
    assert any(json.loads(h.userMetadata or "{}").get("gtid") == [1, 5] for h in history)
    # a second run applies nothing and never starts a Spark job
    again = BinlogApplier(reference.wh).run([reference.log])
    assert (again.applied, again.skipped, again.statements) == (0, 6, 0)


class Crash(BaseException):
    pass


def test_crashes_between_delta_commit_and_progress_then_resume(spark: Any, tmp_path: Path) -> None:
    """'after' = the statement's Delta commits landed but its progress was not recorded: the re-run
    must be skipped by Delta's txnAppId/txnVersion (INSERT, MERGE, DELETE, backfill UPDATE) or by
    check-before-alter (ADD COLUMN); a duplicate write would show up as a wrong row."""
    log = tmp_path / "log.bin"
    with BinlogWriter(log) as w:
        for trans, sqls in (
            (1, ["CREATE TABLE k (id INT PRIMARY KEY, v TEXT)", "INSERT INTO k VALUES (1, 'a'), (2, 'b')"]),
            (2, ["INSERT INTO k VALUES (3, 'c')", "ALTER TABLE k ADD COLUMN n INT DEFAULT 7"]),
            (3, ["UPDATE k SET v = CONCAT(v, '!') WHERE id < 3", "REPLACE INTO k VALUES (2, 'B', 8)",
                 "DELETE FROM k WHERE id = 1"]),
        ):
            for sql in sqls:
                w.write_query(trans, sql)
            w.write_commit(trans)
    wh = tmp_path / "wh"
    for point in [("after", 1, 1), ("after", 2, 1), ("before", 3, 1), ("after", 3, 1), ("after", 3, 2)]:
        def hook(p: str, seq: int, index: int, point: tuple[str, int, int] = point) -> None:
            if (p, seq, index) == point:
                raise Crash(point)

        with pytest.raises(Crash):
            BinlogApplier(wh, spark, hook=hook).run([log])
    summary = BinlogApplier(wh, spark).run([log])
    assert summary.resumed and summary.last_gtid == (1, 3) and summary.statements == 1
    assert tables(spark, wh) == {"default.k": (["id", "v", "n"], [(2, "B", 8), (3, "c", 7)])}


def test_sigkill_during_apply_then_resume_equals_uninterrupted(spark: Any, reference: Reference,
                                                               tmp_path: Path) -> None:
    seed = int(os.environ.get("REPLICATOR_KILL_SEED", str(random.randrange(1 << 30))))
    rnd = random.Random(seed)
    wh = tmp_path / "wh"
    state = wh / "_replicator" / "binlog.json"
    after = rnd.randint(2, 9)  # statements recorded before the kill becomes possible
    proc = subprocess.Popen(replicator_argv("run", "--binlog", str(reference.log), "--warehouse", str(wh)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(), start_new_session=True)
    try:
        poll_until(lambda: proc.poll() is not None
                   or (state.exists() and json.loads(state.read_text()).get("statements", 0) >= after), 400, every=0.05)
        time.sleep(rnd.uniform(0.0, 1.5))  # somewhere inside the next statement (or between two)
        assert proc.poll() is None, f"the apply ended before the kill (seed {seed}): {proc.stderr.read()!r}"  # type: ignore[union-attr]
    finally:
        kill_group(proc)  # the Python driver and its JVM, like a machine crash
    killed_at = json.loads(state.read_text())
    summary = BinlogApplier(wh, spark).run([reference.log])
    assert summary.last_gtid == (1, 6), f"seed {seed}"
    where = f"seed {seed}, killed after {killed_at['applied']} / in {killed_at['current']}"
    assert tables(spark, wh) == reference.tables, where


def test_corrupt_frame_stops_the_apply_at_its_offset(spark: Any, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "log.bin"
    with BinlogWriter(log) as w:
        w.write_query(1, "CREATE TABLE t (a INT)")
        w.write_query(1, "INSERT INTO t VALUES (1)")
        w.write_commit(1)
        w.write_query(2, "INSERT INTO t VALUES (2)")
        w.write_query(3, "INSERT INTO t VALUES (3)")
        w.write_commit(3)
        _, bad = w.write_query(2, "INSERT INTO t VALUES (22)")  # txn 2 spans the corrupt frame
        w.write_commit(2)
        w.write_query(4, "INSERT INTO t VALUES (4)")
        w.write_commit(4)
    data = bytearray(log.read_bytes())
    data[bad + 5] ^= 0x40
    log.write_bytes(bytes(data))
    wh = tmp_path / "wh"
    for _ in range(2):  # a re-run stops at the same place and applies nothing twice
        assert main(["run", "--binlog", str(log), "--warehouse", str(wh)]) == 1
        out, err = capsys.readouterr()
        assert "bad CRC" in err and f"(byte offset {bad})" in err and str(log) in err
        assert "stopped: corrupt log, nothing after this point applied" in out
        assert tables(spark, wh) == {"default.t": (["a"], [(1,), (3,)])}
    state = load_state(wh / "_replicator" / "binlog.json")
    assert state.applied is not None and tuple(state.applied.gtid) == (1, 3)


def test_tables_lists_binlog_tables_and_both_sources(spark: Any, reference: Reference, tmp_path: Path) -> None:
    """`replicator tables` on a warehouse written by `run --binlog` (it used to fail: "not a
    replicator warehouse"), and on one holding tables of both sources."""
    listed = json.loads(cli_stdout("tables", "--warehouse", str(reference.wh), "--json"))
    state = load_state(reference.wh / "_replicator" / "binlog.json")
    live = sorted((t.db, t.table) for t in state.tables if t.status == "live")
    assert sorted((r["schema"], r["table"]) for r in listed) == live
    assert {r["source"] for r in listed} == {"binlog"} and all(r["applied_ts"] is None for r in listed)
    whatever = next(r for r in listed if r["table"] == "whatever")
    assert whatever["key"] == ["nick"] and (Path(whatever["path"]) / "_delta_log").is_dir()
    assert set(whatever) == {"schema", "table", "path", "key", "applied_ts", "source", "reader_features", "rows",
                             "readers", "reader_changes", "catalog"}
    assert whatever["reader_features"] == ["columnMapping", "deletionVectors"]
    assert "commit #6" in cli_stdout("tables", "--warehouse", str(reference.wh))

    wh = tmp_path / "wh"
    log = tmp_path / "log.bin"
    with BinlogWriter(log) as w:
        w.write_query(1, "CREATE TABLE b (id INT PRIMARY KEY)")
        w.write_commit(1)
    BinlogApplier(wh, spark).run([log])
    kafka_wh = Warehouse(wh)
    spec = spec_from_create("CREATE TABLE k (id INT PRIMARY KEY, v TEXT)", "shop")
    path = kafka_wh.new_table_path("shop", "k", "u1")
    TableWriter(spark).create_table(path, spec)
    kafka_wh.save_state(State(applied_ts=42, tables={"u1": TableEntry(
        uid="u1", schema="shop", table="k", path=path, spec=spec.to_json())}))
    both = json.loads(cli_stdout("tables", "--warehouse", str(wh), "--json"))
    assert [(r["source"], r["schema"], r["table"], r["key"], r["applied_ts"]) for r in both] == [
        ("kafka", "shop", "k", ["id"], 42), ("binlog", "default", "b", ["id"], None)]
    readable = cli_stdout("tables", "--warehouse", str(wh))
    assert "kafka" in readable and "binlog" in readable


def test_concurrent_commit_during_a_statement_is_retried_exactly_once(spark: Any, tmp_path: Path) -> None:
    """A user's OPTIMIZE committing while a binlog DELETE / UPDATE runs: Delta rejects the statement,
    the applier re-runs it (as the Kafka engine does its MERGEs) and the run ends exactly right."""
    log = tmp_path / "log.bin"
    with BinlogWriter(log) as w:
        w.write_query(1, "CREATE TABLE t (id INT PRIMARY KEY, n INT)")
        w.write_commit(1)
        w.write_query(2, "INSERT INTO t VALUES (1, 10), (2, 20)")  # two Delta files for OPTIMIZE to compact
        w.write_commit(2)
        w.write_query(3, "INSERT INTO t VALUES (3, 30), (4, 40)")
        w.write_commit(3)
    wh = tmp_path / "wh"
    assert BinlogApplier(wh, spark).run([log]).applied == 3
    path = next(t.path for t in load_state(wh / "_replicator" / "binlog.json").tables)
    gate = CommitDuringScan(spark, tmp_path)
    with BinlogWriter(log) as w:
        w.write_query(4, "DELETE FROM t WHERE gate(id) = 2")
        w.write_query(4, "UPDATE t SET n = gate(n) + 1 WHERE id = 3")
        w.write_commit(4)
    user = threading.Thread(target=gate.user, args=(path,), daemon=True)
    user.start()
    applier = BinlogApplier(wh, spark)
    try:
        summary = applier.run([log])
    finally:
        gate.committed.touch()
        user.join(timeout=600)
    assert gate.failure is None, repr(gate.failure)
    assert gate.ops and not gate.ops[0].startswith("OPTIMIZE removed 0"), gate.ops
    assert applier.delta.conflict_retries >= 1, "the statement never met the concurrent commit"
    assert (summary.applied, summary.skipped, summary.statements) == (1, 3, 2)
    assert tables(spark, wh) == {"default.t": (["id", "n"], [(1, 10), (3, 31), (4, 40)])}
    history = spark.sql(f"DESCRIBE HISTORY delta.{q(path)}").collect()
    ops = [h["operation"] for h in sorted(history, key=lambda h: h["version"])]
    assert ops.count("DELETE") == 1 and ops.count("UPDATE") == 1 and "OPTIMIZE" in ops, ops
