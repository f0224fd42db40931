"""Per-graph look-up arrays that every query over the same graph needs.

A week's 30 s episodic graph has about 30k vertices and 260k edges. Rebuilding the name
index, the segment spread and the edge array from igraph's Python lists took a few hundred
milliseconds of each query; they only change when the graph does. So they are computed once
per graph object and kept on it as the graph attribute ``INDEX_ATTR`` (never serialised:
:mod:`worldmm.graph.serialize` keeps a fixed list of attributes). A graph served from the
process-local memo (:mod:`worldmm.graph.cache`) therefore arrives with its index built.

Graphs are read-only once built, so two threads computing the same index at once is
harmless: both results are equal and either may be kept.
"""

from __future__ import annotations

from dataclasses import dataclass

import igraph as ig
import numpy as np

INDEX_ATTR = "_worldmm_index"


@dataclass(frozen=True)
class GraphIndex:
    position: dict[str, int]  # vertex name -> vertex index
    edges: np.ndarray  # (ecount, 2) vertex indices
    spread: np.ndarray  # per vertex: adjacent segment vertices (0 for segments themselves)
    segments: np.ndarray  # vertex indices of the segment vertices, in vertex order
    segment_ids: np.ndarray  # their segment ids
    has_weight: bool


def build_index(graph: ig.Graph) -> GraphIndex:
    n = graph.vcount()
    vattrs = set(graph.vs.attributes())
    names = graph.vs["name"] if "name" in vattrs else [None] * n
    kinds = graph.vs["kind"] if "kind" in vattrs else [None] * n
    is_segment = np.fromiter((k == "segment" for k in kinds), dtype=bool, count=n)
    edges = np.asarray(graph.get_edgelist(), dtype=np.int64).reshape(-1, 2)
    spread = np.zeros(n, dtype=np.float64)
    if "kind" in vattrs and len(edges):
        a, b = edges[:, 0], edges[:, 1]
        np.add.at(spread, a[is_segment[b] & ~is_segment[a]], 1.0)
        np.add.at(spread, b[is_segment[a] & ~is_segment[b]], 1.0)
    segments = np.flatnonzero(is_segment)
    raw_ids = graph.vs["segment_id"] if "segment_id" in vattrs else [None] * n
    ids = np.array([raw_ids[i] for i in segments], dtype=np.int64)
    return GraphIndex(
        position={name: i for i, name in enumerate(names)},
        edges=edges,
        spread=spread,
        segments=segments,
        segment_ids=ids,
        has_weight="weight" in graph.es.attributes(),
    )


def graph_index(graph: ig.Graph) -> GraphIndex:
    """The graph's index, built on first use and kept on the graph."""
    if INDEX_ATTR in graph.attributes():
        found = graph[INDEX_ATTR]
        if isinstance(found, GraphIndex):
            return found
    index = build_index(graph)
    graph[INDEX_ATTR] = index
    return index
