"""Seeds and rankings on a :class:`~worldmm.graph.timed.TimedGraph` as seen at ``as_of``:
the same recipe as :mod:`worldmm.graph.ppr` and :mod:`worldmm.graph.scoring`, with the time
mask applied to seeding (only vertices that existed), propagation (only edges that existed,
in :mod:`worldmm.graph.local_ppr`) and ranking (only segments / triples that existed).

Every function reads the neighbourhood of the vertices it is given, never the whole graph,
so its cost does not grow with the length of the memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

import numpy as np

from worldmm.graph.local_ppr import LocalScores
from worldmm.graph.ppr import DEFAULT_SEGMENT_WEIGHT
from worldmm.graph.timed import MENTION, NEVER, SEGMENT, TimedGraph
from worldmm.graph.types import segment_node


def segment_spread(graph: TimedGraph, v: int, as_of: int | None) -> int:
    """Segments adjacent to ``v`` by a visible mention edge (0 for a segment itself)."""
    if graph.kind[v] == SEGMENT:
        return 0
    vertices = np.array([v], dtype=np.int64)
    _, units = graph.gather_visible(vertices, as_of)
    units = units[graph.ukind[units] == MENTION]
    far = graph.neighbours(vertices, np.zeros(len(units), dtype=np.int64), units)
    far = far[graph.kind[far] == SEGMENT]
    return len(np.unique(far))


def timed_seeds(
    graph: TimedGraph,
    node_scores: Mapping[str, float],
    as_of: int | None,
    segment_scores: Mapping[int, float] | None = None,
    segment_weight: float = DEFAULT_SEGMENT_WEIGHT,
) -> dict[int, float]:
    """Reset mass per vertex, as :func:`worldmm.graph.ppr.seed_vector` computes it on a graph
    built from the rows visible at ``as_of`` (names that did not exist yet are ignored)."""
    reset: dict[int, float] = {}

    def add(i: int, mass: float) -> None:
        reset[i] = reset.get(i, 0.0) + mass

    for name, score in node_scores.items():
        i = graph.position.get(name)
        if i is not None and score > 0 and graph.vertex_visible(i, as_of):
            add(i, score / max(1.0, segment_spread(graph, i, as_of)))
    if segment_scores:
        top = max(segment_scores.values())
        if top > 0:
            for segment_id, score in segment_scores.items():
                i = graph.position.get(segment_node(segment_id))
                if i is not None and score > 0 and graph.vertex_visible(i, as_of):
                    add(i, segment_weight * score / top)
    return reset


def timed_top_segments(
    graph: TimedGraph, result: LocalScores, as_of: int | None, k: int
) -> list[tuple[int, float]]:
    """The ``k`` visible segments with the highest score, ties in vertex order. As with a
    full score vector, fewer than ``k`` scored segments are followed by unscored ones (score
    0, vertex order); those are read from the front of the segment list, not all of it."""
    if k <= 0 or graph.n == 0:
        return []
    v = result.vertices
    keep = (graph.kind[v] == SEGMENT) & (result.scores > 0)
    if as_of is not None:
        keep &= graph.v_from[v] <= as_of
    v, s = v[keep], result.scores[keep]
    order = np.argsort(-s, kind="stable")[:k]
    out = [(int(graph.segment_id[v[i]]), float(s[i])) for i in order]
    if len(out) < k:
        listed = set(v[order].tolist())
        for u in graph.segment_vertices():
            if len(out) == k:
                break
            if u not in listed and (as_of is None or graph.v_from[u] <= as_of):
                out.append((int(graph.segment_id[u]), 0.0))
    return out


def timed_top_triples(
    graph: TimedGraph, result: LocalScores, as_of: int | None, k: int
) -> list[tuple[int, float]]:
    """Semantic: the ``k`` visible triples with the highest PPR(subject) + PPR(object), as
    ``(triple_id, score)``, ties in unit order; only triples touching a scored vertex are
    candidates."""
    return [(int(graph.triple_id[u]), s) for u, s in top_triple_units(graph, result, as_of, k)]


def top_triple_units(
    graph: TimedGraph, result: LocalScores, as_of: int | None, k: int
) -> list[tuple[int, float]]:
    """:func:`timed_top_triples` as ``(unit index, score)``."""
    if k <= 0 or not len(result.vertices):
        return []
    score = np.zeros(graph.n)
    score[result.vertices] = result.scores
    _, units = graph.gather(result.vertices)
    units = np.unique(units)
    units = units[graph.unit_visible(units, as_of)]
    per_unit = score[graph.src[units]] + score[graph.dst[units]]
    order = np.argsort(-per_unit, kind="stable")
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for i in order:
        tid = int(graph.triple_id[units[i]])
        if tid < 0 or tid in seen:
            continue
        seen.add(tid)
        out.append((int(units[i]), float(per_unit[i])))
        if len(out) == k:
            break
    return out


def micros_to_datetime(value: int) -> datetime | None:
    if value == NEVER:
        return None
    return datetime.fromtimestamp(value / 1_000_000, tz=UTC)
