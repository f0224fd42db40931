"""Episodic retrieval: PPR over one graph per scale, then a cross-scale LLM rerank.

Seeds per scale (HippoRAG recipe): the query's entities (NER, then embedding match against
the user's canonical entities, cosine >= ``entity_match_threshold``) and the entities of the
``FACT_SEEDS`` episodic triples of that scale closest to the query. A fact's segment also gets
its cosine as a dense score (the small segment weight of :func:`seed_vector`). Each scale keeps
its top k (``settings.episodic_top_k_map()``); the reranker keeps ``settings.rerank_keep``.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

import numpy as np

from worldmm.graph.ppr import fact_seed_scores, personalized_pagerank, seed_vector
from worldmm.graph.scoring import top_segments
from worldmm.graph.types import GraphTriple, entity_node
from worldmm.llm.errors import ModelCallError
from worldmm.memory.retrieval.deps import RetrievalDeps
from worldmm.memory.retrieval.graphs import load_graph
from worldmm.memory.retrieval.results import RetrievalResult, SegmentHit, hit_line

log = logging.getLogger(__name__)

FACT_SEEDS = 5  # triples per scale whose entities seed the PPR (HippoRAG's linking top-k)
ENTITY_MATCHES = 3  # canonical entities considered per named entity of the query


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


async def query_entities(deps: RetrievalDeps, query: str) -> list[str]:
    """Named entities of the query; a failed NER call leaves fact seeds only (logged)."""
    try:
        return [e for e in await deps.roles.ner(query) if e.strip()]
    except ModelCallError as exc:
        log.warning("retrieval.ner_failed error=%s", exc)
        return []


def entity_seed_scores(deps: RetrievalDeps, user_id: str, vectors: np.ndarray) -> dict[str, float]:
    """Best cosine per matched canonical entity, over all the query's named entities."""
    out: dict[str, float] = {}
    threshold = deps.settings.entity_match_threshold
    for vec in vectors:
        for name, cos in deps.reader.nearest_entities(user_id, vec, threshold, ENTITY_MATCHES):
            key = entity_node(name)
            out[key] = max(out.get(key, 0.0), cos)
    return out


def rank_scale(
    deps: RetrievalDeps,
    user_id: str,
    scale: int,
    k: int,
    query_vec: np.ndarray,
    entity_scores: dict[str, float],
    as_of: datetime | None,
) -> list[tuple[int, float]]:
    """Top ``k`` (segment_id, PPR score) of one scale's graph."""
    graph = load_graph(deps.reader, deps.cache, user_id, "episodic", scale, as_of)
    if graph.vcount() == 0:
        return []
    facts = deps.reader.top_triples(
        user_id, "episodic", query_vec, FACT_SEEDS, scale=scale, as_of=as_of
    )
    reset = seed_vector(
        graph, merge_scores(entity_scores, fact_seed_scores(facts)), fact_segment_scores(facts)
    )
    result = personalized_pagerank(graph, reset, deps.settings.ppr_damping)
    if result.fallback:
        log.info("retrieval.ppr_fallback type=episodic scale=%s", scale)
    return top_segments(graph, result.scores, k)


def collect_candidates(
    deps: RetrievalDeps,
    user_id: str,
    query_vec: np.ndarray,
    entity_vecs: np.ndarray,
    as_of: datetime | None,
) -> list[SegmentHit]:
    """Per-scale PPR candidates, finest scale first, as hits with their text."""
    entity_scores = entity_seed_scores(deps, user_id, entity_vecs)
    ranked: list[tuple[int, int, float]] = []
    for scale, k in sorted(deps.settings.episodic_top_k_map().items()):
        for segment_id, score in rank_scale(
            deps, user_id, scale, k, query_vec, entity_scores, as_of
        ):
            ranked.append((scale, segment_id, score))
    records = {s.id: s for s in deps.reader.segments(user_id, [sid for _, sid, _ in ranked])}
    hits = []
    for scale, segment_id, score in ranked:
        seg = records.get(segment_id)
        text = (seg.caption or seg.transcript or "").strip() if seg else ""
        if seg is None or not text:
            continue  # deleted meanwhile (forget), or a segment without text yet
        hits.append(
            SegmentHit(
                segment_id=segment_id,
                scale=scale,
                start=seg.window_start,
                end=seg.window_end,
                text=text,
                score=score,
            )
        )
    return hits


async def rerank(deps: RetrievalDeps, query: str, hits: list[SegmentHit]) -> list[SegmentHit]:
    """The reranker's choice (ids it invents are ignored); its failure keeps the best PPR
    scores per scale in turn, logged — the search still answers."""
    keep = deps.settings.rerank_keep
    if len(hits) <= keep:
        return hits
    by_id = {str(h.segment_id): h for h in hits}
    try:
        chosen = await deps.roles.rerank(query, [(i, hit_line(h)) for i, h in by_id.items()], keep)
    except ModelCallError as exc:
        log.warning("retrieval.rerank_failed error=%s", exc)
        chosen = []
    picked = [by_id[i] for i in dict.fromkeys(chosen) if i in by_id][:keep]
    if not picked:
        picked = _round_robin_by_scale(hits, keep)
    return picked


def _round_robin_by_scale(hits: list[SegmentHit], keep: int) -> list[SegmentHit]:
    per_scale: dict[int, list[SegmentHit]] = {}
    for h in hits:
        per_scale.setdefault(h.scale, []).append(h)
    out: list[SegmentHit] = []
    while len(out) < keep and any(per_scale.values()):
        for scale in sorted(per_scale):
            if per_scale[scale] and len(out) < keep:
                out.append(per_scale[scale].pop(0))
    return out


async def search_episodic(
    deps: RetrievalDeps, user_id: str, query: str, as_of: datetime | None = None
) -> RetrievalResult:
    entities = await query_entities(deps, query)
    vectors = await asyncio.to_thread(deps.embedder.embed, [query, *entities])
    hits = await asyncio.to_thread(
        collect_candidates, deps, user_id, vectors[0], vectors[1:], as_of
    )
    kept = await rerank(deps, query, hits)
    return RetrievalResult(memory_type="episodic", query=query, hits=kept)
