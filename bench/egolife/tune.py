"""Cross-validation over question folds (by the day a question is asked, and by its type;
each scheme a partition, so no fold's figures are fitted on its own questions), for:

- the episodic retriever's parameters (``worldmm bench egolife-tune``), on the memory
  ``worldmm bench egolife`` ingested: knobs pruned, then fitted; ``--ablate`` instead;
- the offline answerer's two weights (base rate, ``BASE_RATE_WEIGHT``; option look,
  ``OPTION_LOOK_WEIGHT``), in the same run as the answers (:func:`answer_cv`).

The method is in docs/benchmarks/egolife.md ("How the parameters are chosen"); the reports keep
each fold's held-out figures and their spread.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import astuple, replace
from datetime import datetime
from typing import NamedTuple

from pydantic import Field, field_validator

from bench import harness
from bench.egolife import truth
from bench.egolife.data import EgoLifeData, Question, Window, day_of
from bench.egolife.memory_method import ALL_LANES, hour_key, missing_hours, ranked
from bench.egolife.truth import QuestionScore
from bench.harness import StrList, words
from worldmm.llm.rule_based import scoring
from worldmm.llm.rule_based.weighing import Weighing
from worldmm.memory.retrieval.episodic import EpisodicOptions, LaneRun, run_lanes, select
from worldmm.memory.retrieval.fusion import PriorParams, apply_prior

SCHEMES: dict[str, Callable[[Question], str]] = {
    "day": lambda q: f"day{day_of(q.query_time)}",  # the day it is asked
    "type": lambda q: q.type,
}


def _natural(name: str) -> tuple[str, int]:
    head = name.rstrip("0123456789")
    return head, int(name[len(head) :] or -1)


def folds(questions: Sequence[Question], scheme: str) -> dict[str, list[int]]:
    """Fold name -> the indices of its questions (file order), folds sorted by name in
    natural order (day2 before day10)."""
    out: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        out.setdefault(SCHEMES[scheme](q), []).append(i)
    return dict(sorted(out.items(), key=lambda kv: _natural(kv[0])))


def splits(
    questions: Sequence[Question], scheme: str
) -> Iterator[tuple[str, list[int], list[int]]]:
    """(fold, train indices, held-out indices) for each fold: train is every other fold."""
    parts = folds(questions, scheme)
    for name, held in parts.items():
        yield name, sorted(i for other, idx in parts.items() if other != name for i in idx), held


def spread(values: Sequence[float]) -> dict:
    stats = {"mean": statistics.fmean, "sd": statistics.pstdev, "min": min, "max": max}
    return {name: round(stat(values), 4) for name, stat in stats.items()}


def _rounded(agg: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in agg.items()}


# The answerer's weight grids (the base rate's, the option look's); chosen by worldmm's answers
BASE_GRID = (0.0, 0.5, 1.0, 2.0)
LOOK_GRID = (1.0, 0.5, 0.25)
CHOOSE_BY = "worldmm"
Pair = tuple[float, float]  # (look weight, base weight)
Picks = dict[str, list[dict[Pair, str | None]]]  # per method, per question: each pair's letter


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


def _accuracy_at(questions, picks: Picks, method: str, pair: Pair, idx) -> float:
    return round(accuracy([questions[i] for i in idx], [picks[method][i][pair] for i in idx]), 4)


def _choose(questions, picks: Picks, idx: Sequence[int], by: str, pairs) -> Pair:
    """The pair with the best accuracy of method ``by`` on ``idx``, nearest neutral on ties."""
    return max(pairs, key=lambda p: (_accuracy_at(questions, picks, by, p, idx), -p[1], p[0]))


def _answers_held_out(questions: Sequence[Question], picks: Picks, by: str, pairs) -> dict:
    """Per scheme: each fold's pair (chosen by ``by``'s accuracy on the other folds) and
    held-out accuracies, the pooled held-out accuracy per method, the spread of ``by``'s over
    folds; and the mean of the schemes' pooled ``by``."""
    out: dict = {}
    for scheme in SCHEMES:
        per_fold: dict = {}
        letters: dict[str, list[str | None]] = {m: [None] * len(questions) for m in picks}
        for name, train, held in splits(questions, scheme):
            pair = _choose(questions, picks, train, by, pairs)
            right = {m: _accuracy_at(questions, picks, m, pair, held) for m in picks}
            per_fold[name] = {"n": len(held), "pair": label(pair), "accuracy": right}
            for m in picks:
                for i in held:
                    letters[m][i] = picks[m][i][pair]
        out[scheme] = {
            "folds": per_fold,
            "pooled": {m: round(accuracy(questions, letters[m]), 4) for m in picks},
            "by_type": by_type(questions, letters),
            "spread": spread([f["accuracy"][by] for f in per_fold.values()]),
        }
    out["objective"] = round(statistics.fmean(out[s]["pooled"][by] for s in SCHEMES), 4)
    return out


