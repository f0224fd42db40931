"""The semantic ranking study (``worldmm bench semantic-rank``) on a generated fact graph: the
bounded ranking equals reading every vertex and the one before it, and push at a tight bound
keeps the exact top k."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from bench.semantic_rank import _rank_as_before, measure
from worldmm.graph.pagerank import fact_seed_scores, ppr, seed_vertices
from worldmm.graph.timed import build_timed
from worldmm.graph.types import GraphTriple
from worldmm.memory.retrieval import semantic

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def facts(n: int = 600, names: int = 120, seed: int = 3) -> list[GraphTriple]:
    rnd = random.Random(seed)
    return [
        GraphTriple(
            triple_id=i,
            subject=f"w{rnd.randrange(6) if rnd.random() < 0.4 else rnd.randrange(names)}",
            predicate=rnd.choice(["likes", "owns"]),
            object=f"w{rnd.randrange(names)}",
            valid_from=T0 + timedelta(minutes=i),
            invalidated_at=T0 + timedelta(days=1) if i % 9 == 0 else None,
        )
        for i in range(1, n + 1)
    ]


def test_the_study_reports_every_figure_and_the_bounded_ranking_is_the_full_one():
    rows = facts()
    graph = build_timed("semantic", rows)
    rnd = random.Random(0)
    active = [r for r in rows if r.invalidated_at is None]
    resets = [
        seed_vertices(graph, fact_seed_scores([(f, 0.8) for f in rnd.sample(active, 5)]), None)
        for _ in range(12)
    ]
    got = measure(graph, resets, 10)
    assert got["bounded_identical"] == "12/12"
    assert set(got["ms"]) >= {"prpack_pairs", "prpack_per_fact", "rank_bounded", "rank_as_before"}
    assert got["top_k_kept"]["push_1e-06"] >= 0.9
    assert set(got["build_ms"]) == {"pairs", "per_fact"}
    # the "before" ranking it times is the one the bounded ranking replaced
    for reset in resets:
        exact = ppr(graph, reset, None, 0.85, "prpack")
        now = [
            int(graph.triple_id[u]) for u, _ in semantic.top_triple_units(graph, exact, None, 10)
        ]
        assert _rank_as_before(graph, exact, 10) == now
