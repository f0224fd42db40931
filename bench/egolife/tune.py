"""Choose the episodic retriever's parameters by cross-validation over question folds, on
the memory ``worldmm bench egolife`` ingested (same days); the method, and ``--ablate``, are in
docs/benchmarks/egolife.md ("How the parameters are chosen"). The report keeps each fold's
held-out figures and their spread for every step.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from pydantic import Field, field_validator

from bench import harness
from bench.egolife import folds, truth
from bench.egolife.data import Question, Window
from bench.egolife.memory_method import ALL_LANES, hour_key, missing_hours
from bench.egolife.run import EgoLifeData
from bench.egolife.truth import QuestionScore, Ranked
from bench.harness import StrList
from worldmm.memory.retrieval.episodic import EpisodicOptions, LaneRun, run_lanes, select
from worldmm.memory.retrieval.fusion import PriorParams, apply_prior

Params = dict[str, float]


@dataclass(frozen=True)
class Knob:
    """One tunable value: its grid, and what it becomes when removed (a number, or the name
    of the knob it is then tied to)."""

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
ROUNDS = 2  # coordinate ascent passes (stops early when a pass changes nothing)


def objective(agg: dict) -> float:
    return agg["hit@3"] + agg["tiou"]


def resolve(p: Params, active: Sequence[str]) -> Params:
    """``p`` with every knob not in ``active`` at its neutral value (ties followed)."""
    out = dict(p)
    for name in [n for n in KNOBS if n not in active]:
        neutral = KNOBS[name].neutral
        out[name] = neutral if isinstance(neutral, float) else out[neutral]
    return out


def options_for(base: EpisodicOptions, p: Params) -> EpisodicOptions:
    prior = PriorParams(
        p["recency_weight"],
        p["recency_halflife_h"],
        p["prior_weight"],
        p["prior_halflife_h"],
        p["importance_weight"],
        0.0,  # EgoLife has no recall history: the recall prior is not tuned here
    )
    weights = {"lexical": p["lexical"], "dense": 1.0, "graph": p["graph"], "entity": p["entity"]}
    return replace(
        base,
        prior=prior,
        weights=weights,
        rrf_k=p["rrf_k"],
        drill_parents=int(p["drill_parents"]),
        drill_keep=int(p["drill_keep"]),
        llm_rerank=False,
    )


def params_of(base: EpisodicOptions) -> Params:
    """The knobs' values in ``base`` (the settings as shipped)."""
    return {
        "entity": base.weights.get("entity", 0.0),
        "graph": base.weights.get("graph", 0.0),
        "lexical": base.weights.get("lexical", 0.0) / (base.weights.get("dense") or 1.0),
        "recency_weight": base.prior.default_weight,
        "recency_halflife_h": base.prior.default_halflife_h,
        "prior_weight": base.prior.weight,
        "prior_halflife_h": base.prior.halflife_h,
        "importance_weight": base.prior.importance_weight,
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
        key = tuple(sorted(p.items()))
        memo = self._memo.setdefault(key, {})
        opts = options_for(self.base, p)
        for i in idx:
            if i not in memo:
                memo[i] = self._one(self.runs[i], self.truths[i], opts)
                self.evaluated += 1
        return [memo[i] for i in idx]

    def aggregate(self, p: Params, idx: Sequence[int]) -> dict:
        return truth.aggregate(self.scores(p, idx))

    def _one(self, run: LaneRun, g, opts: EpisodicOptions) -> QuestionScore:
        lanes = {
            k: apply_prior(v, run.constraint, run.as_of, opts.prior, run.priors)
            for k, v in run.lanes.items()
            if k in opts.lanes
        }
        picks = select(self.deps, replace(run, lanes=lanes), opts)
        top = [Ranked(start=x.fused.start, end=x.fused.end, scale=x.fused.scale) for x in picks]
        return truth.score(top, g)


def fit(scorer: Scorer, start: Params, active: Sequence[str], idx: Sequence[int]) -> Params:
    """Coordinate ascent over the ``active`` knobs' grids on questions ``idx``."""
    p = resolve(start, active)
    best = objective(scorer.aggregate(p, idx))
    for _ in range(ROUNDS):
        changed = False
        for name in active:
            for value in KNOBS[name].grid:
                if value == p[name]:
                    continue
                trial = resolve({**p, name: value}, active)
                score = objective(scorer.aggregate(trial, idx))
                if score > best + 1e-9:
                    p, best, changed = trial, score, True
        if not changed:
            break
    return p


def spread(values: Sequence[float]) -> dict:
    stats = {"mean": statistics.fmean, "sd": statistics.pstdev, "min": min, "max": max}
    return {name: round(stat(values), 4) for name, stat in stats.items()}


def cross_validate(
    scorer: Scorer, questions: Sequence[Question], start: Params, active: Sequence[str]
) -> dict:
    """Per scheme: each fold's fitted knobs and held-out figures, the pooled held-out
    figures (every question once) and the spread over folds; ``objective`` is the mean of
    the schemes' pooled held-out objectives."""
    out: dict = {}
    for scheme in folds.SCHEMES:
        per_fold, pooled = {}, []
        for name, train, held in folds.splits(questions, scheme):
            p = fit(scorer, start, active, train)
            scores = scorer.scores(p, held)
            pooled += scores
            per_fold[name] = {"params": p, **_rounded(truth.aggregate(scores))}
        objectives = [objective(f) for f in per_fold.values()]
        out[scheme] = {
            "folds": per_fold,
            "pooled": _rounded(truth.aggregate(pooled)),
            "spread": {
                "hit@3": spread([f["hit@3"] for f in per_fold.values()]),
                "tiou": spread([f["tiou"] for f in per_fold.values()]),
                "objective": spread(objectives),
            },
        }
    out["objective"] = round(
        statistics.fmean(objective(out[s]["pooled"]) for s in folds.SCHEMES), 4
    )
    return out


def held_out_fixed(scorer: Scorer, questions: Sequence[Question], p: Params) -> dict:
    """Fixed parameters (nothing fitted) per fold: what the settings as shipped score."""
    out: dict = {}
    for scheme in folds.SCHEMES:
        parts = folds.folds(questions, scheme).items()
        out[scheme] = {name: _rounded(scorer.aggregate(p, idx)) for name, idx in parts}
    return out


def prune(
    scorer: Scorer,
    questions: Sequence[Question],
    start: Params,
    log: Callable[[str], None] = print,
) -> tuple[list[str], list[dict], dict]:
    """One pass over the knobs: freeze each at its neutral value and keep it frozen when the
    held-out objective does not drop. Returns the knobs left, the record of each step and the
    cross-validation of the knobs left."""
    active = list(KNOBS)
    current = cross_validate(scorer, questions, start, active)
    steps = [{"knob": None, "active": list(active), "cv": current}]
    log(f"all knobs: held-out objective {current['objective']}")
    for name in list(KNOBS):
        trial_active = [k for k in active if k != name]
        trial = cross_validate(scorer, questions, start, trial_active)
        removed = trial["objective"] >= current["objective"] - 1e-9
        log(
            f"without {name}: {trial['objective']} vs {current['objective']}"
            f" -> {'removed' if removed else 'kept'}"
        )
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
    everything = list(range(len(questions)))
    fitted = fit(scorer, start, list(KNOBS), everything)
    out: dict = {"all": full}
    for name in knobs:
        without = cross_validate(scorer, questions, start, [k for k in KNOBS if k != name])
        out[name] = {
            "without": without,
            "helps": full["objective"] > without["objective"] + 1e-9,
            "objective_with": full["objective"],
            "objective_without": without["objective"],
            "grid": {
                str(v): _rounded(scorer.aggregate({**fitted, name: v}, everything))
                for v in KNOBS[name].grid
            },
        }
    return out


def _rounded(agg: dict) -> dict:
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in agg.items()}