def by_type(questions: Sequence[Question], letters: dict[str, list[str | None]]) -> dict:
    """Per question type, each method's accuracy with the held-out ``letters``."""
    out: dict[str, dict[str, float]] = {}
    for t in sorted({q.type for q in questions}):
        idx = [i for i, q in enumerate(questions) if q.type == t]
        chosen = [questions[i] for i in idx]
        out[t] = {m: round(accuracy(chosen, [a[i] for i in idx]), 4) for m, a in letters.items()}
    return out


def answer_cv(questions: Sequence[Question], picks: Picks, by: str | None = None) -> dict:
    """Held-out figures with both weights chosen per fold, and with each frozen at its
    neutral value; ``chosen``: the pair fitted on every question; ``in_sample``: every
    pair's accuracy on every question. Chosen by the accuracy of method ``by`` (default
    ``worldmm``, else the first method)."""
    if by is None:
        by = CHOOSE_BY if CHOOSE_BY in picks else next(iter(picks))
    pairs = sorted({p for per_q in picks.values() for row in per_q for p in row})
    every = range(len(questions))
    return {
        "chosen_by": by,
        "both": _answers_held_out(questions, picks, by, pairs),
        "base_at_0": _answers_held_out(questions, picks, by, [p for p in pairs if p[1] == 0.0]),
        "look_at_1": _answers_held_out(questions, picks, by, [p for p in pairs if p[0] == 1.0]),
        "chosen": label(_choose(questions, picks, every, by, pairs)),
        "in_sample": {
            label(p): {m: _accuracy_at(questions, picks, m, p, every) for m in picks} for p in pairs
        },
    }


Params = dict[str, float]


class Knob(NamedTuple):
    """A value's grid, and what it is when removed (a number, or the knob it is tied to)."""

    grid: tuple[float, ...]
    neutral: float | str


KNOBS: dict[str, Knob] = {
    "entity": Knob((0.0, 0.25, 0.5, 1.0), 0.0),
    "graph": Knob((0.0, 0.25, 0.5, 1.0), 0.0),
    "lexical": Knob((0.5, 1.0, 2.0), 1.0),  # relative to dense, which weighs 1
    "recency_weight": Knob((0.0, 1.0, 2.0, 4.0, 8.0), 0.0),
    "recency_halflife_h": Knob((3.0, 6.0, 12.0, 24.0, 48.0), 12.0),
    "prior_weight": Knob((0.0, 1.0, 2.0, 4.0, 8.0), "recency_weight"),
    "prior_halflife_h": Knob((1.0, 3.0, 6.0, 12.0, 24.0), "recency_halflife_h"),
    "importance_weight": Knob((0.0, 0.25, 0.5, 1.0, 2.0), 0.0),
    "rrf_k": Knob((10.0, 30.0, 60.0), 60.0),
    "drill_parents": Knob((0.0, 3.0, 5.0), 0.0),
    "drill_keep": Knob((1.0, 2.0, 3.0), 2.0),
}
# PriorParams' fields, in order, but the recall weight (EgoLife has no recall history)
PRIOR_KNOBS = words(
    "recency_weight, recency_halflife_h, prior_weight, prior_halflife_h, importance_weight"
)
ROUNDS = 2  # coordinate ascent passes (stops early when a pass changes nothing)


def objective(agg: dict) -> float:
    return agg["hit@3"] + agg["tiou"]


def resolve(p: Params, active: Sequence[str], frozen: Params | None = None) -> Params:
    """``p`` with every knob not in ``active`` at its neutral value (ties followed), or at
    its value in ``frozen`` when given."""
    out = dict(p)
    for name in [n for n in KNOBS if n not in active]:
        neutral = KNOBS[name].neutral if frozen is None else frozen[name]
        out[name] = neutral if isinstance(neutral, float) else out[neutral]
    return out


