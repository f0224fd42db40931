"""The answerer's base-rate weight chosen on the other folds and scored on the held-out one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.egolife import answer_cv
from bench.egolife.data import Question

DAY1 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)


def question(i: int, day: int, kind: str) -> Question:
    asked = DAY1 + timedelta(days=day - 1, hours=i)
    return Question(
        id=f"q{i}",
        type=kind,
        question=f"Question {i}?",
        choices={"A": "yes", "B": "no"},
        answer="A",
        query_time=asked,
        targets=[asked],
    )


def test_the_weight_is_chosen_without_the_held_out_fold():
    # Day 1's questions are right only at weight 0, day 2's only at weight 2: each day fold,
    # held out, gets the other day's weight and scores 0 there.
    qs = [question(i, 1 + i % 2, "EventRecall" if i < 4 else "TaskMaster") for i in range(8)]
    right_at = {1: 0.0, 2: 2.0}
    picks = {
        "worldmm": [
            {w: "A" if w == right_at[q.query_time.day] else "B" for w in answer_cv.GRID} for q in qs
        ]
    }
    picks["lane-lexical"] = [dict.fromkeys(answer_cv.GRID, "A") for _ in qs]
    cv = answer_cv.cross_validate(qs, picks)
    assert cv["chosen_by"] == "worldmm"
    assert cv["day"]["folds"]["day1"]["weight"] == 2.0
    assert cv["day"]["folds"]["day2"]["weight"] == 0.0
    assert cv["day"]["pooled"] == {"worldmm": 0.0, "lane-lexical": 1.0}
    assert cv["day"]["spread"] == {"mean": 0.0, "sd": 0.0, "min": 0.0, "max": 0.0}
    # each type fold holds both days: the other fold's tie goes to the smallest weight
    assert {f["weight"] for f in cv["type"]["folds"].values()} == {0.0}
    assert cv["type"]["pooled"]["worldmm"] == 0.5
    assert cv["chosen"] == 0.0 and cv["in_sample"]["2.0"]["worldmm"] == 0.5


def test_without_evidence_every_weight_keeps_the_answerers_guess():
    assert answer_cv.grid_letters(None, ["A", "B"], "B") == dict.fromkeys(answer_cv.GRID, "B")
