"""A table directory left by a crash inside CREATE TABLE (a `_delta_log` without any commit) is
removed before creating the table again; a real table is never touched."""

from __future__ import annotations

from pathlib import Path

from replicator.delta.merge import clear_unborn_table


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
