"""`replicator status` without Spark or Kafka: a hand-built warehouse (state, step log, lease, Delta
logs, a dead-letter table of real Parquet files), the lease's views, the step log's last record,
the Delta version from the log, and the command's JSON and plain forms (read-only: no file changes)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from replicator.cli import main
from replicator.cli.common import age_text, maintained_text
from replicator.delta.rowcount import log_version, read_snapshot
from replicator.events import tso_from_datetime
from replicator.progress import Progress
from replicator.storage import fileio_for
from replicator.storage.lease import Holder
from replicator.storage.steplog import StepLog
from replicator.views.status import dead_letter_reason, lease_view, step_outcome, warehouse_status, watermark_age_s
from replicator.warehouse import State, TableEntry, Warehouse

NOW = dt.datetime(2026, 11, 25, 12, 0, 0, tzinfo=dt.UTC)
WATERMARK = tso_from_datetime(NOW - dt.timedelta(seconds=30), logical=7)


def _commit(log: Path, version: int, *actions: dict[str, Any]) -> None:
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _add(path: str, records: int, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    add: dict[str, Any] = {"path": path, "stats": json.dumps({"numRecords": records})}
    if dv:
        add["deletionVector"] = dv
    return {"add": add}


def _holder(**kw: Any) -> Holder:
    base: dict[str, Any] = {"holder": "h1", "host": "elsewhere", "pid": 4242, "boot": "b",
                            "since": NOW.timestamp() - 600, "expires_at": NOW.timestamp() + 40}
    base.update(kw)
    return Holder(**base)


def test_pure_pieces() -> None:
    assert dead_letter_reason("DecodeError: bad frame at 3: x") == "DecodeError"
    assert dead_letter_reason("DdlError: cannot alter") == "DdlError"
    assert dead_letter_reason("no exception name") == "other" and dead_letter_reason(None) == "other"
    assert watermark_age_s(WATERMARK, NOW.timestamp()) == 30.0
    assert step_outcome({"step": 3, "kind": "window"}) == "applied"
    assert step_outcome({"step": 4, "kind": "ddl", "ddls": [{"outcome": "created: t"},
                                                           {"outcome": "skipped: DdlError x"}]}) \
        == "applied, 1 of 2 DDLs skipped (dead-lettered)"
    assert step_outcome({"step": 5, "ddl": {"outcome": "skipped: y"}}) == "applied, 1 of 1 DDL skipped (dead-lettered)"

    now = NOW.timestamp()
    live, last = lease_view(_holder(), now)
    assert last is None and live == {"host": "elsewhere", "pid": 4242, "since": "2026-11-25T11:50:00.000+00:00",
                                     "expires_at": "2026-11-25T12:00:40.000+00:00"}
    assert lease_view(_holder(expires_at=now - 1), now)[0] is None
    assert lease_view(_holder(expires_at=now - 1), now)[1]["ended"] == "expired"  # type: ignore[index]
    assert lease_view(_holder(released=True), now)[1]["ended"] == "released"  # type: ignore[index]
    assert lease_view(None, now) == (None, None)


def test_a_holder_whose_process_is_gone_on_this_machine_holds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from replicator.storage import lease

    # This boot's id as the lease module reads it (fixed, so the test runs where /proc has none).
    monkeypatch.setattr(lease, "boot_id", lambda: "boot-under-test")
    boot_id = lease.boot_id
    import subprocess
    import sys

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    here = {"host": socket.gethostname(), "boot": boot_id(), "pidns": lease.pid_namespace()}
    h = _holder(**here, pid=gone.pid, start=1, expires_at=time.time() + 60)
    live, last = lease_view(h, time.time())
    assert live is None and last is not None and last["ended"] == "process gone"
    mine = _holder(**here, pid=os.getpid(), start=lease.process_start(os.getpid()), expires_at=time.time() + 60)
    assert lease_view(mine, time.time())[0] is not None


def test_step_log_last_record_skips_a_torn_line(tmp_path: Path) -> None:
    log = StepLog(fileio_for(str(tmp_path)), str(tmp_path))
    assert log.last() is None
    for n in (1, 2, 2):
        log.append({"step": n, "applied_ts": 10 * n, "again": n})
    with open(tmp_path / "windows.jsonl", "ab") as f:
        f.write(b'{"step": 3, "appl')
    assert log.last() == {"step": 2, "applied_ts": 20, "again": 2}


def test_step_log_last_record_on_a_store_without_append(tmp_path: Path) -> None:
    """An object store's log is segments: only the last one is read."""
    from replicator.storage.local import LocalFileIO
    from replicator.storage.steplog import SEGMENT_RECORDS

    class NoAppend(LocalFileIO):
        can_append = False

    log = StepLog(NoAppend(), str(tmp_path))
    assert log.last() is None
    for n in range(1, SEGMENT_RECORDS + 3):
        log.append({"step": n})
    assert len(list((tmp_path / "windows").iterdir())) == 2
    assert StepLog(NoAppend(), str(tmp_path)).last() == {"step": SEGMENT_RECORDS + 2}


