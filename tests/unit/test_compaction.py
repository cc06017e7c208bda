"""A follower's compaction between steps (engine/compaction.py): a table is looked at once it has
had `min_small_files` writes, compacted when it holds that many small files, the busiest first,
and compaction never takes more than its share of the run's time (plus the one in progress).
When none is due, the table vacuumed longest ago is, a seventh of the retention after its last
VACUUM (at most a day) and only if written since, never below the table's own retention."""

from __future__ import annotations

from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.engine import compaction
from replicator.engine.compaction import SHARE, Compactor
from replicator.errors import LeaseLostError
from replicator.maintenance import MaintainOptions

SMALL = 1000  # bytes: under half the 4 KB target


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Maintainer:
    """Compacts a table of `files` (path -> live file sizes) into one file, taking `takes` s."""

    def __init__(self, files: dict[str, list[int]], clock: _Clock, takes: float = 1.0,
                 fails: Exception | None = None) -> None:
        self.delta = cast(Any, files)
        self.files, self.clock, self.takes, self.fails = files, clock, takes, fails
        self.compacted: list[str] = []

        self.vacuumed: list[tuple[str, float]] = []
        self.floor = 168.0

    def floor_hours(self, path: str) -> float:
        return self.floor

    def vacuum(self, path: str, name: str, hours: float) -> tuple[list[str], dict[str, int]]:
        self.clock.now += self.takes
        if self.fails is not None:
            raise self.fails
        self.vacuumed.append((name, hours))
        return ["old.parquet"], {"old.parquet": 700, "live.parquet": 1}

    def compact(self, path: str, name: str) -> None:
        self.clock.now += self.takes
        if self.fails is not None:
            raise self.fails
        self.compacted.append(name)
        self.files[path] = [sum(self.files[path])]


@pytest.fixture(autouse=True)
def _sizes_from_the_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "live_file_sizes", lambda delta, path, known=None: list(delta[path]))


def _compactor(m: _Maintainer, clock: _Clock, threshold: int = 3, retention: float = 168.0,
               vacuumed: dict[str, float] | None = None) -> Compactor:
    options = MaintainOptions(target_file_bytes=4096, min_small_files=threshold, retention_hours=retention)
    return Compactor(lambda: cast(Any, m), options, clock=clock, wall=clock,
                     vacuumed=(lambda: vacuumed) if vacuumed is not None else None)


def _step(c: Compactor, m: _Maintainer, clock: _Clock, paths: list[str], seconds: float = 2.0) -> bool:
    """A step that writes one small file to each of `paths`, then what runs between steps."""
    clock.now += seconds
    for p in paths:
        m.files.setdefault(p, []).append(SMALL)
    c.wrote((p, f"s.{p}", p) for p in paths)
    return c.between_steps()


def test_a_table_is_compacted_once_it_holds_enough_small_files() -> None:
    clock = _Clock()
    m = _Maintainer({}, clock)
    c = _compactor(m, clock)
    assert [_step(c, m, clock, ["a"]) for _ in range(3)] == [False, False, True]
    assert m.files["a"] == [3 * SMALL] and m.compacted == ["s.a"]
    # a big file does not count: two more writes are not enough, the third is
    assert [_step(c, m, clock, ["a"], seconds=20) for _ in range(3)] == [False, False, True]
    assert c.compacted == 2 and c.files_compacted == 6


def test_when_a_table_was_compacted_is_kept_only_when_it_was() -> None:
    clock, compacted = _Clock(), {}
    m = _Maintainer({"big": [10**6] * 5}, clock)
    options = MaintainOptions(target_file_bytes=4096, min_small_files=3)
    c = Compactor(lambda: cast(Any, m), options, clock=clock, wall=clock, compacted=lambda: compacted)
    c.wrote([("big", "s.big", "big")] * 3)  # looked at, holds no small file: not compacted
    clock.now += 20
    assert not c.between_steps() and compacted == {}
    assert [_step(c, m, clock, ["a"], 20) for _ in range(3)] == [False, False, True]
    assert compacted == {"a": 81.0}  # by uid, at the wall clock of the compaction's end (80 + 1 s)
    m.fails = RuntimeError("concurrent update")
    assert [_step(c, m, clock, ["a"], 20) for _ in range(3)] == [False, False, False]
    assert compacted == {"a": 81.0}


def test_the_busiest_table_goes_first_and_a_big_one_is_left_alone() -> None:
    clock = _Clock()
    m = _Maintainer({"big": [10**6] * 5}, clock)
    c = _compactor(m, clock)
    _step(c, m, clock, ["a", "b"], 20)
    _step(c, m, clock, ["a", "b"], 20)
    c.wrote([("big", "s.big", "big")] * 4)  # four writes of large files: looked at first, not compacted
    assert not _step(c, m, clock, ["a"], 20)
    assert _step(c, m, clock, [], 20) and m.compacted == ["s.a"]  # then a (3 writes), one a step
    assert _step(c, m, clock, ["b"], 20) and m.compacted == ["s.a", "s.b"]
    assert not _step(c, m, clock, [], 20) and m.files["big"] == [10**6] * 5