async def lane_runs(deps, user_id: str, questions: Sequence[Question]) -> list[LaneRun]:
    """Every lane once per question, no time prior (the prior is re-applied per setting)."""
    base = EpisodicOptions.from_settings(deps.settings)
    every = replace(
        base,
        weights=dict.fromkeys(ALL_LANES, 1.0),
        prior=PriorParams(0.0, 1.0, 0.0, 1.0, 0.0, 0.0),
    )
    return [
        await run_lanes(deps, user_id, q.query_text, q.query_time, every, time_text=q.question)
        for q in questions
    ]


def tune(deps, user_id: str, questions: Sequence[Question], ablate: Sequence[str] = ()) -> dict:
    base = EpisodicOptions.from_settings(deps.settings)
    started = time.perf_counter()
    runs = asyncio.run(lane_runs(deps, user_id, questions))
    lanes_s = time.perf_counter() - started
    scorer = Scorer(deps, base, runs, [truth.truth_intervals(q.targets) for q in questions])
    shipped = params_of(base)
    everything = list(range(len(questions)))
    if ablate:
        found = ablation(scorer, questions, shipped, ablate)
        active = [k for k in KNOBS if k not in ablate or found[k]["helps"]]
        steps, cv = [{"ablation": found}], found["all"]
    else:
        active, steps, cv = prune(scorer, questions, shipped)
    chosen = fit(scorer, shipped, active, everything)
    return {
        "questions": len(questions),
        "lanes_s": round(lanes_s, 1),
        "knobs": {k: {"grid": list(v.grid), "neutral": v.neutral} for k, v in KNOBS.items()},
        "shipped": {
            "params": shipped,
            "all": _rounded(scorer.aggregate(shipped, everything)),
            "by_fold": held_out_fixed(scorer, questions, shipped),
        },
        "pruning": steps,
        "kept": active,
        "removed": [k for k in KNOBS if k not in active],
        "chosen": {
            "params": chosen,
            "all": _rounded(scorer.aggregate(chosen, everything)),
            "by_fold": held_out_fixed(scorer, questions, chosen),
            "cv": cv,
        },
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

    @field_validator("ablate")
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
    from rich.console import Console

    from bench.egolife.memory_method import retrieval_deps, stored_base_starts
    from bench.egolife.run import memory_deps
    from worldmm.settings import load_settings

    run = harness.Run()
    windows, _, questions = opts.selection()
    with memory_deps(load_settings(), Console(stderr=True)) as deps:
        selected = len(questions)
        questions = asked_while_stored(questions, windows, stored_base_starts(deps, opts.user_id))
        print(
            f"{len(windows)} windows, {len(questions)} of {selected} questions asked of a"
            " fully stored memory"
        )
        report = tune(retrieval_deps(deps), opts.user_id, questions, opts.ablate)
        report["questions_selected"] = selected
    print(json.dumps({k: report[k] for k in ("kept", "removed", "lanes_s")}, indent=1))
    print(json.dumps(report["chosen"]["params"], indent=1))
    harness.write_report(run.stamp(report), opts.out, show=False)
    return report


if __name__ == "__main__":
    main()
