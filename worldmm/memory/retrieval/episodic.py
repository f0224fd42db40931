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

from worldmm.llm.errors import ModelCallError
from worldmm.memory.retrieval.deps import RetrievalDeps
from worldmm.memory.retrieval.graph_lane import entity_seed_scores, query_entities, rank_scale
from worldmm.memory.retrieval.results import RetrievalResult, SegmentHit, hit_line

log = logging.getLogger(__name__)

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