def params_of(base: EpisodicOptions) -> Params:
    """The knobs' values in ``base`` (the settings as shipped)."""
    w = base.weights
    return {
        "entity": w.get("entity", 0.0),
        "graph": w.get("graph", 0.0),
        "lexical": w.get("lexical", 0.0) / (w.get("dense") or 1.0),
        **dict(zip(PRIOR_KNOBS, astuple(base.prior), strict=False)),
        "rrf_k": base.rrf_k,
        "drill_parents": float(base.drill_parents),
        "drill_keep": float(base.drill_keep),
    }


class Scorer:
    """Per question and parameter setting, the question's score, computed once."""

    def __init__(self, deps, base: EpisodicOptions, runs: list[LaneRun], truths: list) -> None:
        self.deps, self.base, self.runs, self.truths = deps, base, runs, truths
        self._memo: dict[tuple, dict[int, QuestionScore]] = {}
        self.evaluated = 0

    def scores(self, p: Params, idx: Sequence[int]) -> list[QuestionScore]:
        memo = self._memo.setdefault(tuple(sorted(p.items())), {})
        opts = replace(
            self.base,
            prior=PriorParams(*(p[k] for k in PRIOR_KNOBS), 0.0),
            weights={
                "lexical": p["lexical"],
                "dense": 1.0,
                "graph": p["graph"],
                "entity": p["entity"],
            },
            rrf_k=p["rrf_k"],
            drill_parents=int(p["drill_parents"]),
            drill_keep=int(p["drill_keep"]),
            llm_rerank=False,
        )
        for i in idx:
            if i not in memo:
                run = self.runs[i]
                lanes = {
                    k: apply_prior(v, run.constraint, run.as_of, opts.prior, run.priors)
                    for k, v in run.lanes.items()
                    if k in opts.lanes
                }
                picks = select(self.deps, replace(run, lanes=lanes), opts)
                memo[i] = truth.score(ranked([x.fused for x in picks]), self.truths[i])
                self.evaluated += 1
        return [memo[i] for i in idx]

    def aggregate(self, p: Params, idx: Sequence[int]) -> dict:
        return truth.aggregate(self.scores(p, idx))


def fit(
    scorer: Scorer,
    start: Params,
    active: Sequence[str],
    idx: Sequence[int],
    frozen: Params | None = None,
) -> Params:
    """Coordinate ascent over the ``active`` knobs' grids on questions ``idx`` (the others
    neutral, or as in ``frozen``)."""
    p = resolve(start, active, frozen)
    best = objective(scorer.aggregate(p, idx))
    for _ in range(ROUNDS):
        changed = False
        for name in active:
            for value in KNOBS[name].grid:
                trial = resolve({**p, name: value}, active, frozen)
                score = objective(scorer.aggregate(trial, idx)) if value != p[name] else best
                if score > best + 1e-9:
                    p, best, changed = trial, score, True
        if not changed:
            break
    return p


def cross_validate(
    scorer: Scorer,
    questions: Sequence[Question],
    start: Params,
    active: Sequence[str],
    frozen: Params | None = None,
) -> dict:
    """Per scheme: each fold's fitted knobs and held-out figures, the pooled held-out
    figures (every question once) and the spread over folds; ``objective`` is the mean of
    the schemes' pooled held-out objectives. Knobs not ``active`` are neutral, or as in
    ``frozen``."""
    out: dict = {}
    for scheme in SCHEMES:
        per_fold, pooled = {}, []
        for name, train, held in splits(questions, scheme):
            p = fit(scorer, start, active, train, frozen)
            scores = scorer.scores(p, held)
            pooled += scores
            per_fold[name] = {"params": p, **_rounded(truth.aggregate(scores))}
        out[scheme] = {
            "folds": per_fold,
            "pooled": _rounded(truth.aggregate(pooled)),
            "spread": {k: spread([f[k] for f in per_fold.values()]) for k in ("hit@3", "tiou")}
            | {"objective": spread([objective(f) for f in per_fold.values()])},
        }
    out["objective"] = round(statistics.fmean(objective(out[s]["pooled"]) for s in SCHEMES), 4)
    return out


