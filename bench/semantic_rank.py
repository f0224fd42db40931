"""Semantic search's PageRank and ranking on a kept wearer's fact graph: exact PRPACK against
forward push at three error bounds (time, and how much of the exact top k each keeps), the
PRPACK graph with one edge per fact against one edge per vertex pair (build and solve), and
the ranking of facts reading every vertex against the bounded one (time; identical or not).

Seeds are drawn as a search draws them: ``FACT_SEEDS`` of the wearer's active facts with
cosines in [0.3, 0.9], through the same ``seed_vertices``. Nothing is written; the wearer must
exist (``worldmm bench query --keep`` leaves one)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import igraph as ig
import numpy as np
from pydantic import Field

from bench import harness
from worldmm.graph.pagerank import _openmp, fact_seed_scores, ppr, seed_vertices
from worldmm.graph.timed import TimedGraph, build_timed
from worldmm.memory.retrieval import semantic

EPSILONS = (1e-4, 1e-5, 1e-6)
DAMPING = 0.85


class SemanticRankOptions(harness.Options):
    user: str = Field(description="A kept wearer with semantic memory (e.g. from bench query).")
    searches: int = Field(100, ge=1, description="Seed sets drawn (one search each).")
    k: int = Field(10, ge=1, description="Facts a search returns.")
    seed: int = Field(0, description="Draw seed.")


def _ms(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, 1000 * (time.perf_counter() - t)


def _ids(graph: TimedGraph, ranked: list[tuple[int, float]]) -> list[int]:
    return [int(graph.triple_id[u]) for u, _ in ranked]


def measure(graph: TimedGraph, resets: list[dict[int, float]], k: int) -> dict[str, Any]:
    """Every figure of the report over one graph and its seed sets (pure but for time)."""
    times: dict[str, list[float]] = {}
    kept: dict[str, list[float]] = {}
    identical = 0
    graph.igraph_visible(None)  # built once per graph object, as a warm search finds it
    per_fact = _per_fact_igraph(graph)  # the old form: one edge per fact
    all_vertices = np.arange(graph.n)
    for reset in resets:
        exact, t = _ms(lambda r=reset: ppr(graph, r, None, DAMPING, "prpack"))
        times.setdefault("prpack_pairs", []).append(t)
        vec = np.zeros(graph.n)
        for v, m in reset.items():
            vec[v] += m
        with _openmp().limit(limits=1, user_api="openmp"):  # as the solver runs it
            _, t = _ms(
                lambda v=vec: per_fact.personalized_pagerank(
                    directed=False, damping=DAMPING, reset=v.tolist(), weights="weight"
                )
            )
        times.setdefault("prpack_per_fact", []).append(t)
        bounded, t = _ms(lambda e=exact: semantic.top_triple_units(graph, e, None, k))
        times.setdefault("rank_bounded", []).append(t)
        score = np.zeros(graph.n)
        score[exact.vertices] = exact.scores
        full, t = _ms(lambda s=score: semantic._rank_units(graph, s, all_vertices, None, k))
        times.setdefault("rank_every_vertex", []).append(t)
        identical += bounded == full
        _, t = _ms(lambda e=exact: _rank_as_before(graph, e, k))
        times.setdefault("rank_as_before", []).append(t)
        want = set(_ids(graph, full))
        for eps in EPSILONS:
            pushed, t = _ms(lambda r=reset, e=eps: ppr(graph, r, None, DAMPING, "push", e))
            times.setdefault(f"push_{eps:g}", []).append(t)
            got = set(_ids(graph, semantic.top_triple_units(graph, pushed, None, k)))
            kept.setdefault(f"push_{eps:g}", []).append(len(got & want) / max(1, len(want)))
    visible = graph.all_units_visible(None)
    builds = {  # best of five: what a cold search pays once per graph object
        "pairs": min(_ms(lambda: graph._collapsed(visible))[1] for _ in range(5)),
        "per_fact": min(_ms(lambda: _per_fact_igraph(graph))[1] for _ in range(5)),
    }
    return {
        "ms": {name: harness.summary(values) for name, values in times.items()},
        "top_k_kept": {name: round(float(np.mean(v)), 3) for name, v in kept.items()},
        "bounded_identical": f"{identical}/{len(resets)}",
        "build_ms": {name: round(v, 2) for name, v in builds.items()},
    }


def _rank_as_before(graph: TimedGraph, result: Any, k: int) -> list[int]:
    """The ranking before the bound (1767499^): every scored vertex's facts, np.unique and a
    full stable argsort."""
    score = np.zeros(graph.n)
    score[result.vertices] = result.scores
    _, units = graph.gather(result.vertices)
    units = np.unique(units)
    units = units[graph.unit_visible(units, None)]
    per_unit = score[graph.src[units]] + score[graph.dst[units]]
    out: list[int] = []
    for i in np.argsort(-per_unit, kind="stable"):
        tid = int(graph.triple_id[units[i]])
        if tid >= 0 and tid not in out:
            out.append(tid)
            if len(out) == k:
                break
    return out


def _per_fact_igraph(graph: TimedGraph) -> ig.Graph:
    """The PRPACK graph as it was built: every fact an edge, then the subgraph of the facts
    visible now."""
    keep = np.flatnonzero(graph.all_units_visible(None))
    return graph.igraph().subgraph_edges(keep.tolist(), delete_vertices=False)


def run_study(settings: Any, opts: SemanticRankOptions, echo: harness.Echo) -> dict[str, Any]:
    from worldmm.memory.retrieval.reader import MemoryReader
    from worldmm.store.db import Database

    db = Database(settings.database_url)
    try:
        rows = MemoryReader(db).graph_history(opts.user, "semantic", None)
    finally:
        db.close()
    if not rows:
        raise ValueError(f"user {opts.user!r} has no semantic memory")
    graph = build_timed("semantic", rows)
    active = [r for r in rows if r.invalidated_at is None]
    rng = random.Random(opts.seed)
    resets = []
    for _ in range(opts.searches):
        facts = [(f, rng.uniform(0.3, 0.9)) for f in rng.sample(active, semantic.FACT_SEEDS)]
        resets.append(seed_vertices(graph, fact_seed_scores(facts), None))
    echo(f"{opts.user}: {graph.units} facts, {graph.n} vertices; {opts.searches} searches")
    result = measure(graph, resets, opts.k)
    echo(f"  {result['ms']['prpack_pairs']} PRPACK; bounded ranking {result['ms']['rank_bounded']}")
    return {
        "benchmark": "semantic_rank",
        "user_id": opts.user,
        "facts": graph.units,
        "vertices": graph.n,
        "loadavg": harness.loadavg(),
        **result,
    }


@harness.main(SemanticRankOptions)
def main(opts: SemanticRankOptions) -> dict[str, Any]:
    """Semantic search's PageRank solvers and fact ranking on a kept wearer's fact graph."""
    run = harness.Run()
    measure_on = lambda settings, echo: run.stamp(run_study(settings, opts, echo))  # noqa: E731
    return harness.report_on_stack(opts.out, measure_on, keep=True)


if __name__ == "__main__":
    main()
