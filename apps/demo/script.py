"""What the demo records and what it asks: a short day of scenes, fitted to the session
length, and questions whose answers are visible or spoken in those scenes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, Field

from apps.demo.synthetic import (
    FRIDGE_NOTE,
    HALLWAY_KEYS,
    KITCHEN_MUG,
    MEETING_ALICE,
    OFFICE_DENTIST,
    PARKING,
    SceneSpec,
    fit_script,
)
from worldmm.memory.windows import WindowId, align, dt_to_ms, parent_of
from worldmm.models import SCALES

# In priority order: a short session keeps the first scenes, so the first questions stay
# answerable at any length. Its own variants say what the kept recordings
# (apps/demo/speech/) say.
_SCENES: list[SceneSpec] = [
    KITCHEN_MUG,
    MEETING_ALICE.model_copy(update={"notes": ["Budget review"]}),
    FRIDGE_NOTE,
    PARKING.model_copy(update={"notes": ["LEVEL 2"], "speech": ["I parked the car on level two."]}),
    HALLWAY_KEYS,
    OFFICE_DENTIST,
]

MIN_SCENE_S = 30.0  # one base window per scene at least, so each scene has its own caption


class DemoQuestion(BaseModel):
    question: str
    choices: list[str] | None = None
    scene: int = Field(description="Index of the scene that holds the answer.")
    expect: str = Field(
        description="What a right answer says: its short answer holds each of these words "
        "(apps.demo.answers.says_expected)."
    )


QUESTIONS: list[DemoQuestion] = [
    # (Colour words would send the offline agent to visual memory, whose offline encoder
    # reads text in frames, not objects: ask about "the mug" to search what was said.)
    DemoQuestion(question="Where did I put the mug?", scene=0, expect="on the kitchen table"),
    DemoQuestion(
        question="What did Alice say about the meeting?", scene=1, expect="moved to three pm"
    ),
    DemoQuestion(
        question="What was written on the note on the fridge?", scene=2, expect="buy milk, eggs"
    ),
    DemoQuestion(
        question="Where did I park the car?",
        choices=["Level 1", "Level 2", "Level 3"],
        scene=3,
        expect="Level 2",
    ),
    DemoQuestion(question="Where did I leave my car keys?", scene=4, expect="in the white bowl"),
]


def demo_script(total_s: float) -> list[SceneSpec]:
    """As many scenes as fit with at least ``MIN_SCENE_S`` each, sharing the time equally."""
    return fit_script(_SCENES, total_s, MIN_SCENE_S)


def spoken_lines() -> list[str]:
    """Every line any demo scene speaks (each has a kept recording, apps/demo/speech/)."""
    return [line for scene in _SCENES for line in scene.speech]


def demo_questions(n_scenes: int, limit: int = 5) -> list[DemoQuestion]:
    """The questions about scenes the session holds (at least one, at most ``limit``)."""
    return [q for q in QUESTIONS if q.scene < max(1, n_scenes)][:limit]


def aligned_start(duration_s: float, now: datetime | None = None) -> datetime:
    """A start on a 10-minute boundary such that the session ends before ``now``: the 3 min
    and 10 min windows then line up with it, and no capture time lies in the future."""
    now = now or datetime.now(UTC)
    latest = now - timedelta(seconds=duration_s + 5)
    return latest.replace(minute=latest.minute - latest.minute % 10, second=0, microsecond=0)


def expected_windows(start: datetime, duration_s: float) -> dict[int, int]:
    """Windows per scale that a session ``[start, start + duration)`` with data in every
    30 s builds: its base windows and, up the flow's hierarchy, their parents."""
    first = align(dt_to_ms(start), SCALES[0])
    end = dt_to_ms(start) + round(duration_s * 1000)
    level: set[WindowId] = {(SCALES[0], t) for t in range(first, end, SCALES[0] * 1000)}
    seen: set[WindowId] = set(level)
    while level:
        level = {p for w in level if (p := parent_of(w)) is not None}
        seen |= level
    return {scale: sum(1 for s, _ in seen if s == scale) for scale in SCALES}