def prune(
    scorer: Scorer, questions: Sequence[Question], start: Params
) -> tuple[list[str], list[dict], dict]:
    """One pass over the knobs: freeze each at its neutral value and keep it frozen when the
    held-out objective does not drop. Returns the knobs left, the record of each step and the
    cross-validation of the knobs left."""
    active = list(KNOBS)
    current = cross_validate(scorer, questions, start, active)
    steps = [{"knob": None, "active": list(active), "cv": current}]
    print(f"all knobs: held-out objective {current['objective']}")
    for name in KNOBS:
        trial_active = [k for k in active if k != name]
        trial = cross_validate(scorer, questions, start, trial_active)
        removed = trial["objective"] >= current["objective"] - 1e-9
        verdict = "removed" if removed else "kept"
        print(f"without {name}: {trial['objective']} vs {current['objective']} -> {verdict}")
        steps.append({"knob": name, "removed": removed, "active": trial_active, "cv": trial})
        if removed:
            active, current = trial_active, trial
    return active, steps, current


def ablation(
    scorer: Scorer, questions: Sequence[Question], start: Params, knobs: Sequence[str]
) -> dict:
    """Held-out figures with every knob tuned, and with each of ``knobs`` frozen in turn at
    its neutral value; ``helps``: the knob raised the held-out objective. ``grid``: each
    value of the knob, the others fitted on all questions (in-sample, for the direction)."""
    full = cross_validate(scorer, questions, start, list(KNOBS))
    every = list(range(len(questions)))
    fitted = fit(scorer, start, list(KNOBS), every)
    out: dict = {"all": full}
    for name in knobs:
        without = cross_validate(scorer, questions, start, [k for k in KNOBS if k != name])
        out[name] = {
            "without": without,
            "helps": full["objective"] > without["objective"] + 1e-9,
            "objective_with": full["objective"],
            "objective_without": without["objective"],
            "grid": {
                str(v): _rounded(scorer.aggregate({**fitted, name: v}, every))
                for v in KNOBS[name].grid
            },
        }
    return out


def fit_only(
    scorer: Scorer, questions: Sequence[Question], shipped: Params, knobs: Sequence[str]
) -> dict:
    """Held-out figures with only ``knobs`` fitted per fold and every other knob as shipped,
    against the shipped values unchanged (nothing fitted, so every question is held out);
    ``helps``: fitting them raised the held-out objective. A cheap test of one new knob
    beside the defaults, where the pruning pass refits every knob."""
    fitted = cross_validate(scorer, questions, shipped, knobs, frozen=shipped)
    every = list(range(len(questions)))
    as_shipped = _rounded(scorer.aggregate(shipped, every))
    base = round(objective(as_shipped), 4)
    return {
        "knobs": list(knobs),
        "cv": fitted,
        "shipped": as_shipped,
        "objective_shipped": base,
        "objective_fitted": fitted["objective"],
        "helps": fitted["objective"] > base + 1e-9,
        "grid": {
            name: {
                str(v): _rounded(scorer.aggregate({**shipped, name: v}, every))
                for v in KNOBS[name].grid
            }
            for name in knobs
        },
    }


