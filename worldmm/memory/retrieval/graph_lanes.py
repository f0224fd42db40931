"""The lanes over the memory graphs: each user's time-masked graph, got from this process's
memo, from Redis or from the store (:func:`load_timed`, the semantic search's too), and the
episodic graph lane: personalized PageRank over each scale's graph.

Loading. One time-masked graph per user, type and scale (:mod:`worldmm.graph.timed`) serves
"now" and every ``as_of``: it holds every row with its time, and queries hide what did not
exist. A graph is used only while its ``fingerprint`` (row count, highest id and soft-delete
count of its rows, read before the rows) equals the store's, so it is never served stale and
writers need not tell the cache anything. A graph whose rows have only grown since it was
built (same soft-delete count, and exactly ``count`` more rows with ids above its highest) is
extended with those rows instead of rebuilt: during a live session the 30 s graph changes
every 30 s. Any other change (a forget, a soft delete, rows committed out of id order)
rebuilds from scratch.

The graph lane. Seeds (HippoRAG recipe): the query's entities (NER, then embedding match
against the user's canonical entities, cosine >= ``entity_match_threshold``) and the entities
of the ``FACT_SEEDS`` episodic triples of that scale closest to the query. A fact's segment
also gets its cosine as a dense score (the small segment weight of
:func:`~worldmm.graph.pagerank.seed_vertices`). The facts are looked for in the
``FACT_WINDOWS`` windows of the scale whose text is nearest the query (the dense lane's
search), and scored exactly there: HippoRAG 2 ranks passages first too. Episodic triples have
no vector index of their own (migration 0018): keeping one cost every 30 s window most of its
database time, for a lane that ships with weight 0. A fact outside those windows seeds
nothing; its entities still do when the question names them. :func:`rank_scale` ranks one
scale: the top ``k`` (segment id, score) as of ``as_of``, best first. :func:`graph_lane` is
the lane: every scale, merged by rank within the scale.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from worldmm.graph.cache import GraphCacheLike, GraphMemo, cache_key
from worldmm.graph.pagerank import PprScores, fact_seed_scores, ppr, seed_vertices
from worldmm.graph.timed import SEGMENT, TimedGraph, build_timed, extend, to_micros
from worldmm.graph.types import GraphMemoryType, GraphTriple, entity_node
from worldmm.memory.retrieval.fusion import Candidate
from worldmm.memory.retrieval.reader import MemoryReader
from worldmm.providers.errors import ModelCallError
from worldmm.store.triples import parse_fingerprint

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger(__name__)

FACT_SEEDS = 5  # triples per scale whose entities seed the PPR (HippoRAG's linking top-k)
# The paper's per-scale top-k (scale seconds: segments), a constant of this lane: it ships at
# weight 0. The 30 s scale takes the search's own k; coarser scales at least a quarter of it.
SCALE_TOP_K = {30: 10, 180: 5, 600: 5, 3600: 3}
FACT_WINDOWS = 20  # windows per scale, nearest the query by their text, whose facts are scored
ENTITY_MATCHES = 3  # canonical entities considered per named entity of the query


# --- the user's time-masked graphs ----------------------------------------------------------
def load_timed(
    reader: MemoryReader,
    cache: GraphCacheLike,
    memo: GraphMemo,
    user_id: str,
    memory_type: GraphMemoryType,
    scale: int | None = None,
) -> TimedGraph:
    """The user's time-masked graph (:mod:`worldmm.graph.timed`): every row with its time, so
    one graph answers "now" and any ``as_of``. From this process's memo when its fingerprint
    matches the store's; else from Redis (numpy buffers, when a cache is configured); else
    the newest graph at hand extended with the rows appended since; else built from the
    store. Keys carry the user id, so no user is ever served another's graph."""
    key = cache_key(user_id, memory_type, scale)
    fingerprint = reader.graph_fingerprint(user_id, memory_type, scale)
    found = memo.get(key, fingerprint)
    if found is not None:
        return found
    base = memo.latest(key)
    stored, token = cache.get(user_id, memory_type, scale)
    if stored is not None and stored.fingerprint == fingerprint:
        memo.put(key, stored)
        log.info(
            "retrieval.timed_graph source=redis type=%s scale=%s vertices=%d units=%d",
            memory_type,
            scale,
            stored.n,
            stored.units,
        )
        return stored
    if stored is not None and _top_id(stored) > _top_id(base):
        base = stored
    started = time.perf_counter()
    graph = _extend_timed(reader, user_id, memory_type, scale, base, fingerprint)
    how = "extended"
    if graph is None:
        graph, how = _build_timed(reader, user_id, memory_type, scale, fingerprint), "built"
    if graph.fingerprint is not None:
        memo.put(key, graph)
        # Redis gets a built graph, and a grown one only when its tail was just folded into
        # the CSR (a growth unit, a few hours of wear): rewriting a week's bytes for every
        # 30 s segment would cost more than the query. A process that starts cold loads the
        # last copy and extends it by at most one unit.
        if how == "built" or graph.sealed == graph.units:
            cache.put(user_id, memory_type, scale, graph, token)
    log.info(
        "retrieval.timed_graph source=%s type=%s scale=%s vertices=%d units=%d ms=%.1f",
        how,
        memory_type,
        scale,
        graph.n,
        graph.units,
        1000 * (time.perf_counter() - started),
    )
    return graph