def test_log_version_and_snapshot_version(tmp_path: Path) -> None:
    log = tmp_path / "t" / "_delta_log"
    assert log_version(str(tmp_path / "t")) is None and read_snapshot(str(tmp_path / "t")) is None
    _commit(log, 0, {"protocol": {"minReaderVersion": 1}}, _add("a.parquet", 4))
    _commit(log, 1, {"remove": {"path": "a.parquet"}}, _add("b.parquet", 6))
    snap = read_snapshot(str(tmp_path / "t"))
    assert snap is not None and (snap.version, snap.rows) == (1, 6)
    (log / f"{2:020d}.checkpoint.parquet").write_bytes(b"")  # a listed checkpoint counts as a version
    assert log_version(str(tmp_path / "t")) == 2


def _warehouse(tmp_path: Path) -> Warehouse:
    """A Kafka warehouse: two tables (one with a deletion vector), three logged steps (the last
    with a skipped DDL), a live lease of another machine, three dead letters in two files."""
    wh = Warehouse(tmp_path / "wh")
    tables = {}
    for uid, name, version_rows in (("u1", "orders", [(0, 5), (1, 3)]), ("u2", "items", [(0, 2)])):
        path = wh.new_table_path("shop", name, uid)
        for v, rows in version_rows:
            _commit(Path(path) / "_delta_log", v, _add(f"part-{v}.parquet", rows))
        tables[uid] = TableEntry(uid=uid, schema="shop", table=name, path=path,
                                 spec={"schema": "shop", "table": name, "columns": [], "key": ["id"]})
    _commit(Path(tables["u1"].path) / "_delta_log", 2,
            _add("part-0.parquet", 5, {"storageType": "u", "pathOrInlineDv": "x", "cardinality": 1}),
            {"remove": {"path": "part-0.parquet"}})
    state = State(progress=Progress.from_wire(WATERMARK, {}, []), tables=tables, steps=3, source="kafka",
                  protocol="open", compacted={"u1": NOW.timestamp() - 7200},
                  vacuumed={"u1": NOW.timestamp() - 2 * 86400 - 60})
    wh.save_state(state)
    for n in (1, 2, 3):
        rec: dict[str, Any] = {"step": n, "hi": WATERMARK, "applied_ts": WATERMARK, "kind": "window",
                               "recorded_at": (NOW - dt.timedelta(seconds=20 - n)).isoformat(),
                               "tables": {"u1": {"version": n}}}
        if n == 3:
            rec.update(kind="ddl", ddls=[{"query": "ALTER TABLE x", "outcome": "skipped: DdlError: no"}])
        wh.log_step(rec)
    wh.lease_path.io.write(wh.lease_path.path, _holder().to_json())
    dead = Path(wh.dead_letters_path.path)
    dead.mkdir(parents=True)
    for name, errors in (("d0.parquet", ["DecodeError: a", "DecodeError: b"]), ("d1.parquet", ["DdlError: c"])):
        pq.write_table(pa.table({"topic": ["t"] * len(errors), "error": errors}), dead / name)
    _commit(dead / "_delta_log", 0, _add("d0.parquet", 2))
    _commit(dead / "_delta_log", 1, _add("d1.parquet", 1))
    return wh


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_status_of_a_hand_built_warehouse(tmp_path: Path) -> None:
    wh = _warehouse(tmp_path)
    doc = warehouse_status(wh.root, now=NOW.timestamp()).to_json()
    assert doc["warehouse"] == wh.root
    assert doc["applied_watermark"] == WATERMARK and doc["applied_watermark_age_s"] == 30.0
    assert doc["applied_watermark_time"] == "2026-11-25T11:59:30.000+00:00"
    assert doc["last_step"] == {"step": 3, "time": (NOW - dt.timedelta(seconds=17)).isoformat(), "age_s": 17.0,
                                "outcome": "applied, 1 of 1 DDL skipped (dead-lettered)", "kind": "ddl",
                                "applied_ts": WATERMARK, "tables": 1,
                                "ddls": [{"query": "ALTER TABLE x", "outcome": "skipped: DdlError: no"}]}
    assert doc["holder"] == {"host": "elsewhere", "pid": 4242, "since": "2026-11-25T11:50:00.000+00:00",
                             "expires_at": "2026-11-25T12:00:40.000+00:00"}
    assert doc["last_holder"] is None
    assert doc["dead_letters"] == {"total": 3, "by_reason": {"DecodeError": 2, "DdlError": 1}}
    assert [(t["schema"], t["table"], t["delta_version"], t["rows"], t["applied_ts"], t["source"])
            for t in doc["tables"]] == [("shop", "items", 0, 2, WATERMARK, "kafka"),
                                        ("shop", "orders", 2, 7, WATERMARK, "kafka")]
    assert all(set(t) == {"schema", "table", "path", "delta_version", "rows", "applied_ts", "source"}
               for t in doc["tables"])  # files and maintenance on a terminal only: the JSON keeps its shape
    # after the lease ran out: nobody, naming the last holder
    later = warehouse_status(wh.root, now=NOW.timestamp() + 3600).to_json()
    assert later["holder"] is None and later["last_holder"]["ended"] == "expired"


