"""Turn vertex PageRank scores into ranked segments (episodic) or ranked triples (semantic)."""

from __future__ import annotations

import igraph as ig
import numpy as np


def top_segments(graph: ig.Graph, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The ``k`` segment vertices with the highest score, as ``(segment_id, score)``.

    Ties keep vertex order (stable sort), which is insertion order of the triples.
    """
    if k <= 0 or graph.vcount() == 0:
        return []
    ids = graph.vs["segment_id"]
    idx = [i for i, kind in enumerate(graph.vs["kind"]) if kind == "segment"]
    ranked = sorted(idx, key=lambda i: -scores[i])
    return [(int(ids[i]), float(scores[i])) for i in ranked[:k]]


def edge_scores(graph: ig.Graph, scores: np.ndarray) -> np.ndarray:
    """Score of every edge: PPR(subject) + PPR(object)."""
    if graph.ecount() == 0:
        return np.zeros(0)
    edges = np.asarray(graph.get_edgelist(), dtype=np.int64)
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