def _top_id(graph: TimedGraph | None) -> int:
    parsed = parse_fingerprint(graph.fingerprint) if graph is not None else None
    return -1 if parsed is None else parsed[1]


def _build_timed(
    reader: MemoryReader,
    user_id: str,
    memory_type: GraphMemoryType,
    scale: int | None,
    fingerprint: str,
) -> TimedGraph:
    """Built from the rows the fingerprint counts (ids up to its highest): a row committed
    after the fingerprint was read is left for the next extension, never counted twice. When
    the rows do not match the count (a delete raced the read) the graph serves this query
    but carries no fingerprint, so it is never kept."""
    parsed = parse_fingerprint(fingerprint)
    id_range = None if parsed is None else (0, parsed[1])
    rows = reader.graph_history(user_id, memory_type, scale, id_range=id_range)
    graph = build_timed(memory_type, rows)
    if parsed is None or len(rows) == parsed[0]:
        graph.fingerprint = fingerprint
    return graph


def _extend_timed(
    reader: MemoryReader,
    user_id: str,
    memory_type: GraphMemoryType,
    scale: int | None,
    base: TimedGraph | None,
    fingerprint: str,
) -> TimedGraph | None:
    """``base`` plus the rows appended since it was built, or None when the change is not a
    pure append (a soft delete, a forget, a row committed below the old highest id)."""
    if base is None:
        return None
    old, new = parse_fingerprint(base.fingerprint), parse_fingerprint(fingerprint)
    if old is None or new is None or new[2] != old[2] or new[0] <= old[0] or new[1] <= old[1]:
        return None
    rows = reader.graph_history(user_id, memory_type, scale, id_range=(old[1], new[1]))
    if len(rows) != new[0] - old[0]:
        return None
    graph = extend(base, rows)
    graph.fingerprint = fingerprint
    return graph


# --- the episodic graph lane ---------------------------------------------------------------
def fact_segment_scores(facts: list[tuple[GraphTriple, float]]) -> dict[int, float]:
    out: dict[int, float] = {}
    for t, score in facts:
        if t.segment_id is not None:
            out[t.segment_id] = max(out.get(t.segment_id, 0.0), score)
    return out


