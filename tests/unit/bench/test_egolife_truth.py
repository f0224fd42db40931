from datetime import UTC, datetime, timedelta

import pytest

from bench.egolife.truth import (
    Ranked,
    aggregate,
    hit_at,
    intersection_length,
    iou,
    score,
    truth_intervals,
    union,
)

T0 = datetime(2025, 1, 1, 11, 0, 0, tzinfo=UTC)
B = T0.timestamp()


def seg(offset_s: int, scale: int) -> Ranked:
    start = T0 + timedelta(seconds=offset_s)
    return Ranked(start=start, end=start + timedelta(seconds=scale), scale=scale)


def test_union_merges_overlapping_and_touching():
    assert union([(5, 8), (0, 2), (2, 3), (7, 10), (20, 20)]) == [(0, 3), (5, 10)]


def test_intersection_and_iou_by_hand():
    a, b = [(0, 10), (20, 30)], [(5, 25)]
    assert intersection_length(a, b) == 10
    assert iou(a, b) == pytest.approx(10 / 30)
    assert iou([(0, 10)], [(0, 10)]) == 1.0
    assert iou([(0, 10)], [(10, 20)]) == 0.0
    assert iou([], []) == 0.0


def test_truth_is_the_union_of_30s_windows_holding_the_points():
    points = [T0 + timedelta(seconds=s) for s in (2, 29, 31, 95)]
    assert truth_intervals(points) == [(B, B + 60), (B + 90, B + 120)]


def test_point_on_a_boundary_belongs_to_the_window_it_starts():
    assert truth_intervals([T0 + timedelta(seconds=30)]) == [(B + 30, B + 60)]


def test_hit_at_k_counts_only_segments_of_3_min_or_less():
    g = truth_intervals([T0 + timedelta(seconds=40)])  # [30, 60)
    coarse = seg(0, 600)  # overlaps G but is 10 min
    assert not hit_at([coarse], g, 1)
    assert hit_at([seg(0, 180)], g, 1)
    ranked = [seg(300, 30), coarse, seg(30, 30)]
    assert not hit_at(ranked, g, 1)
    assert not hit_at(ranked, g, 2)
    assert hit_at(ranked, g, 3)


def test_touching_is_not_overlapping():
    g = truth_intervals([T0 + timedelta(seconds=40)])  # [30, 60)
    assert not hit_at([seg(0, 30), seg(60, 30)], g, 3)


def test_score_coarse_segments_pay_in_iou():
    g = truth_intervals([T0 + timedelta(seconds=40)])
    exact = score([seg(30, 30)], g)
    coarse = score([seg(0, 3600)], g)
    assert (exact.hit1, exact.tiou) == (True, 1.0)
    assert (coarse.hit1, coarse.hit3) == (False, False)
    assert coarse.tiou == pytest.approx(30 / 3600)


def test_iou_uses_only_the_top_three():
    g = truth_intervals([T0 + timedelta(seconds=200)])  # [180, 210)
    s = score([seg(0, 30), seg(30, 30), seg(60, 30), seg(180, 30)], g)
    assert (s.hit3, s.tiou) == (False, 0.0)


def test_aggregate_means():
    g = truth_intervals([T0])
    scores = [score([seg(0, 30)], g), score([seg(60, 30)], g)]
    agg = aggregate(scores)
    assert agg == {"hit@1": 0.5, "hit@3": 0.5, "tiou": 0.5, "n": 2}
    assert aggregate([])["n"] == 0
