"""Question folds for cross-validation: by the day a question is asked, and by its type.

Each scheme is a partition: every question is in exactly one fold of it, so a fold's
figures are never fitted on that fold's own questions. Folds keep file order inside.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

from bench.egolife.data import Question, day_of

Scheme = Literal["day", "type"]
SCHEMES: tuple[Scheme, ...] = ("day", "type")


def fold_of(question: Question, scheme: Scheme) -> str:
    """The fold a question belongs to: ``day3`` (the day it is asked) or its type."""
    if scheme == "day":
        return f"day{day_of(question.query_time)}"
    return question.type


def folds(questions: Sequence[Question], scheme: Scheme) -> dict[str, list[int]]:
    """Fold name -> the indices of its questions, folds sorted by name (day2 before day10)."""
    out: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        out.setdefault(fold_of(q, scheme), []).append(i)
    return dict(sorted(out.items(), key=lambda kv: _natural(kv[0])))


def splits(
    questions: Sequence[Question], scheme: Scheme
) -> Iterator[tuple[str, list[int], list[int]]]:
    """(fold, train indices, held-out indices) for each fold: train is every other fold."""
    parts = folds(questions, scheme)
    for name, held in parts.items():
        train = [i for other, idx in parts.items() if other != name for i in idx]
        yield name, sorted(train), held


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    tail = name[len(head) :]
    return (head, int(tail) if tail else -1)