def merge_scores(*parts: dict[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in parts:
        for k, v in part.items():
            out[k] = out.get(k, 0.0) + v
    return out


async def query_entities(deps: Deps, query: str) -> list[str]:
    """Named entities of the query; a failed NER call leaves fact seeds only (logged)."""
    try:
        return [e for e in await deps.roles.ner(query) if e.strip()]
    except ModelCallError as exc:
        log.warning("retrieval.ner_failed error=%s", exc)
        return []


def fact_seeds(
    deps: Deps, user_id: str, query_vec: np.ndarray, scale: int, as_of: datetime | None
) -> list[tuple[GraphTriple, float]]:
    """The ``FACT_SEEDS`` facts of ``scale`` nearest the query, with their cosine, among
    those of the ``FACT_WINDOWS`` windows nearest it (all existing at ``as_of``)."""
    return deps.reader.nearest_window_facts(
        user_id, query_vec, FACT_SEEDS, scale=scale, windows=FACT_WINDOWS, as_of=as_of
    )


def entity_seed_scores(deps: Deps, user_id: str, vectors: np.ndarray) -> dict[str, float]:
    """Best cosine per matched canonical entity, over all the query's named entities."""
    out: dict[str, float] = {}
    threshold = deps.settings.entity_match_threshold
    for vec in vectors:
        for name, cos in deps.reader.nearest_entities(user_id, vec, threshold, ENTITY_MATCHES):
            key = entity_node(name)
            out[key] = max(out.get(key, 0.0), cos)
    return out


def rank_scale(
    deps: Deps,
    user_id: str,
    scale: int,
    k: int,
    query_vec: np.ndarray,
    entity_scores: dict[str, float],
    as_of: datetime | None,
) -> list[tuple[int, float]]:
    """Top ``k`` (segment_id, PPR score) of one scale's graph, only segments that existed at
    ``as_of``. One cached time-masked graph serves every ``as_of``: the mask hides later
    vertices and edges in seeding, propagation and ranking (no rebuild per question)."""
    graph = load_timed(deps.reader, deps.cache, deps.graphs, user_id, "episodic", scale)
    if graph.n == 0:
        return []
    facts = fact_seeds(deps, user_id, query_vec, scale, as_of)
    when = None if as_of is None else to_micros(as_of)
    reset = seed_vertices(
        graph,
        merge_scores(entity_scores, fact_seed_scores(facts)),
        when,
        fact_segment_scores(facts),
    )
    settings = deps.settings
    result = ppr(
        graph, reset, when, settings.ppr_damping, settings.ppr_method, settings.ppr_push_epsilon
    )
    if result.fallback:
        log.info("retrieval.ppr_fallback type=episodic scale=%s", scale)
    return top_segments(graph, result, when, k)


def top_segments(
    graph: TimedGraph, result: PprScores, as_of: int | None, k: int
) -> list[tuple[int, float]]:
    """The ``k`` segments visible at ``as_of`` with the highest score, ties in vertex order.
    As with a full score vector, fewer than ``k`` scored segments are followed by unscored
    ones (score 0, vertex order), read from the front of the segment list, not all of it."""
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


def graph_lane(
    deps: Deps,
    user_id: str,
    query_vec: np.ndarray,
    entity_scores: dict[str, float],
    k: int,
    as_of: datetime | None,
) -> list[Candidate]:
    """Per-scale PPR, merged by rank within the scale (PageRank mass is not comparable
    across graphs of different sizes); the score is the mass relative to the scale's best."""
    ranked: list[tuple[int, int, int, float]] = []  # (rank, scale, segment id, rel. score)
    for scale, scale_k in sorted(SCALE_TOP_K.items()):
        want = k if scale == 30 else max(scale_k, k // 4)
        top = rank_scale(deps, user_id, scale, want, query_vec, entity_scores, as_of)
        best = top[0][1] if top and top[0][1] > 0 else 1.0
        ranked += [(i, scale, sid, s / best) for i, (sid, s) in enumerate(top)]
    if not ranked:
        return []
    ranked.sort(key=lambda r: (r[0], r[1]))
    windows = deps.reader.segment_windows(user_id, [sid for _, _, sid, _ in ranked])
    out = []
    for _rank, scale, sid, score in ranked:
        w = windows.get(sid)
        if w is not None:  # a segment forgotten since the graph was built
            out.append(Candidate(sid, scale, w[0], w[1], score))
    return out
