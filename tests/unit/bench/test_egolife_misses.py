"""Where the EgoLife retrieval misses: hit@3 by type, time before the question and returned
scale, and each miss's gap to its target."""

from __future__ import annotations

import pytest

from bench.egolife.misses import breakdown, gap_minutes, hours_before, report_misses

Q = "2025-01-03T12:00:00+00:00"


def row(qid: str, kind: str, truth: tuple[str, str], top: list, hit: bool) -> dict:
    return {
        "id": qid,
        "type": kind,
        "query_time": Q,
        "truth": [list(truth)],
        "methods": {"m": {"hit1": hit, "hit3": hit, "tiou": 0.0, "top": top}, "random": {}},
    }


T = ("2025-01-03T11:00:00+00:00", "2025-01-03T11:00:30+00:00")
ROWS = [
    row(
        "1", "EntityLog", T, [["2025-01-03T11:00:00+00:00", "2025-01-03T11:00:30+00:00", 30]], True
    ),
    # the next window: a miss by half a minute
    row(
        "2", "EntityLog", T, [["2025-01-03T11:01:00+00:00", "2025-01-03T11:01:30+00:00", 30]], False
    ),
    # two days before the question, found nothing near it
    row(
        "3",
        "HabitInsight",
        ("2025-01-01T09:00:00+00:00", "2025-01-01T09:00:30+00:00"),
        [["2025-01-03T08:00:00+00:00", "2025-01-03T08:10:00+00:00", 600]],
        False,
    ),
    row("4", "HabitInsight", T, [], False),
]


def test_time_before_and_gap_are_measured_from_the_target():
    assert hours_before(ROWS[0]) == pytest.approx(59.5 / 60)
    assert gap_minutes(ROWS[0], ROWS[0]["methods"]["m"]["top"]) == 0.0
    assert gap_minutes(ROWS[1], ROWS[1]["methods"]["m"]["top"]) == 0.5
    assert gap_minutes(ROWS[3], []) is None


def test_breakdown_by_type_time_scale_and_gap():
    got = breakdown(ROWS, "m")
    assert got["questions"] == 4
    assert got["by_type"] == {
        "EntityLog": {"n": 2, "hit@3": 0.5},
        "HabitInsight": {"n": 2, "hit@3": 0.0},
    }
    assert got["by_time_before"] == {
        "<1h": {"n": 3, "hit@3": 0.333},
        "1-3d": {"n": 1, "hit@3": 0.0},
    }
    assert got["by_returned_scale"] == {
        "30 s": {"n": 2, "hit@3": 0.5},
        "600 s": {"n": 1, "hit@3": 0.0},
    }
    assert got["misses_by_gap"] == {
        "adjacent (<=1 min)": 1,
        "another day": 1,
        "nothing returned": 1,
    }
    assert set(report_misses({"per_question": ROWS})) == {"m"}  # random retrieves nothing
