"""Personalized PageRank over a memory graph, with HippoRAG-style seed weights.

Seeds: an entity matched with score ``s`` adds ``s / max(1, n)`` to its vertex, where ``n`` is
the number of segments that mention the entity — an entity seen in every segment says little
about which one is meant. Segments with a dense (text similarity) score add
``segment_weight * score / max_score``, a small nudge that keeps lexical evidence in play
without drowning the graph signal.

Fallback: when no seed lands in the graph the reset vector is uniform over the segment
vertices (or over all vertices when there are none), i.e. plain PageRank restarted at any
segment, which ranks by how central a segment is. Callers see ``PprResult.fallback`` and may
prefer their own ordering.

Threads: igraph's prpack runs on OpenMP (igraph bundles libgomp). Unlimited, every call starts
a team of one thread per core and spins; on a busy machine that turned a 2 ms solve into
0.5–2.7 s. One query is one thread here (the service runs many queries at once), so each call
is limited to a single OpenMP thread, in the calling thread only.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass

import igraph as ig
import numpy as np
from threadpoolctl import ThreadpoolController

from worldmm.graph.index import graph_index
from worldmm.graph.types import GraphTriple, entity_node, literal_node, segment_node

DEFAULT_DAMPING = 0.85
DEFAULT_SEGMENT_WEIGHT = 0.05


@dataclass(frozen=True)
class PprResult:
    scores: np.ndarray  # one score per vertex, sums to 1 (empty for an empty graph)
    fallback: bool  # True when no seed was in the graph and the uniform reset was used


def segments_per_vertex(graph: ig.Graph) -> np.ndarray:
    """How many segment vertices each vertex is adjacent to (0 for segments themselves)."""
    return graph_index(graph).spread.copy()


def fact_seed_scores(facts: list[tuple[GraphTriple, float]]) -> dict[str, float]:
    """Vertex-name scores from matched facts: subject and object each get the fact's score
    (negative cosines count as 0)."""
    scores: dict[str, float] = {}
    for t, raw in facts:
        score = max(0.0, raw)
        obj = literal_node(t.subject, t.object) if t.object_is_literal else entity_node(t.object)
        for name in (entity_node(t.subject), obj):
            scores[name] = scores.get(name, 0.0) + score
    return scores


def seed_vector(
    graph: ig.Graph,
    node_scores: Mapping[str, float],
    segment_scores: Mapping[int, float] | None = None,
    segment_weight: float = DEFAULT_SEGMENT_WEIGHT,
) -> np.ndarray:
    """Reset vector from vertex-name scores (entities, literals) and dense segment scores.

    Names not in the graph are ignored (e.g. an entity with no triple before ``as_of``);
    non-positive scores are dropped.
    """
    reset = np.zeros(graph.vcount(), dtype=np.float64)
    if graph.vcount() == 0:
        return reset
    gi = graph_index(graph)
    index, spread = gi.position, gi.spread
    for name, score in node_scores.items():
        i = index.get(name)
        if i is not None and score > 0:
            reset[i] += score / max(1.0, spread[i])
    if segment_scores:
        top = max(segment_scores.values())
        if top > 0:
            for segment_id, score in segment_scores.items():
                i = index.get(segment_node(segment_id))
                if i is not None and score > 0:
                    reset[i] += segment_weight * score / top
    return reset


def personalized_pagerank(
    graph: ig.Graph, reset: np.ndarray, damping: float = DEFAULT_DAMPING
) -> PprResult:
    """Run PPR (prpack) from ``reset``; fall back to a uniform segment reset when it is empty."""
    n = graph.vcount()
    if n == 0:
        return PprResult(np.zeros(0), fallback=False)
    if reset.shape != (n,):
        raise ValueError(f"reset vector has shape {reset.shape}, graph has {n} vertices")
    fallback = not np.any(reset > 0)
    if fallback:
        reset = _uniform_segment_reset(graph)
    # The attribute's name, not its values: igraph reads it in C, no 260k-item list per call.
    weights = "weight" if graph_index(graph).has_weight else None
    with _openmp().limit(limits=1, user_api="openmp"):
        scores = graph.personalized_pagerank(
            directed=False,
            damping=damping,
            reset=reset.tolist(),
            weights=weights,
            implementation="prpack",
        )
    return PprResult(np.asarray(scores, dtype=np.float64), fallback=fallback)


@functools.cache
def _openmp() -> ThreadpoolController:
    """Found once (scans the loaded libraries, igraph's libgomp included)."""
    return ThreadpoolController()


def _uniform_segment_reset(graph: ig.Graph) -> np.ndarray:
    kinds = graph.vs["kind"] if "kind" in graph.vs.attributes() else []
    reset = np.array([k == "segment" for k in kinds], dtype=np.float64)
    if not reset.any():
        reset = np.ones(graph.vcount(), dtype=np.float64)
    return reset
