"""Cross-validation folds of the EgoLife questions: by day and by type, each a partition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bench.egolife import folds
from bench.egolife.data import Question

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


@pytest.mark.parametrize("scheme", folds.SCHEMES)
def test_every_question_is_in_exactly_one_fold(scheme):
    qs = questions()
    parts = folds.folds(qs, scheme)
    placed = [i for idx in parts.values() for i in idx]
    assert sorted(placed) == list(range(len(qs)))  # none left out, none twice
    for name, idx in parts.items():
        assert {folds.fold_of(qs[i], scheme) for i in idx} == {name}
        assert idx == sorted(idx)  # file order kept inside a fold


@pytest.mark.parametrize("scheme", folds.SCHEMES)
def test_splits_hold_each_question_out_once_and_never_train_on_it(scheme):
    qs = questions()
    held_count = dict.fromkeys(range(len(qs)), 0)
    names = []
    for name, train, held in folds.splits(qs, scheme):
        names.append(name)
        assert held and train
        assert not set(train) & set(held)  # a held-out question is never fitted on
        assert sorted(train + held) == list(range(len(qs)))
        for i in held:
            held_count[i] += 1
    assert set(held_count.values()) == {1}
    assert names == list(folds.folds(qs, scheme))


def test_day_folds_are_the_days_asked_in_natural_order():
    qs = questions()
    names = list(folds.folds(qs, "day"))
    assert names == [f"day{d}" for d in range(1, 12)]
    assert set(folds.folds(qs, "type")) == set(TYPES)


def test_one_fold_only_means_no_split_to_train_on():
    qs = [q for q in questions() if q.type == "EventRecall"]
    ((name, train, held),) = folds.splits(qs, "type")
    assert (name, train, held) == ("EventRecall", [], list(range(len(qs))))


def test_tuning_keeps_only_questions_asked_of_a_fully_stored_memory():
    from bench.egolife.data import Window
    from bench.egolife.tune import asked_while_stored

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
    assert asked_while_stored(asked, windows, everything) == asked
    # 10:20 is missing: the 10:00 hour is not fully stored, so only questions by 10:00 stay
    partial = everything - {windows[4].start}
    assert asked_while_stored(asked, windows, partial) == [early, on_the_hour]
    assert asked_while_stored(asked, windows, set()) == []
