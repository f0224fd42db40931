"""Ground truth and scores: interval algebra over half-open ``[start, end)`` second ranges.

G (truth) is the union of the 30 s windows holding the target points; R (retrieved) is the
union of the returned segments' time ranges. hit@k: one of the first k returned segments of
3 min or shorter overlaps G (a 10 min or 1 h summary is too coarse to count as finding the
moment). tIoU = |R ∩ G| / |R ∪ G| over the final top 3, so coarse segments pay in IoU.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from pydantic import BaseModel

from bench.egolife.data import WINDOW_S, floor_window

Interval = tuple[float, float]  # epoch seconds, half-open
HIT_MAX_SCALE_S = 180
TIOU_TOP = 3


class Ranked(BaseModel):
    """One returned segment, in rank order (what every method hands to the scorer)."""

    start: datetime
    end: datetime
    scale: int

    @property
    def interval(self) -> Interval:
        return (self.start.timestamp(), self.end.timestamp())


class QuestionScore(BaseModel):
    hit1: bool
    hit3: bool
    tiou: float


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint, merged (touching ranges merge); empty ranges dropped."""
    out: list[Interval] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def intersection_length(a: Sequence[Interval], b: Sequence[Interval]) -> float:
    """|A ∩ B| of two interval sets (each unioned first), by a merge sweep."""
    ua, ub = union(a), union(b)
    i = j = 0
    total = 0.0
    while i < len(ua) and j < len(ub):
        total += max(0.0, min(ua[i][1], ub[j][1]) - max(ua[i][0], ub[j][0]))
        if ua[i][1] < ub[j][1]:
            i += 1
        else:
            j += 1
    return total


def iou(retrieved: Sequence[Interval], truth: Sequence[Interval]) -> float:
    inter = intersection_length(retrieved, truth)
    both = sum(e - s for s, e in union([*retrieved, *truth]))
    return inter / both if both > 0 else 0.0


def truth_intervals(targets: Iterable[datetime]) -> list[Interval]:
    """G: the union of the 30 s windows that contain the target points (whole seconds)."""
    starts = [floor_window(t).timestamp() for t in targets]
    return union((s, s + WINDOW_S) for s in starts)


def hit_at(ranked: Sequence[Ranked], truth: Sequence[Interval], k: int) -> bool:
    return any(
        r.scale <= HIT_MAX_SCALE_S and intersection_length([r.interval], truth) > 0
        for r in ranked[:k]
    )


def score(ranked: Sequence[Ranked], truth: Sequence[Interval]) -> QuestionScore:
    return QuestionScore(
        hit1=hit_at(ranked, truth, 1),
        hit3=hit_at(ranked, truth, 3),
        tiou=iou([r.interval for r in ranked[:TIOU_TOP]], truth),
    )


def aggregate(scores: Sequence[QuestionScore]) -> dict[str, float]:
    """Means over questions: ``{"hit@1", "hit@3", "tiou", "n"}`` (0 for no questions)."""
    n = max(1, len(scores))
    return {
        "hit@1": sum(s.hit1 for s in scores) / n,
        "hit@3": sum(s.hit3 for s in scores) / n,
        "tiou": sum(s.tiou for s in scores) / n,
        "n": len(scores),
    }
