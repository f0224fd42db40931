"""Turn vertex PageRank scores into ranked segments (episodic) or ranked triples (semantic)."""

from __future__ import annotations

import igraph as ig
import numpy as np

from worldmm.graph.index import graph_index


def top_segments(graph: ig.Graph, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` segment vertices with the highest score, as ``(segment_id, score)``.

    Ties keep vertex order (stable sort), which is insertion order of the triples.
    """
    if k <= 0 or graph.vcount() == 0:
        return []
    gi = graph_index(graph)
    if len(gi.segments) == 0:
        return []
    seg_scores = scores[gi.segments]
    order = np.argsort(-seg_scores, kind="stable")[:k]
    return [(int(gi.segment_ids[i]), float(seg_scores[i])) for i in order]


def edge_scores(graph: ig.Graph, scores: np.ndarray) -> np.ndarray:
    """Score of every edge: PPR(subject) + PPR(object)."""
    if graph.ecount() == 0:
        return np.zeros(0)
    edges = graph_index(graph).edges
    return scores[edges[:, 0]] + scores[edges[:, 1]]


def top_triples(graph: ig.Graph, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` best-scoring edges that carry a ``triple_id``, as ``(triple_id, score)``.

    A triple appears once even if (in a hand-built graph) several edges carry its id.
    """
    if k <= 0 or graph.ecount() == 0:
        return []
    per_edge = edge_scores(graph, scores)
    triple_ids = graph.es["triple_id"]
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for e in np.argsort(-per_edge, kind="stable"):
        tid = triple_ids[e]
        if tid is None or tid in seen:
            continue
        seen.add(tid)
        out.append((int(tid), float(per_edge[e])))
        if len(out) == k:
            break
    return out
