"""The embedder comparison's scoring: per-fold figures, folds won, hit@3 flips, query side."""

from __future__ import annotations

import numpy as np

from bench.egolife.embedder_compare import per_fold, query_vector, versus
from bench.egolife.truth import QuestionScore
from tests.unit.bench.egolife_fixtures import asked_question

QUESTIONS = [
    asked_question(0, 1, "EventRecall"),
    asked_question(1, 1, "EntityLog"),
    asked_question(2, 2, "EventRecall"),
    asked_question(3, 2, "EntityLog"),
]


def scores(*hit3: bool) -> list[QuestionScore]:
    return [QuestionScore(hit1=False, hit3=h, tiou=0.5 if h else 0.0) for h in hit3]


def test_per_fold_means_over_each_folds_questions():
    got = per_fold(QUESTIONS, scores(True, False, False, False))
    assert got["overall"]["hit@3"] == 0.25
    assert got["by_day"]["day1"] == {"hit@1": 0.0, "hit@3": 0.5, "tiou": 0.25, "n": 2}
    assert got["by_day"]["day2"]["hit@3"] == 0.0
    assert got["by_type"]["EventRecall"]["hit@3"] == 0.5
    assert got["by_type"]["EntityLog"]["hit@3"] == 0.0


def test_versus_counts_folds_won_tied_lost_and_flipped_questions():
    base_s, other_s = scores(True, False, False, False), scores(False, True, True, False)
    base, other = per_fold(QUESTIONS, base_s), per_fold(QUESTIONS, other_s)
    got = versus(base, other, base_s, other_s)
    assert (got["hit3_gained"], got["hit3_lost"]) == (2, 1)
    # day1: 0.5 vs 0.5 (tied); day2: 0.5 vs 0 (won)
    assert got["hit@3_by_day"] == {"won": 1, "tied": 1, "lost": 0}
    # EventRecall: 0.5 vs 0.5 (tied); EntityLog: 0.5 vs 0 (won)
    assert got["tiou_by_type"] == {"won": 1, "tied": 1, "lost": 0}


class _Plain:
    name, dim = "plain", 2

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([[1.0, 0.0]] * len(texts), dtype=np.float32)


class _WithQuerySide(_Plain):
    def embed_query(self, text: str) -> np.ndarray:
        return np.array([0.0, 1.0], dtype=np.float32)


def test_query_vector_uses_an_embedders_own_query_side():
    assert query_vector(_Plain(), "q").tolist() == [1.0, 0.0]
    assert query_vector(_WithQuerySide(), "q").tolist() == [0.0, 1.0]
