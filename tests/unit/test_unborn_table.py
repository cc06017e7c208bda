"""A table directory left by a crash inside CREATE TABLE (a `_delta_log` without any commit) is
removed before creating the table again, only while this run holds the warehouse's lease and only
the files it listed; a real table is never touched."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.delta.writer import clear_unborn_table
from replicator.errors import LeaseLostError
from replicator.storage.lease import Lease
from replicator.storage.local import LocalFileIO


def test_log_without_commits_is_removed(tmp_path: Path) -> None:
    table = tmp_path / "t-1"
    (table / "_delta_log" / "_staged_commits").mkdir(parents=True)
    assert clear_unborn_table(str(table))
    assert not table.exists()


def test_committed_or_absent_tables_are_kept(tmp_path: Path) -> None:
    for name, commit in (("json", "00000000000000000000.json"),
                         ("checkpoint", "00000000000000000010.checkpoint.parquet"),
                         ("last", "_last_checkpoint")):
        log = tmp_path / name / "_delta_log"
        log.mkdir(parents=True)
        (log / commit).write_text("{}")
        assert not clear_unborn_table(str(tmp_path / name))
        assert (log / commit).exists()
    assert not clear_unborn_table(str(tmp_path / "absent"))
    (tmp_path / "plain").mkdir()
    assert not clear_unborn_table(str(tmp_path / "plain"))


def _unborn(tmp_path: Path) -> Path:
    table = tmp_path / "t-2"
    (table / "_delta_log" / "_staged_commits").mkdir(parents=True)
    (table / "_delta_log" / "_staged_commits" / "00000000000000000000.1b2c.json").write_text("{}")
    (table / "part-00000.parquet").write_bytes(b"PAR1")
    return table


def test_a_run_that_lost_its_lease_removes_nothing(tmp_path: Path) -> None:
    """The removal is fenced like a commit: the lease's new holder may be creating this table."""
    lease = Lease(LocalFileIO(), str(tmp_path / "lease.json"), seconds=30, what="warehouse W")
    lease.acquire()
    try:
        lease._lose("another replicator run took it over")  # private: a loss without a second process
        table = _unborn(tmp_path)
        before = sorted(p.relative_to(table) for p in table.rglob("*"))
        with pytest.raises(LeaseLostError) as err:
            clear_unborn_table(str(table), lease.check)
        assert err.value.exit_code == 3
        assert sorted(p.relative_to(table) for p in table.rglob("*")) == before
    finally:
        lease.release()


def test_only_the_files_of_one_listing_are_removed(tmp_path: Path) -> None:
    """A commit written between the listing and the removal (here: while the fence is checked) is
    kept with its directories; everything listed is gone."""
    table = _unborn(tmp_path)
    commit = table / "_delta_log" / "00000000000000000000.json"
    checked: list[bool] = []

    def fence() -> None:
        checked.append(True)
        commit.write_text("{}")  # another writer's CREATE TABLE lands now

    assert clear_unborn_table(str(table), fence)
    assert checked == [True]
    assert sorted(str(p.relative_to(table)) for p in table.rglob("*")) == ["_delta_log", f"_delta_log/{commit.name}"]
