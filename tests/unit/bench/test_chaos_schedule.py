"""The chaos benchmark's pure parts: the seeded fault schedule and the memory comparisons."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.chaos import ChaosConfig, fault_schedule
from bench.chaos_checks import (
    Memory,
    compare_with_reference,
    implied_windows,
    reported_lost,
    window_figures,
)


def test_schedule_hits_every_target_the_asked_number_of_times_in_order():
    cfg = ChaosConfig(users=1, minutes=20, seed=3, faults_per_target=3)
    faults = fault_schedule(cfg)
    assert Counter(f.target for f in faults) == {t: 3 for t in cfg.targets}
    times = [f.at_s for f in faults]
    assert times == sorted(times)
    assert cfg.lead_s <= times[0] and times[-1] <= cfg.stream_s - cfg.tail_s
    assert all(cfg.down_s[0] <= f.down_s <= cfg.down_s[1] for f in faults)
    assert fault_schedule(cfg) == faults  # the seed decides everything
    assert fault_schedule(ChaosConfig(users=1, minutes=20, seed=4, faults_per_target=3)) != faults


def test_a_stream_too_short_for_faults_is_refused():
    with pytest.raises(ValueError, match="too short"):
        fault_schedule(ChaosConfig(minutes=0.5, faults_per_target=1))
    assert fault_schedule(ChaosConfig(minutes=0.5, faults_per_target=0)) == []


def test_implied_windows_cover_every_scale_of_the_stream():
    t0 = 1_700_000_400_000 - 1_700_000_400_000 % 600_000  # a 10 min boundary
    got = implied_windows(["u"], t0, 90_000)
    assert sorted(s for _, s, _ in got) == [30, 30, 30, 180, 600, 3600]


def test_figures_count_missing_failed_and_differences():
    expected = {("u", 30, 0), ("u", 30, 30_000), ("u", 180, 0)}
    chaos, ref = Memory(), Memory()
    for m in (chaos, ref):
        m.segments[("u", 30, 0)] = ("complete", "a", None, False)
        m.segments[("u", 180, 0)] = ("complete", "sum", None, True)
    chaos.segments[("u", 30, 30_000)] = ("failed", None, None, False)
    ref.segments[("u", 30, 30_000)] = ("complete", "b", None, False)
    for k in chaos.segments:
        chaos.segment_rows[k] += 1
    chaos.semantic_active[("u", "alice", "likes", "tea")] = 1
    ref.semantic_active[("u", "alice", "likes", "coffee")] = 1
    figures = window_figures(expected, chaos)
    assert figures == {"expected": 3, "built": 2, "missing": 1, "failed": 1,
                       "duplicated": 0, "unexpected": 0}  # fmt: skip
    diff = compare_with_reference(chaos, ref)
    assert diff["windows_with_other_text"] == 1
    assert diff["semantic_facts_differing"] == 2
    log = (
        "x worldmm.dataflow.input_gaps input_lost topic=t.frames partition=0 offsets=[10, 50)"
        " records=40 reason=log_end_below_position resume_at=10\n"
        "y input_lost topic=t.audio partition=1 offsets=[3, 6) records=3 reason=earliest_above\n"
    )
    assert reported_lost(log) == {"records": 43, "gaps": 2}
    assert reported_lost("") == {"records": 0, "gaps": 0}
