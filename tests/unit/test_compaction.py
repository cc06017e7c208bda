"""A follower's compaction between steps (engine/compaction.py): a table is looked at once it has
had `min_small_files` writes, compacted when it holds that many small files, the busiest first,
and compaction never takes more than its share of the run's time (plus the one in progress)."""

from __future__ import annotations

from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.delta.maintenance import MaintainOptions
from replicator.engine import compaction
from replicator.engine.compaction import SHARE, Compactor
from replicator.errors import LeaseLostError

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
        self.edge = cast(Any, files)
        self.files, self.clock, self.takes, self.fails = files, clock, takes, fails
        self.compacted: list[str] = []

    def compact(self, path: str, name: str) -> None:
        self.clock.now += self.takes
        if self.fails is not None:
            raise self.fails
        self.compacted.append(name)
        self.files[path] = [sum(self.files[path])]


@pytest.fixture(autouse=True)
def _sizes_from_the_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "live_file_sizes", lambda edge, path: list(edge[path]))


def _compactor(m: _Maintainer, clock: _Clock, threshold: int = 3) -> Compactor:
    return Compactor(lambda: cast(Any, m), MaintainOptions(target_file_bytes=4096, min_small_files=threshold),
                     clock=clock)


def _step(c: Compactor, m: _Maintainer, clock: _Clock, paths: list[str], seconds: float = 2.0) -> bool:
    """A step that writes one small file to each of `paths`, then what runs between steps."""
    clock.now += seconds
    for p in paths:
        m.files.setdefault(p, []).append(SMALL)
    c.wrote((p, f"s.{p}") for p in paths)
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


def test_the_busiest_table_goes_first_and_a_big_one_is_left_alone() -> None:
    clock = _Clock()
    m = _Maintainer({"big": [10**6] * 5}, clock)
    c = _compactor(m, clock)
    _step(c, m, clock, ["a", "b"], 20)
    _step(c, m, clock, ["a", "b"], 20)
    c.wrote([("big", "s.big")] * 4)  # four writes of large files: looked at first, not compacted
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
    c = _compactor(m, clock, threshold)
    for seconds, paths in steps:
        _step(c, m, clock, sorted(paths), seconds)
        assert c.seconds <= SHARE * clock.now + takes + 1e-9  # the share, and at most one over it
    for path, sizes in m.files.items():  # every table's small files stay bounded
        pending = sum(1 for s in sizes if s < 2048)
        assert pending < threshold + 1 + len(steps), (path, sizes)
