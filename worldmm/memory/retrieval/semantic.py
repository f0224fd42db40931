"""Semantic retrieval: facts near the query seed a PPR on the user's entity graph; every
active triple (edge) scores PPR(subject) + PPR(object); the top ``semantic_top_k`` return.

Seeds are the entities of the ``FACT_SEEDS`` nearest active semantic triples. The design spec
makes them uniform; we weight each by its fact's cosine (summed over facts), as the episodic
side does: with few facts, uniform seeds would let weakly related facts pull as hard as the
matching one. With no seed in the graph the uniform fallback of :func:`personalized_pagerank`
ranks facts by how central their entities are.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime

import igraph as ig
import numpy as np

from worldmm.graph.build import is_active
from worldmm.graph.ppr import fact_seed_scores, personalized_pagerank, seed_vector
from worldmm.graph.scoring import top_triples
from worldmm.memory.retrieval.deps import RetrievalDeps
from worldmm.memory.retrieval.graphs import load_graph
from worldmm.memory.retrieval.results import RetrievalResult, TripleHit

log = logging.getLogger(__name__)

FACT_SEEDS = 5


def edge_hit(graph: ig.Graph, edge_index: int, score: float) -> TripleHit:
    edge = graph.es[edge_index]
    a, b = edge.tuple
    subj = edge["subject"] if edge["subject"] is not None else a
    obj = b if subj == a else a
    valid_from = edge["valid_from"]
    return TripleHit(
        triple_id=edge["triple_id"],
        subject=graph.vs[subj]["label"],
        predicate=edge["predicate"],
        object=graph.vs[obj]["label"],
        score=score,
        valid_from=datetime.fromisoformat(valid_from) if valid_from else None,
    )


def rank_facts(
    deps: RetrievalDeps, user_id: str, query_vec: np.ndarray, as_of: datetime | None
) -> list[TripleHit]:
    graph = load_graph(deps.reader, deps.cache, user_id, "semantic", None, as_of)
    if graph.ecount() == 0:
        return []
    facts = deps.reader.top_triples(user_id, "semantic", query_vec, FACT_SEEDS, as_of=as_of)
    result = personalized_pagerank(
        graph, seed_vector(graph, fact_seed_scores(facts)), deps.settings.ppr_damping
    )
    if result.fallback:
        log.info("retrieval.ppr_fallback type=semantic")
    ranked = top_triples(graph, result.scores, deps.settings.semantic_top_k)
    edge_of = {tid: i for i, tid in enumerate(graph.es["triple_id"])}
    hits = [edge_hit(graph, edge_of[tid], score) for tid, score in ranked]
    return confirm_active(deps, user_id, hits, as_of)


def confirm_active(
    deps: RetrievalDeps, user_id: str, hits: list[TripleHit], as_of: datetime | None
) -> list[TripleHit]:
    """Read the chosen rows back: fills ``valid_from`` (graphs built from the store do not carry
    it) and drops a fact consolidated away after its graph was cached."""
    if not hits:
        return hits
    rows = {t.triple_id: t for t in deps.reader.triples_by_id(user_id, [h.triple_id for h in hits])}
    out = []
    for hit in hits:
        row = rows.get(hit.triple_id)
        if row is None or not is_active(row, as_of):
            log.info("retrieval.semantic_stale triple=%s", hit.triple_id)
            continue
        out.append(hit.model_copy(update={"valid_from": row.valid_from or hit.valid_from}))
    return out


async def search_semantic(
    deps: RetrievalDeps, user_id: str, query: str, as_of: datetime | None = None
) -> RetrievalResult:
    vectors = await asyncio.to_thread(deps.embedder.embed, [query])
    hits = await asyncio.to_thread(rank_facts, deps, user_id, vectors[0], as_of)
    return RetrievalResult(memory_type="semantic", query=query, hits=hits)
