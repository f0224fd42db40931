"""Habits from a week of memory, through the agent the query route runs (offline roles,
MiniLM, the real store): the wearer eats fruit with Maya at breakfast every day but one, and
cake with Tom that once. Asked what they usually eat at breakfast, and with whom, the answer
is the habit, not the one-off, although the one-off's window matches the question as well
(and, read as a base rate to remove, the habit's frequency used to lose it)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from worldmm.agent import answer_question
from worldmm.memory.caption_ingest import ingest_caption_windows

pytestmark = [
    pytest.mark.integration,
    pytest.mark.deps(roles="rule_based_roles", embedder="minilm", encoder=None),
]

MONDAY = datetime(2025, 3, 3, tzinfo=UTC)
DAYS = 7
DECOY_DAY = 3
HABIT = [
    ("I eat fruit with Maya for breakfast in the kitchen.", "Maya: The mango is ripe today."),
    ("Maya and I share the fruit and talk about the day.", "Maya: Pass me the grapes."),
]
DECOY = [
    ("I eat chocolate cake with Tom for breakfast at the cafe.", "Tom: Cake for breakfast!"),
    ("Tom and I finish the cake and talk about the day.", "Tom: Best cake in town."),
]
WORK = [
    ("I answer emails at my desk in the office.", ""),
    ("I walk to the bus stop and read the timetable.", ""),
]


def week() -> list[tuple[datetime, datetime, str, str]]:
    """Two 30 s windows at 08:00 (breakfast) and two at 11:00 (work), every day."""
    out = []
    for day in range(DAYS):
        breakfast = DECOY if day == DECOY_DAY else HABIT
        for hour, scenes in ((8, breakfast), (11, WORK)):
            for k, (caption, transcript) in enumerate(scenes):
                start = MONDAY + timedelta(days=day, hours=hour, seconds=30 * k)
                out.append((start, start + timedelta(seconds=30), caption, transcript))
    return out


def test_the_habit_wins_over_a_one_off(deps, user_id):
    # the whole memory: segments, 3 and 10 min summaries, semantic facts consolidated
    asyncio.run(ingest_caption_windows(deps, user_id, week()))
    asked = MONDAY + timedelta(days=DAYS, hours=9)
    for question, choices, habit in [
        ("What do I usually eat at breakfast?", ["cake", "fruit", "rice", "bread"], "fruit"),
        ("Who do I usually have breakfast with?", ["Tom", "Maya", "Anna", "Leo"], "Maya"),
    ]:
        got = asyncio.run(answer_question(deps, user_id, question, choices=choices, as_of=asked))
        # habits are asked of semantic memory first, then of the windows
        assert [r.memory_type for r in got.rounds[:2]] == ["semantic", "episodic"]
        assert got.choice is not None and got.choice.text == habit, got.answer
