"""Cross-validation over EgoLife question folds (by day and by type, each a partition): the
retriever's knobs and the answerer's weights, each chosen without the held-out fold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bench.egolife import tune
from bench.egolife.data import Question
from tests.fixtures.egolife_data import asked_question
from tests.fixtures.weighings import weighing

DAY1 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)
TYPES = ("EventRecall", "RelationMap", "EntityLog", "TaskMaster", "HabitInsight")


def questions(n: int = 37) -> list[Question]:
    """``n`` questions spread over days 1-11 and five types, in no particular order."""
    out = []
    for i in range(n):
        day = (i * 7) % 11  # day 1 .. day 11: natural order (day2 before day10) matters
        asked = DAY1 + timedelta(days=day, hours=i % 9)
        out.append(
            Question(
                id=f"q{i}",
                type=TYPES[(i * 3) % len(TYPES)],
                question=f"Question {i}?",
                choices={"A": "yes", "B": "no"},
                answer="A",
                query_time=asked,
                targets=[asked - timedelta(hours=1)],
            )
        )
    return out


@pytest.mark.parametrize("scheme", tune.SCHEMES)
def test_every_question_is_in_exactly_one_fold(scheme):
    qs = questions()
    parts = tune.folds(qs, scheme)
    placed = [i for idx in parts.values() for i in idx]
    assert sorted(placed) == list(range(len(qs)))  # none left out, none twice
    for name, idx in parts.items():
        assert {tune.SCHEMES[scheme](qs[i]) for i in idx} == {name}
        assert idx == sorted(idx)  # file order kept inside a fold


@pytest.mark.parametrize("scheme", tune.SCHEMES)
def test_splits_hold_each_question_out_once_and_never_train_on_it(scheme):
    qs = questions()
    held_count = dict.fromkeys(range(len(qs)), 0)
    names = []
    for name, train, held in tune.splits(qs, scheme):
        names.append(name)
        assert held and train
        assert not set(train) & set(held)  # a held-out question is never fitted on
        assert sorted(train + held) == list(range(len(qs)))
        for i in held:
            held_count[i] += 1
    assert set(held_count.values()) == {1}
    assert names == list(tune.folds(qs, scheme))


def test_day_folds_are_the_days_asked_in_natural_order():
    qs = questions()
    names = list(tune.folds(qs, "day"))
    assert names == [f"day{d}" for d in range(1, 12)]
    assert set(tune.folds(qs, "type")) == set(TYPES)


def test_one_fold_only_means_no_split_to_train_on():
    qs = [q for q in questions() if q.type == "EventRecall"]
    ((name, train, held),) = tune.splits(qs, "type")
    assert (name, train, held) == ("EventRecall", [], list(range(len(qs))))


def test_tuning_keeps_only_questions_asked_of_a_fully_stored_memory():
    from bench.egolife.data import Window

    def window(t: datetime) -> Window:
        return Window(
            start=t, end=t + timedelta(seconds=30), caption="c", transcript="", source="v"
        )

    windows = [window(DAY1 + timedelta(minutes=20 * i)) for i in range(6)]  # 09:00 .. 10:40
    qs = questions(5)
    early = qs[0].model_copy(update={"query_time": DAY1 + timedelta(minutes=50)})
    on_the_hour = qs[1].model_copy(update={"query_time": DAY1 + timedelta(hours=1)})
    late = qs[2].model_copy(update={"query_time": DAY1 + timedelta(minutes=70)})
    asked = [early, on_the_hour, late]
    everything = {w.start for w in windows}
    assert tune.asked_while_stored(asked, windows, everything) == asked
    # 10:20 is missing: the 10:00 hour is not fully stored, so only questions by 10:00 stay
    partial = everything - {windows[4].start}
    assert tune.asked_while_stored(asked, windows, partial) == [early, on_the_hour]
    assert tune.asked_while_stored(asked, windows, set()) == []


class _Scorer:
    """A scorer whose questions are found exactly when one knob is at a given value."""

    def __init__(self, knob: str, wanted: float) -> None:
        self.knob, self.wanted = knob, wanted

    def scores(self, p, idx):
        from bench.egolife.truth import QuestionScore

        hit = p[self.knob] == self.wanted
        return [QuestionScore(hit1=hit, hit3=hit, tiou=0.5 if hit else 0.0) for _ in idx]

    def aggregate(self, p, idx):
        from bench.egolife import truth

        return truth.aggregate(self.scores(p, idx))


def test_the_ablation_reports_whether_a_prior_helps_held_out_folds():
    qs = questions()
    start = {
        k: (v.neutral if isinstance(v.neutral, float) else v.grid[0]) for k, v in tune.KNOBS.items()
    }
    helpful = tune.ablation(_Scorer("importance_weight", 1.0), qs, start, ["importance_weight"])
    assert helpful["importance_weight"]["helps"] is True
    assert helpful["all"]["objective"] == pytest.approx(1.5)  # hit@3 1 + tIoU 0.5, held out
    assert helpful["importance_weight"]["objective_without"] == 0.0
    useless = tune.ablation(_Scorer("rrf_k", 30.0), qs, start, ["importance_weight"])
    assert useless["importance_weight"]["helps"] is False  # frozen at 0, nothing lost


class _Both:
    """Questions found only when the shipped entity weight is kept and a second knob is at
    a given value: fitting that knob alone must keep entity as shipped, not neutral."""

    def __init__(self, knob: str, wanted: float) -> None:
        self.knob, self.wanted = knob, wanted

    def scores(self, p, idx):
        from bench.egolife.truth import QuestionScore

        hit = p["entity"] == 0.25 and p[self.knob] == self.wanted
        return [QuestionScore(hit1=hit, hit3=hit, tiou=0.5 if hit else 0.0) for _ in idx]

    def aggregate(self, p, idx):
        from bench.egolife import truth

        return truth.aggregate(self.scores(p, idx))


def _shipped() -> dict[str, float]:
    out = {k: (v.neutral if isinstance(v.neutral, float) else 0.0) for k, v in tune.KNOBS.items()}
    return out | {"entity": 0.25, "recency_weight": 4.0, "prior_weight": 2.0}


def test_fitting_one_knob_keeps_the_others_as_shipped_and_says_whether_it_helps():
    qs = questions()
    found = tune.fit_only(_Both("importance_weight", 0.5), qs, _shipped(), ["importance_weight"])
    assert found["helps"] is True
    assert found["objective_shipped"] == 0.0 and found["objective_fitted"] == pytest.approx(1.5)
    for scheme in tune.SCHEMES:
        for fold in found["cv"][scheme]["folds"].values():
            assert fold["params"]["importance_weight"] == 0.5
            assert fold["params"]["entity"] == 0.25  # as shipped, though entity's neutral is 0
    assert found["grid"]["importance_weight"]["0.5"]["hit@3"] == 1.0
    assert found["grid"]["importance_weight"]["0.0"]["hit@3"] == 0.0
    # a knob whose best value is the shipped one changes nothing, and does not "help"
    same = tune.fit_only(_Both("importance_weight", 0.0), qs, _shipped(), ["importance_weight"])
    assert same["helps"] is False
    assert same["objective_fitted"] == same["objective_shipped"] == pytest.approx(1.5)


PAIRS = [(look, base) for look in tune.LOOK_GRID for base in tune.BASE_GRID]


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
    cv = tune.answer_cv(qs, picks)
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
    # per type, from the held-out letters: day 1 is types EventRecall (0, 2) and TaskMaster
    # (4, 6), day 2 the rest; worldmm is wrong on every held-out day fold
    assert both["day"]["by_type"] == {
        "EventRecall": {"worldmm": 0.0, "lane-lexical": 1.0},
        "TaskMaster": {"worldmm": 0.0, "lane-lexical": 1.0},
    }
    # chosen by another method's accuracy: lane-lexical is right at every pair, so each fold
    # takes the neutral pair, and worldmm is right on day 1 only
    other = tune.answer_cv(qs, picks, by="lane-lexical")
    assert other["chosen_by"] == "lane-lexical"
    assert {f["pair"] for f in other["both"]["day"]["folds"].values()} == {"look=1,base=0"}
    assert other["both"]["day"]["pooled"] == {"worldmm": 0.5, "lane-lexical": 1.0}
    assert other["both"]["day"]["by_type"]["EventRecall"]["worldmm"] == 0.5


def test_each_base_weight_picks_from_one_weighing():
    got = tune.grid_letters(weighing([0.9, 0.5], base=[0.8, 0.1]), ["A", "B"], None, 0.5)
    assert got == {(0.5, 0.0): "A", (0.5, 0.5): "A", (0.5, 1.0): "B", (0.5, 2.0): "B"}
    assert set(tune.grid_letters(None, ["A", "B"], "B", 1.0).values()) == {"B"}