def test_a_failure_is_logged_and_a_lost_lease_is_raised() -> None:
    clock = _Clock()
    m = _Maintainer({}, clock, fails=RuntimeError("concurrent update"))
    c = _compactor(m, clock)
    assert [_step(c, m, clock, ["a"], 60) for _ in range(3)] == [False, False, False]
    assert c.compacted == 0 and c.seconds == 1.0
    m.fails = LeaseLostError("lost")
    for _ in range(2):
        _step(c, m, clock, ["a"], 60)
    with pytest.raises(LeaseLostError):
        _step(c, m, clock, ["a"], 60)


@settings(max_examples=80, deadline=None)
@given(steps=st.lists(st.tuples(st.floats(0.1, 10), st.sets(st.sampled_from("abcde"), max_size=5)), max_size=120),
       takes=st.floats(0.1, 30), threshold=st.integers(2, 6))
def test_compaction_stays_within_its_share_of_the_run(steps: list[tuple[float, set[str]]], takes: float,
                                                      threshold: int) -> None:
    clock = _Clock()
    m = _Maintainer({}, clock, takes=takes)
    c = _compactor(m, clock, threshold, retention=0.01, vacuumed={})  # and VACUUMs every few seconds
    for seconds, paths in steps:
        _step(c, m, clock, sorted(paths), seconds)
        assert c.seconds <= SHARE * clock.now + takes + 1e-9  # the share, and at most one over it
    for path, sizes in m.files.items():  # every table's small files stay bounded
        pending = sum(1 for s in sizes if s < 2048)
        assert pending < threshold + 1 + len(steps), (path, sizes)


def test_vacuum_every_is_a_seventh_of_the_retention_at_most_a_day() -> None:
    assert compaction.vacuum_every(168) == 86400 and compaction.vacuum_every(24 * 70) == 86400
    assert compaction.vacuum_every(24) == pytest.approx(24 * 3600 / 7) and compaction.vacuum_every(0) == 0


def test_a_table_is_vacuumed_once_its_turn_comes_and_only_if_written_since() -> None:
    clock, vacuumed = _Clock(), {"b": -10**6}  # b: vacuumed long ago by an earlier run
    m = _Maintainer({}, clock)
    c = _compactor(m, clock, threshold=100, vacuumed=vacuumed)
    day = 86400.0
    _step(c, m, clock, ["a"], 60)  # a first seen: counts as vacuumed now, nothing older to remove
    assert m.vacuumed == [] and vacuumed["a"] == 60
    _step(c, m, clock, ["b"], 60)  # b is long due
    assert m.vacuumed == [("s.b", 168.0)] and vacuumed["b"] == 121 and c.vacuumed_bytes == 700
    _step(c, m, clock, ["a", "b"], day)  # a's day has passed; b's has not
    assert m.vacuumed == [("s.b", 168.0), ("s.a", 168.0)]
    _step(c, m, clock, [], day)  # b is due, and written since: vacuumed; a is not written since
    _step(c, m, clock, [], day)
    _step(c, m, clock, [], day)
    assert [n for n, _ in m.vacuumed] == ["s.b", "s.a", "s.b"] and c.vacuums == 3


def test_compaction_goes_before_a_vacuum_and_a_vacuum_never_below_the_tables_retention(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    m = _Maintainer({}, clock)
    m.floor = 48.0
    c = _compactor(m, clock, threshold=2, retention=1.0, vacuumed={})
    assert [_step(c, m, clock, ["a"], 3600) for _ in range(2)] == [False, True]  # compacted, not vacuumed
    assert m.vacuumed == []
    _step(c, m, clock, ["a"], 3600)
    _step(c, m, clock, ["a"], 3600)  # compacted again
    _step(c, m, clock, ["a"], 3600)
    assert m.vacuumed == [("s.a", 48.0), ("s.a", 48.0)]  # its own 48 hours, not the run's 1
    assert sum("deletedFileRetentionDuration" in r.getMessage() for r in caplog.records) == 1  # said once


def test_without_a_vacuum_record_a_follower_never_vacuums_and_a_failed_one_waits_its_turn() -> None:
    clock = _Clock()
    m = _Maintainer({}, clock)
    c = _compactor(m, clock, threshold=100)  # no `vacuumed` store: no VACUUM at all
    for _ in range(3):
        _step(c, m, clock, ["a"], 86400)
    assert m.vacuumed == [] and c.vacuum_due() is None
    vacuumed: dict[str, float] = {"a": 0.0}
    m.fails = RuntimeError("slow store")
    c = _compactor(m, clock, threshold=100, vacuumed=vacuumed)
    _step(c, m, clock, ["a"], 60)
    assert c.vacuums == 0 and vacuumed["a"] == clock.now, "failed: tried again after its interval"
    m.fails = LeaseLostError("lost")
    _step(c, m, clock, ["a"], 86400 - 1)
    with pytest.raises(LeaseLostError):
        _step(c, m, clock, ["a"], 60)
