"""The offline answerer's two weights (base rate, ``BASE_RATE_WEIGHT``; option look,
``OPTION_LOOK_WEIGHT``) chosen by cross-validation over question folds in the same run as the
answers: each evidence is weighed once per look weight, the pair is picked on the other folds by
``worldmm``'s accuracy (ties: nearest neutral) and scored held out; a weight whose freezing at
neutral does not lower held-out accuracy does not earn its place (docs/benchmarks/egolife.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from bench.egolife import folds
from bench.egolife.data import Question
from worldmm.llm.offline import scoring
from worldmm.llm.offline.weighing import Weighing

BASE_GRID = (0.0, 0.5, 1.0, 2.0)
LOOK_GRID = (1.0, 0.5, 0.25)
CHOOSE_BY = "worldmm"

Pair = tuple[float, float]  # (look weight, base weight)
# per method, per question: the letter each pair picks
Picks = dict[str, list[dict[Pair, str | None]]]


def label(pair: Pair) -> str:
    return f"look={pair[0]:g},base={pair[1]:g}"


def grid_letters(
    weighing: Weighing | None, letters: Sequence[str], fallback: str | None, look: float
) -> dict[Pair, str | None]:
    """The letter each base weight picks from one weighing (made with look weight ``look``);
    ``fallback`` (the answerer's guess) without evidence."""
    if weighing is None:
        return {(look, b): fallback for b in BASE_GRID}
    return {(look, b): letters[scoring.best_index(weighing.scores(b))] for b in BASE_GRID}


def accuracy(questions: Sequence[Question], letters: Sequence[str | None]) -> float:
    """Share of the questions with an answer whose letter is ``letters``' one."""
    judged = [(q.answer, a) for q, a in zip(questions, letters, strict=True) if q.answer]
    right = sum(1 for want, got in judged if got == want.strip().upper())
    return right / len(judged) if judged else 0.0


def accuracy_at(questions, picks: Picks, method: str, pair: Pair, idx) -> float:
    return accuracy([questions[i] for i in idx], [picks[method][i][pair] for i in idx])


def choose(questions, picks: Picks, idx: Sequence[int], by: str, pairs: Sequence[Pair]) -> Pair:
    """The pair with the best accuracy of method ``by`` on ``idx``, nearest neutral on ties."""
    return max(pairs, key=lambda p: (accuracy_at(questions, picks, by, p, idx), -p[1], p[0]))


def pairs_of(picks: Picks) -> list[Pair]:
    return sorted({p for per_q in picks.values() for row in per_q for p in row})


def held_out(questions: Sequence[Question], picks: Picks, by: str, pairs: Sequence[Pair]):
    """Per scheme: each fold's pair and held-out accuracies, the pooled held-out accuracy per
    method, the spread of ``by``'s over folds; and the mean of the schemes' pooled ``by``."""
    out: dict = {}
    for scheme in folds.SCHEMES:
        per_fold: dict = {}
        letters: dict[str, list[str | None]] = {m: [None] * len(questions) for m in picks}
        for name, train, held in folds.splits(questions, scheme):
            pair = choose(questions, picks, train, by, pairs)
            per_fold[name] = {
                "n": len(held),
                "pair": label(pair),
                "accuracy": {
                    m: round(accuracy_at(questions, picks, m, pair, held), 4) for m in picks
                },
            }
            for m in picks:
                for i in held:
                    letters[m][i] = picks[m][i][pair]
        by_fold = [f["accuracy"][by] for f in per_fold.values()]
        out[scheme] = {
            "folds": per_fold,
            "pooled": {m: round(accuracy(questions, letters[m]), 4) for m in picks},
            "spread": {
                "mean": round(statistics.fmean(by_fold), 4),
                "sd": round(statistics.pstdev(by_fold), 4),
                "min": round(min(by_fold), 4),
                "max": round(max(by_fold), 4),
            },
        }
    out["objective"] = round(statistics.fmean(out[s]["pooled"][by] for s in folds.SCHEMES), 4)
    return out


def cross_validate(questions: Sequence[Question], picks: Picks) -> dict:
    """Held-out figures with both weights chosen per fold, and with each frozen at its
    neutral value; ``chosen``: the pair fitted on every question; ``in_sample``: every
    pair's accuracy on every question. Chosen by ``worldmm`` (else the first method)."""
    by = CHOOSE_BY if CHOOSE_BY in picks else next(iter(picks))
    pairs = pairs_of(picks)
    everything = list(range(len(questions)))
    return {
        "chosen_by": by,
        "both": held_out(questions, picks, by, pairs),
        "base_at_0": held_out(questions, picks, by, [p for p in pairs if p[1] == 0.0]),
        "look_at_1": held_out(questions, picks, by, [p for p in pairs if p[0] == 1.0]),
        "chosen": label(choose(questions, picks, everything, by, pairs)),
        "in_sample": {
            label(p): {m: round(accuracy_at(questions, picks, m, p, everything), 4) for m in picks}
            for p in pairs
        },
    }
