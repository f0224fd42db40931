"""The detection budget: a bucket of CPU-seconds refilled at the configured cores, holding
one window's worth, which the sampled frames may empty and the others only the upper half."""

from __future__ import annotations

import pytest

from tests.fixtures.clocks import ManualClock
from worldmm.privacy.detect_budget import DetectionBudget


def test_the_bucket_refills_at_the_cores_and_holds_one_window() -> None:
    clock = ManualClock()
    budget = DetectionBudget(0.5, burst_s=30, clock=clock)  # holds 15 CPU-seconds
    assert budget.capacity == 15
    budget.charge(15)
    assert not budget.allows(sampled=True)  # empty
    clock.now = 4.0  # 2 CPU-seconds earned
    assert budget.allows(sampled=True) and not budget.allows(sampled=False)
    clock.now = 1000.0  # idle a long time: full, not more
    budget.charge(15)
    assert not budget.allows(sampled=True)


def test_sampled_frames_may_empty_it_the_others_only_half() -> None:
    budget = DetectionBudget(1.0, burst_s=10, clock=ManualClock())
    budget.charge(4.5)  # 5.5 left: above half
    assert budget.allows(sampled=False)
    budget.charge(1)  # 4.5 left
    assert not budget.allows(sampled=False) and budget.allows(sampled=True)
    budget.charge(6)  # a detection already under way: a debt the refill pays back
    assert not budget.allows(sampled=True)


def test_no_cores_allows_nothing_and_bad_values_are_refused() -> None:
    assert not DetectionBudget(0.0).allows(sampled=True)
    with pytest.raises(ValueError):
        DetectionBudget(-1.0)
    with pytest.raises(ValueError):
        DetectionBudget(1.0, burst_s=0)
