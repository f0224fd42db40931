"""Personalized PageRank over a :class:`~worldmm.graph.timed.TimedGraph` as seen at ``as_of``
(microseconds; None = now): seeds and the time mask in, vertex scores out.

Seeds (HippoRAG's recipe, :func:`seed_vertices`): a named vertex (entity, literal) matched
with score ``s`` adds ``s / max(1, n)``, where ``n`` is how many segments mention it then (an
entity seen in every segment says little about which one is meant); a segment with a dense
score adds ``segment_weight * score / best score``, a nudge that keeps text evidence in play
without drowning the graph. A vertex that did not exist at ``as_of`` is no seed.

Two solvers of igraph's equation, damping ``d``, reset ``s`` normalised to sum 1, a vertex
with no visible edge sending its walk back to ``s`` as PRPACK does:

    pi = (1 - d) s + d (pi P + (pi . dangling) s)

- ``push``: forward push (Andersen, Chung and Lang 2006) over the CSR adjacency. It keeps an
  estimate ``p`` and a residual ``r`` (``r = s`` at the start); pushing a vertex moves
  ``(1 - d) r_u`` into ``p_u`` and spreads ``d r_u`` over its visible edges by weight. It
  stops when every residual is below ``epsilon`` times its vertex's weighted degree, which
  bounds the error of every vertex: ``0 <= pi_v - p_v <= epsilon * deg(v)`` (undirected
  graphs: ``pi_u(v) / deg(v) = pi_v(u) / deg(u)``). The work is about ``1 / (epsilon (1-d))``
  edge visits around the seeds, whatever the size of the graph. Vertices are pushed a
  frontier at a time (numpy), which is the same sequence of valid pushes done in batches.
- ``prpack``: igraph's exact PRPACK on the visible units (the reference, kept selectable).
- ``auto`` (the default): PRPACK for graphs under ``AUTO_PUSH_UNITS`` units, push above.

Both see only the units visible at ``as_of``. With no seed the reset is uniform over the
visible segments (or all visible vertices when there are none), solved exactly: plain
PageRank restarted at any segment ranks by how central it is, a global ranking by nature.
Callers see ``PprScores.fallback`` and log it.

Threads: igraph's PRPACK runs on OpenMP (igraph bundles libgomp). Unlimited, every call
starts a team of one thread per core and spins; on a busy machine that turned a 2 ms solve
into 0.5-2.7 s. One query is one thread here (the service runs many queries at once), so each
call is limited to a single OpenMP thread, in the calling thread only.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
from threadpoolctl import ThreadpoolController

from worldmm.graph.timed import MENTION, SEGMENT, TimedGraph
from worldmm.graph.types import GraphTriple, entity_node, literal_node, segment_node

PprMethod = Literal["auto", "push", "prpack"]
DEFAULT_SEGMENT_WEIGHT = 0.05
DEFAULT_EPSILON = 1e-6
# "auto": below this many units PRPACK is exact and faster than push (at a tight epsilon push
# reaches most of a small graph anyway); above it push's bounded work wins. Measured on the
# query benchmark's week: 180 s graph (54k units) PRPACK 29 ms vs push 125 ms; 30 s graph
# (468k units) PRPACK 318 ms vs push 43 ms.
AUTO_PUSH_UNITS = 200_000
MAX_ROUNDS = 10_000  # a safety stop; push converges long before (d^rounds of the mass)


@dataclass(frozen=True)
class PprScores:
    vertices: np.ndarray  # vertex indices with a score, int64
    scores: np.ndarray  # their scores (push: lower bounds within epsilon * degree)
    fallback: bool  # no seed was visible: the uniform segment reset was used


# --- seeds ----------------------------------------------------------------------------------
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


def segment_spread(graph: TimedGraph, v: int, as_of: int | None) -> int:
    """Segments adjacent to ``v`` by a visible mention edge (0 for a segment itself)."""
    if graph.kind[v] == SEGMENT:
        return 0
    vertices = np.array([v], dtype=np.int64)
    _, units = graph.gather_visible(vertices, as_of)
    units = units[graph.ukind[units] == MENTION]
    far = graph.neighbours(vertices, np.zeros(len(units), dtype=np.int64), units)
    return len(np.unique(far[graph.kind[far] == SEGMENT]))


def seed_vertices(
    graph: TimedGraph,
    node_scores: Mapping[str, float],
    as_of: int | None,
    segment_scores: Mapping[int, float] | None = None,
    segment_weight: float = DEFAULT_SEGMENT_WEIGHT,
) -> dict[int, float]:
    """Reset mass per vertex from vertex-name scores and dense segment scores; names not in
    the graph at ``as_of`` and non-positive scores are ignored. Reads only the seeds'
    neighbourhoods."""
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


# --- solvers --------------------------------------------------------------------------------
def ppr(
    graph: TimedGraph,
    reset: dict[int, float],
    as_of: int | None,
    damping: float,
    method: PprMethod = "auto",
    epsilon: float = DEFAULT_EPSILON,
) -> PprScores:
    """PPR from ``reset`` (vertex -> mass, visible vertices only); an empty reset falls back
    to the uniform reset over the visible segments, solved exactly."""
    fallback = not reset
    if fallback:
        visible = np.flatnonzero(graph.visible_vertices(as_of))
        segments = visible[graph.kind[visible] == SEGMENT]
        chosen = segments if len(segments) else visible
        if not len(chosen):
            return PprScores(np.zeros(0, np.int64), np.zeros(0), True)
        reset = {int(v): 1.0 for v in chosen}
        method = "prpack"
    if method == "auto":
        method = "push" if graph.units >= AUTO_PUSH_UNITS else "prpack"
    if method == "prpack":
        vertices, scores = _prpack(graph, reset, as_of, damping)
    elif method == "push":
        vertices, scores = _push(graph, reset, as_of, damping, epsilon)
    else:
        raise ValueError(f"unknown PPR method {method!r}; expected auto, push or prpack")
    return PprScores(vertices, scores, fallback)


def _degrees(graph: TimedGraph, vertices: np.ndarray, as_of: int | None) -> np.ndarray:
    if as_of is None:
        return graph.degrees_now()[vertices]
    rows, units = graph.gather_visible(vertices, as_of)
    return np.bincount(rows, graph.weight[units], minlength=len(vertices))


def _push(
    graph: TimedGraph, reset: dict[int, float], as_of: int | None, d: float, eps: float
) -> tuple[np.ndarray, np.ndarray]:
    n = graph.n
    seeds = np.fromiter(reset.keys(), dtype=np.int64, count=len(reset))
    mass = np.fromiter(reset.values(), dtype=np.float64, count=len(reset))
    mass /= mass.sum()
    p = np.zeros(n)
    r = np.zeros(n)
    deg = np.full(n, -1.0)  # masked weighted degree, filled on first need
    touched = np.zeros(n, dtype=bool)
    r[seeds] = mass
    touched[seeds] = True
    frontier = seeds
    for _ in range(MAX_ROUNDS):
        unknown = frontier[deg[frontier] < 0]
        if len(unknown):
            deg[unknown] = _degrees(graph, unknown, as_of)
        # A vertex with no visible edge has no degree to scale by: push it while r >= eps.
        frontier = frontier[r[frontier] >= eps * np.maximum(deg[frontier], 1.0)]
        if not len(frontier):
            break
        ru = r[frontier].copy()
        r[frontier] = 0.0
        p[frontier] += (1.0 - d) * ru
        rows, units = graph.gather_visible(frontier, as_of)
        far = graph.neighbours(frontier, rows, units)
        degf = deg[frontier]
        share = d * ru[rows] * graph.weight[units] / degf[rows]
        # bincount over all vertices is a single C pass, far cheaper than np.add.at
        r += np.bincount(far, share, minlength=n)
        dangling = degf <= 0
        if dangling.any():  # its walk restarts from the seeds (PRPACK's u = v)
            r[seeds] += d * ru[dangling].sum() * mass
            far = np.concatenate([far, seeds])
        hit = np.zeros(n, dtype=bool)
        hit[far] = True
        touched |= hit
        frontier = np.flatnonzero(hit)
    vertices = np.flatnonzero(touched)
    return vertices, p[vertices]


def _prpack(
    graph: TimedGraph, reset: dict[int, float], as_of: int | None, d: float
) -> tuple[np.ndarray, np.ndarray]:
    """Exact PPR on the units visible at ``as_of``, each vertex pair's units as one edge
    (:meth:`~worldmm.graph.timed.TimedGraph.igraph_visible`; the graph of now is built once per
    graph object)."""
    g = graph.igraph_visible(as_of)
    vec = np.zeros(graph.n)
    for v, m in reset.items():
        vec[v] += m
    with _openmp().limit(limits=1, user_api="openmp"):
        scores = g.personalized_pagerank(
            directed=False,
            damping=d,
            reset=vec.tolist(),
            weights="weight",
            implementation="prpack",
        )
    return np.arange(graph.n, dtype=np.int64), np.asarray(scores, dtype=np.float64)


@functools.cache
def _openmp() -> ThreadpoolController:
    """Found once (scans the loaded libraries, igraph's libgomp included)."""
    return ThreadpoolController()
