"""Choose the episodic retriever's fusion parameters on some days only (e.g. days 1-3).

    worldmm bench egolife-tune --days 1-3 [--out tune.json]   # = python -m bench.egolife.tune

Runs the three lanes once per question with no time prior (raw lane order), then scores
parameter settings by re-applying priors, fusion and drill-down to those same lane results,
one parameter at a time (coordinate ascent on hit@3 + tIoU). It reads the memory of the
benchmark user as ingested by ``worldmm bench egolife`` (run that first, with the same days).
The parameters it prints are what the settings' defaults should be; the report is written
for the record. Tuning on part of the week and reporting on all of it is the point: the
figures of the other days are not fitted.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

from pydantic import Field

from bench import harness
from bench.egolife import truth
from bench.egolife.data import load_questions, load_windows, select_questions
from bench.egolife.memory_method import ranked
from bench.egolife.run import Days, EgoLifeData
from worldmm.memory.retrieval.episodic import EpisodicOptions, LaneRun, finish, run_lanes
from worldmm.memory.retrieval.fusion import PriorParams, apply_prior

GRID: dict[str, list] = {
    "default_weight": [0.0, 0.25, 0.5, 1.0, 2.0, 4.0],
    "default_halflife_h": [1.0, 3.0, 6.0, 12.0, 24.0, 72.0],
    "weight": [0.0, 1.0, 2.0, 4.0, 8.0],
    "halflife_h": [0.5, 1.0, 3.0, 6.0, 12.0],
    "graph": [0.0, 0.25, 0.5, 1.0],
    "lexical": [0.5, 1.0, 1.5],
    "drill_parents": [0, 3, 5, 10],
    "drill_keep": [1, 2, 3],
    "rrf_k": [10.0, 30.0, 60.0],
}


def options_for(base: EpisodicOptions, p: dict) -> EpisodicOptions:
    prior = PriorParams(p["default_weight"], p["default_halflife_h"], p["weight"], p["halflife_h"])
    weights = {"lexical": p["lexical"], "dense": 1.0, "graph": p["graph"]}
    return replace(
        base,
        prior=prior,
        weights=weights,
        drill_parents=p["drill_parents"],
        drill_keep=p["drill_keep"],
        rrf_k=p["rrf_k"],
    )


async def score(deps, runs, truths, opts: EpisodicOptions) -> dict:
    scores = []
    for run, g in zip(runs, truths, strict=True):
        lanes = {
            k: apply_prior(v, run.constraint, run.as_of, opts.prior) for k, v in run.lanes.items()
        }
        result = await finish(deps, replace(run, lanes=lanes), opts)
        scores.append(truth.score(ranked(result.hits), g))
    return truth.aggregate(scores)


async def tune(deps, user_id: str, questions) -> dict:
    base = EpisodicOptions.from_settings(deps.settings)
    flat = replace(base, prior=PriorParams(0.0, 1.0, 0.0, 1.0))
    runs: list[LaneRun] = []
    started = time.perf_counter()
    for q in questions:
        run = run_lanes(deps, user_id, q.query_text, q.query_time, flat, time_text=q.question)
        runs.append(await run)
    lanes_s = time.perf_counter() - started
    truths = [truth.truth_intervals(q.targets) for q in questions]
    p = {
        "default_weight": base.prior.default_weight,
        "default_halflife_h": base.prior.default_halflife_h,
        "weight": base.prior.weight,
        "halflife_h": base.prior.halflife_h,
        "graph": base.weights.get("graph", 1.0),
        "lexical": base.weights.get("lexical", 1.0),
        "drill_parents": base.drill_parents,
        "drill_keep": base.drill_keep,
        "rrf_k": base.rrf_k,
    }

    def objective(agg: dict) -> float:
        return agg["hit@3"] + agg["tiou"]

    best = await score(deps, runs, truths, options_for(base, p))
    history = [{"params": dict(p), **best}]
    print("start", p, best, flush=True)
    for _round in range(2):
        for name, values in GRID.items():
            for v in values:
                if v == p[name]:
                    continue
                trial = {**p, name: v}
                agg = await score(deps, runs, truths, options_for(base, trial))
                history.append({"params": trial, **agg})
                if objective(agg) > objective(best) + 1e-9:
                    p, best = trial, agg
                    print("better", name, v, best, flush=True)
    figures = {"best": p, "figures": best, "history": history}
    return {"questions": len(questions), "lanes_s": round(lanes_s, 1), **figures}


class TuneOptions(EgoLifeData):
    days: Days = Field([1, 2, 3], description="Days whose questions tune, e.g. 1-3.")


@harness.main(TuneOptions, required=())
def main(opts: TuneOptions) -> dict:
    """Choose the episodic retriever's fusion parameters on some days (default 1-3) of the
    memory `worldmm bench egolife` ingested; prints the best and writes the history."""
    from rich.console import Console

    from bench.egolife.memory_method import retrieval_deps
    from bench.egolife.run import memory_deps
    from worldmm.settings import load_settings

    run, days = harness.Run(), set(opts.days or [])
    windows = load_windows(opts.sync_dir, days)
    questions = select_questions(load_questions(opts.questions), days, None)
    print(f"{len(windows)} windows, {len(questions)} questions on days {sorted(days)}")
    with memory_deps(load_settings(), Console(stderr=True)) as deps:
        report = asyncio.run(tune(retrieval_deps(deps), opts.user_id, questions))
    print(json.dumps({k: report[k] for k in ("best", "figures", "lanes_s")}, indent=1))
    harness.write_report(run.stamp(report), opts.out, show=False)
    return report


if __name__ == "__main__":
    main()
