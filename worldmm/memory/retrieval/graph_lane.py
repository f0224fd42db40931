"""The graph lane of episodic retrieval: personalized PageRank over one scale's graph.

Seeds (HippoRAG recipe): the query's entities (NER, then embedding match against the user's
canonical entities, cosine >= ``entity_match_threshold``) and the entities of the
``FACT_SEEDS`` episodic triples of that scale closest to the query. A fact's segment also gets
its cosine as a dense score (the small segment weight of :func:`seed_vector`).

:func:`rank_scale` is the lane's whole contract with the rest of retrieval: the top ``k``
(segment id, score) of one scale as of ``as_of``, best first.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from worldmm.graph.local_ppr import ppr
from worldmm.graph.ppr import fact_seed_scores
from worldmm.graph.timed import to_micros
from worldmm.graph.timed_rank import timed_seeds, timed_top_segments
from worldmm.graph.types import GraphTriple, entity_node
from worldmm.memory.retrieval.graphs import load_timed
from worldmm.providers.errors import ModelCallError

if TYPE_CHECKING:
    from worldmm.deps import Deps

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


async def query_entities(deps: Deps, query: str) -> list[str]:
    """Named entities of the query; a failed NER call leaves fact seeds only (logged)."""
    try:
        return [e for e in await deps.roles.ner(query) if e.strip()]
    except ModelCallError as exc:
        log.warning("retrieval.ner_failed error=%s", exc)
        return []


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
    facts = deps.reader.top_triples(
        user_id, "episodic", query_vec, FACT_SEEDS, scale=scale, as_of=as_of
    )
    when = None if as_of is None else to_micros(as_of)
    reset = timed_seeds(
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
    return timed_top_segments(graph, result, when, k)