def tune(
    deps,
    user_id: str,
    questions: Sequence[Question],
    ablate: Sequence[str] = (),
    only: Sequence[str] = (),
) -> dict:
    """Every lane once per question, no time prior (the prior is re-applied per setting);
    then the pruning (or the ablation) and the knobs left fitted on every question."""
    base = EpisodicOptions.from_settings(deps.settings)
    every_lane = replace(
        base, weights=dict.fromkeys(ALL_LANES, 1.0), prior=PriorParams(0.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    )

    async def lane_runs() -> list[LaneRun]:
        return [
            await run_lanes(
                deps,
                user_id,
                q.query_text,
                q.query_time,
                every_lane,
                time_text=q.question,
                importance=True,  # the importance knob is re-applied per setting
            )
            for q in questions
        ]

    started = time.perf_counter()
    runs = asyncio.run(lane_runs())
    lanes_s = time.perf_counter() - started
    scorer = Scorer(deps, base, runs, [truth.truth_intervals(q.targets) for q in questions])
    shipped = params_of(base)
    every = list(range(len(questions)))
    if only:
        found = fit_only(scorer, questions, shipped, only)
        print(
            f"fitting {', '.join(only)}: held-out objective {found['objective_fitted']}"
            f" against {found['objective_shipped']} as shipped"
        )
        return {
            "questions": len(questions),
            "lanes_s": round(lanes_s, 1),
            "shipped": shipped,
            "fit_only": found,
            "settings_scored": scorer.evaluated,
            "tune_s": round(time.perf_counter() - started, 1),
        }
    if ablate:
        found = ablation(scorer, questions, shipped, ablate)
        active = [k for k in KNOBS if k not in ablate or found[k]["helps"]]
        steps, cv = [{"ablation": found}], found["all"]
    else:
        active, steps, cv = prune(scorer, questions, shipped)
    chosen = fit(scorer, shipped, active, every)

    def figures(p: Params) -> dict:  # fixed parameters (nothing fitted) on all, and per fold
        by_fold = {
            s: {
                name: _rounded(scorer.aggregate(p, idx))
                for name, idx in folds(questions, s).items()
            }
            for s in SCHEMES
        }
        return {"params": p, "all": _rounded(scorer.aggregate(p, every)), "by_fold": by_fold}

    return {
        "questions": len(questions),
        "lanes_s": round(lanes_s, 1),
        "knobs": {k: {"grid": list(v.grid), "neutral": v.neutral} for k, v in KNOBS.items()},
        "shipped": figures(shipped),
        "pruning": steps,
        "kept": active,
        "removed": [k for k in KNOBS if k not in active],
        "chosen": {**figures(chosen), "cv": cv},
        "settings_scored": scorer.evaluated,
        "tune_s": round(time.perf_counter() - started, 1),
    }


def asked_while_stored(
    questions: Sequence[Question], windows: Sequence[Window], stored: set[datetime]
) -> list[Question]:
    """The questions asked before the first clock hour of ``windows`` not fully stored:
    the memory they are asked of is the whole memory at their ``as_of`` (a partly ingested
    week still tunes on its ingested part, never on questions whose evidence is missing)."""
    todo = missing_hours(windows, stored)
    if not todo:
        return list(questions)
    first = min(hour_key(w) for w in todo)
    return [q for q in questions if q.query_time <= first]


class TuneOptions(EgoLifeData):
    ablate: StrList = Field(
        (),
        description="Knobs to ablate, one at a time, against every knob tuned (held-out"
        f" figures); skips the pruning pass. Any of: {', '.join(KNOBS)}.",
    )

    fit: StrList = Field(
        (),
        description="Knobs to fit alone, every other at its shipped value, against the"
        " shipped values (held-out figures); skips the pruning pass. Any of:"
        f" {', '.join(KNOBS)}.",
    )

    @field_validator("ablate", "fit")
    @classmethod
    def _known(cls, knobs: tuple[str, ...]) -> tuple[str, ...]:
        if unknown := [k for k in knobs if k not in KNOBS]:
            raise ValueError(f"unknown knobs {unknown}; known: {list(KNOBS)}")
        return knobs


@harness.main(TuneOptions, required=())
def main(opts: TuneOptions) -> dict:
    """Choose the episodic retriever's parameters by cross-validation over question folds
    (by day and by type) of the memory `worldmm bench egolife` ingested; prints the
    defaults and writes every fold's held-out figures."""
    from bench.egolife.memory_method import retrieval_deps, stored_base_starts
    from bench.egolife.run import memory_deps
    from worldmm.settings import load_settings

    run = harness.Run()
    windows, _, questions = opts.selection()
    with memory_deps(load_settings(), harness.stamped_echo()) as deps:
        selected = len(questions)
        questions = asked_while_stored(questions, windows, stored_base_starts(deps, opts.user_id))
        print(
            f"{len(windows)} windows, {len(questions)} of {selected} questions asked of a"
            " fully stored memory"
        )
        report = tune(retrieval_deps(deps), opts.user_id, questions, opts.ablate, opts.fit)
        report["questions_selected"] = selected
    if "chosen" in report:
        print(json.dumps({k: report[k] for k in ("kept", "removed", "lanes_s")}, indent=1))
        print(json.dumps(report["chosen"]["params"], indent=1))
    harness.write_report(run.stamp(report), opts.out, show=False)
    return report


if __name__ == "__main__":
    main()