def test_a_terminal_shows_files_and_when_each_table_was_last_maintained(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    wh = _warehouse(tmp_path)
    st = warehouse_status(wh.root, now=NOW.timestamp())
    assert [(t.table, t.compacted_at, t.vacuumed_at) for t in st.tables] == [
        ("items", None, None), ("orders", NOW.timestamp() - 7200, NOW.timestamp() - 2 * 86400 - 60)]
    assert maintained_text(None, None, 0) == "-"
    assert maintained_text(NOW.timestamp() - 7200, NOW.timestamp() - 172860, NOW.timestamp()) == \
        "compacted 2h ago, vacuumed 2d ago"
    assert [age_text(s) for s in (-1, 59.9, 60, 3599, 3600, 86399, 86400 * 9)] == \
        ["0s", "59s", "1m", "59m", "1h", "23h", "9d"]
    monkeypatch.setenv("COLUMNS", "400")  # one line a table
    capsys.readouterr()
    for command in ("status", "tables"):
        monkeypatch.setattr("sys.stdout.isatty", lambda: True)
        assert main([command, "--warehouse", wh.root]) == 0
        out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # the terminal's styles
        assert "maintained" in out and re.search(r"compacted \d+d ago, vacuumed \d+d ago", out), out
        items = next(line for line in out.splitlines() if " items " in line)
        assert "compacted" not in items and " - " in items


def test_status_command_json_and_plain_and_read_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wh = _warehouse(tmp_path)
    before = _files(tmp_path)
    capsys.readouterr()
    assert main(["status", "--warehouse", wh.root, "--json"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert out.count("\n") == 1 and set(doc) == {
        "warehouse", "applied_watermark", "applied_watermark_time", "applied_watermark_age_s", "last_step",
        "holder", "last_holder", "dead_letters", "tables"}
    assert doc["holder"] is None and doc["last_holder"]["ended"] == "expired"  # its term ended in 2026-11-25 12:00
    assert main(["status", "--warehouse", wh.root]) == 0  # capsys: not a terminal -> plain lines
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"warehouse: {wh.root}"
    assert lines[1].startswith(f"applied watermark: {WATERMARK} (2026-11-25T11:59:30.000+00:00, ")
    assert lines[2].startswith("last step: 3 (ddl) at ") and lines[2].endswith(": applied, 1 of 1 DDL skipped "
                                                                                 "(dead-lettered)")
    assert lines[3] == "held by: nobody (last holder host elsewhere, pid 4242, expired, lease until " \
                       "2026-11-25T12:00:40.000+00:00)"
    assert lines[4] == "dead letters: 3 (DecodeError 2, DdlError 1)"
    assert lines[6].split("\t") == ["schema", "table", "delta_version", "rows", "applied_ts", "path"]
    assert [line.split("\t")[:4] for line in lines[7:]] == [["shop", "items", "0", "2"], ["shop", "orders", "2", "7"]]
    assert _files(tmp_path) == before, "status must not write anything"


def test_status_of_an_empty_directory_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["status", "--warehouse", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("replicator status: error: ") and "is not a replicator warehouse" in err
    assert list(tmp_path.iterdir()) == []
