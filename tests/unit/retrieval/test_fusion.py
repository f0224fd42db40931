"""Pure ranking math: priors, reciprocal rank fusion, drill-down."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from worldmm.memory.retrieval.fusion import (
    Candidate,
    Fused,
    PriorParams,
    apply_prior,
    drill_down,
    rrf,
    top_coarse,
)
from worldmm.memory.retrieval.question_time import TimeConstraint

NOW = datetime(2025, 1, 2, 12, 0, tzinfo=UTC)


def cand(sid: int, hours_ago: float, score: float, scale: int = 30) -> Candidate:
    end = NOW - timedelta(hours=hours_ago)
    return Candidate(sid, scale, end - timedelta(seconds=scale), end, score)


def test_rrf_rewards_agreement_and_keeps_each_lanes_rank() -> None:
    lanes = {
        "lexical": [cand(1, 5, 9.0), cand(2, 4, 5.0)],
        "dense": [cand(3, 3, 0.8), cand(2, 4, 0.7)],
    }
    fused = rrf(lanes, {"lexical": 1.0, "dense": 1.0}, k=60)
    assert fused[0].segment_id == 2  # second in both lanes beats first in one
    assert fused[0].lanes == {"lexical": (2, 5.0), "dense": (2, 0.7)}
    assert {f.segment_id for f in fused} == {1, 2, 3}


def test_rrf_weights_decide_between_lanes() -> None:
    lanes = {"lexical": [cand(1, 5, 9.0)], "graph": [cand(2, 5, 0.1)]}
    assert rrf(lanes, {"lexical": 1.0, "graph": 0.5}, 60)[0].segment_id == 1
    assert rrf(lanes, {"lexical": 0.5, "graph": 1.0}, 60)[0].segment_id == 2


def test_recent_prior_lifts_the_newer_of_two_close_matches() -> None:
    lane = [cand(1, 30, 0.80), cand(2, 1, 0.78), cand(3, 2, 0.10)]
    params = PriorParams(
        default_weight=0.0,
        default_halflife_h=12.0,
        weight=2.0,
        halflife_h=3.0,
        importance_weight=0.0,
        recall_weight=0.0,
    )
    flat = apply_prior(lane, TimeConstraint(), NOW, params)
    assert [c.segment_id for c in flat] == [1, 2, 3]  # no phrase, no default prior
    recent = apply_prior(lane, TimeConstraint(prior="recent"), NOW, params)
    assert [c.segment_id for c in recent][:2] == [2, 1]
    assert recent[0].lane_score == 0.78  # the lane's own score is kept beside the weighted one


def test_early_prior_lifts_the_first_occurrence() -> None:
    lane = [cand(1, 1, 0.80), cand(2, 40, 0.75)]
    out = apply_prior(
        lane, TimeConstraint(prior="early"), NOW, PriorParams(0.5, 12.0, 2.0, 3.0, 0.0, 0.0)
    )
    assert out[0].segment_id == 2


def test_a_weak_match_is_not_rescued_by_recency_alone() -> None:
    lane = [cand(1, 20, 10.0), cand(2, 0.1, 0.5), cand(3, 19, 9.5)]
    out = apply_prior(lane, TimeConstraint(), NOW, PriorParams(0.5, 12.0, 2.0, 3.0, 0.0, 0.0))
    assert out[0].segment_id == 1 and out[-1].segment_id == 2


def fused(sid: int, scale: int, score: float) -> Fused:
    start = NOW - timedelta(hours=1)
    return Fused(sid, scale, start, start + timedelta(seconds=scale), score)


def test_drill_down_replaces_a_coarse_segment_by_its_best_windows() -> None:
    ranked = [fused(10, 600, 0.9), fused(1, 30, 0.5), fused(11, 180, 0.4)]
    children = {10: [fused(2, 30, 0.3), fused(3, 30, 0.2), fused(4, 30, 0.1)]}
    picks = drill_down(ranked, children, keep=3, per_parent=2)
    assert [p.fused.segment_id for p in picks] == [2, 3, 1]
    assert picks[0].parent is not None and picks[0].parent.segment_id == 10
    assert picks[2].parent is None


def test_drill_down_keeps_a_summary_no_window_fits_and_never_repeats() -> None:
    ranked = [fused(10, 600, 0.9), fused(2, 30, 0.5), fused(11, 180, 0.4)]
    children = {10: [fused(2, 30, 0.3)], 11: [fused(5, 30, 0.1)]}
    picks = drill_down(ranked, children, keep=3, per_parent=2, fits={10: True, 11: False})
    assert [p.fused.segment_id for p in picks] == [2, 11]  # 2 once; 11 stays coarse
    assert top_coarse(ranked, 1)[0].segment_id == 10


def test_importance_and_recall_priors_lift_a_close_match_in_the_expected_direction() -> None:
    lane = [cand(1, 5, 0.80), cand(2, 5, 0.78), cand(3, 5, 0.20)]
    off = PriorParams(0.0, 12.0, 0.0, 3.0, importance_weight=0.0, recall_weight=0.0)
    imp = PriorParams(0.0, 12.0, 0.0, 3.0, importance_weight=1.0, recall_weight=0.0)
    rec = PriorParams(0.0, 12.0, 0.0, 3.0, importance_weight=0.0, recall_weight=1.0)
    priors = {1: (0.1, 0), 2: (0.9, 0), 3: (1.0, 5)}
    assert [c.segment_id for c in apply_prior(lane, TimeConstraint(), NOW, off, priors)] == [
        1,
        2,
        3,
    ]
    # the important moment overtakes a slightly better routine match ...
    assert [c.segment_id for c in apply_prior(lane, TimeConstraint(), NOW, imp, priors)][:2] == [
        2,
        1,
    ]
    # ... a recalled one too; neither rescues a weak match
    recalled = {1: (None, 0), 2: (None, 2), 3: (None, 9)}
    out = apply_prior(lane, TimeConstraint(), NOW, rec, recalled)
    assert [c.segment_id for c in out] == [2, 1, 3]
    # unknown importance is neutral: the order stands when nothing is known
    assert [c.segment_id for c in apply_prior(lane, TimeConstraint(), NOW, imp, {})] == [1, 2, 3]
