"""The test-only fault-injection spec (REPLICATOR_FAULT): parsing and pass counting."""

from __future__ import annotations

import pytest

from replicator import faults


def test_spec_counts_passes_per_point() -> None:
    f = faults.FaultPlan("after_merge:3, mid_merge:2:0.5")
    assert f.plan == {"after_merge": (3, 0.0), "mid_merge": (2, 0.5)}
    assert [f.reached("after_merge") for _ in range(4)] == [False, False, True, False]
    assert not f.reached("before_progress")  # unplanned points are free
    assert [f.reached("mid_merge") for _ in range(2)] == [False, True]


@pytest.mark.parametrize("spec", ["after_merge", "nowhere:1", "after_merge:x", "mid_merge:1:2:3"])
def test_bad_spec_is_refused(spec: str) -> None:
    with pytest.raises(ValueError):
        faults.FaultPlan(spec)


def test_unset_means_no_faults() -> None:
    assert faults.ACTIVE is None  # the test run itself has no REPLICATOR_FAULT
    faults.fault_point("after_merge")  # a no-op
    faults.fault_timer("mid_merge")
