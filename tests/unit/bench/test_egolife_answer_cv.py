"""The answerer's weights chosen on the other folds and scored on the held-out one."""

from __future__ import annotations

from bench.egolife import answer_cv
from tests.fixtures.weighings import weighing
from tests.unit.bench.egolife_fixtures import asked_question

PAIRS = [(look, base) for look in answer_cv.LOOK_GRID for base in answer_cv.BASE_GRID]


def test_the_weights_are_chosen_without_the_held_out_fold():
    # Day 1's questions are right only at base weight 0, day 2's only at 2 (any look weight):
    # each day fold, held out, gets the other day's weight and scores 0 there.
    qs = [asked_question(i, 1 + i % 2, "EventRecall" if i < 4 else "TaskMaster") for i in range(8)]
    right_at = {1: 0.0, 2: 2.0}
    picks = {
        "worldmm": [
            {p: "A" if p[1] == right_at[q.query_time.day] else "B" for p in PAIRS} for q in qs
        ],
        "lane-lexical": [dict.fromkeys(PAIRS, "A") for _ in qs],
    }
    cv = answer_cv.cross_validate(qs, picks)
    assert cv["chosen_by"] == "worldmm"
    both = cv["both"]
    assert both["day"]["folds"]["day1"]["pair"] == "look=1,base=2"  # fitted on day 2
    assert both["day"]["folds"]["day2"]["pair"] == "look=1,base=0"
    assert both["day"]["pooled"] == {"worldmm": 0.0, "lane-lexical": 1.0}
    assert both["day"]["spread"] == {"mean": 0.0, "sd": 0.0, "min": 0.0, "max": 0.0}
    # each type fold holds both days: a tie on the other fold goes to the neutral pair
    assert {f["pair"] for f in both["type"]["folds"].values()} == {"look=1,base=0"}
    assert both["type"]["pooled"]["worldmm"] == 0.5
    assert both["objective"] == 0.25
    assert cv["base_at_0"]["day"]["pooled"]["worldmm"] == 0.5  # one knob frozen
    assert cv["chosen"] == "look=1,base=0" and cv["in_sample"]["look=1,base=2"]["worldmm"] == 0.5


def test_each_base_weight_picks_from_one_weighing():
    got = answer_cv.grid_letters(weighing([0.9, 0.5], base=[0.8, 0.1]), ["A", "B"], None, 0.5)
    assert got == {(0.5, 0.0): "A", (0.5, 0.5): "A", (0.5, 1.0): "B", (0.5, 2.0): "B"}
    assert set(answer_cv.grid_letters(None, ["A", "B"], "B", 1.0).values()) == {"B"}
