"""Semantic retrieval: facts near the query seed a PPR on the user's entity graph; every
active triple (edge) scores PPR(subject) + PPR(object); the top ``semantic_top_k`` return.

Seeds are the entities of the ``FACT_SEEDS`` nearest active semantic triples. The design spec
makes them uniform; we weight each by its fact's cosine (summed over facts), as the episodic
side does: with few facts, uniform seeds would let weakly related facts pull as hard as the
matching one. With no seed in the graph the uniform fallback of
:func:`worldmm.graph.pagerank.ppr` ranks facts by how central their entities are.

Time reads as in every memory (:mod:`question_time`): facts are those held at the question's
time, or at the end of the range its words name ("what did Maya prefer two days ago": the
facts as they stood at the end of that day).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from worldmm.graph.pagerank import PprScores, fact_seed_scores, ppr, seed_vertices
from worldmm.graph.timed import TimedGraph, micros_to_datetime, to_micros
from worldmm.graph.types import is_active
from worldmm.memory.retrieval.graph_lanes import load_timed
from worldmm.memory.retrieval.question_time import at_question_time, parse_time
from worldmm.memory.retrieval.results import RetrievalResult, TripleHit

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.localtime import Asked

log = logging.getLogger(__name__)

FACT_SEEDS = 5


def unit_hit(graph: TimedGraph, unit: int, score: float) -> TripleHit:
    """A semantic unit as a fact (``src`` is always the triple's subject)."""
    return TripleHit(
        triple_id=int(graph.triple_id[unit]),
        subject=graph.label[int(graph.src[unit])],
        predicate=graph.predicate[unit],
        object=graph.label[int(graph.dst[unit])],
        score=score,
        valid_from=micros_to_datetime(int(graph.t_from[unit])),
    )


def rank_facts(
    deps: Deps, user_id: str, query_vec: np.ndarray, as_of: datetime | None
) -> list[TripleHit]:
    """Facts active at ``as_of`` (now by default), from the one cached time-masked graph."""
    graph = load_timed(deps.reader, deps.cache, deps.graphs, user_id, "semantic")
    if graph.units == 0:
        return []
    facts = deps.reader.top_semantic_triples(user_id, query_vec, FACT_SEEDS, as_of=as_of)
    when = None if as_of is None else to_micros(as_of)
    settings = deps.settings
    result = ppr(
        graph,
        seed_vertices(graph, fact_seed_scores(facts), when),
        when,
        settings.ppr_damping,
        settings.ppr_method,
        settings.ppr_push_epsilon,
    )
    if result.fallback:
        log.info("retrieval.ppr_fallback type=semantic")
    ranked = top_triple_units(graph, result, when, settings.semantic_top_k)
    hits = [unit_hit(graph, unit, score) for unit, score in ranked]
    return confirm_active(deps, user_id, hits, as_of)


FIRST_VERTICES = 32  # the highest-scored vertices whose triples are ranked first


def top_triple_units(
    graph: TimedGraph, result: PprScores, as_of: int | None, k: int
) -> list[tuple[int, float]]:
    """The ``k`` triples visible at ``as_of`` with the highest PPR(subject) + PPR(object),
    as ``(unit index, score)``, ties in unit order; only triples touching a scored vertex
    are candidates (a triple appears once even if several units carry its id).

    Only the triples of the best-scored vertices are ranked: a triple touching none of them
    scores at most twice the best score left out, so once the ``k``-th ranked is above that,
    nothing unread can enter or tie. Otherwise four times as many vertices are read, up to
    all of them. The exact PageRank scores every vertex, and ranking every triple each time
    was the step that grew with the memory."""
    if k <= 0 or not len(result.vertices):
        return []
    score = np.zeros(graph.n)
    score[result.vertices] = result.scores
    by_score = result.vertices[np.argsort(-result.scores, kind="stable")]
    m = FIRST_VERTICES
    while True:
        ranked = _rank_units(graph, score, by_score[:m], as_of, k)
        if m >= len(by_score):
            return ranked
        bound = 2.0 * score[by_score[m]]
        if len(ranked) == k and ranked[-1][1] > bound:
            return ranked
        m *= 4


def _rank_units(
    graph: TimedGraph, score: np.ndarray, vertices: np.ndarray, as_of: int | None, k: int
) -> list[tuple[int, float]]:
    """The ``k`` best distinct triples among the visible units touching ``vertices``: the
    best ``4k`` units (and any tied with the last) are sorted first, all of them only when
    those hold fewer than ``k`` distinct triples."""
    _, gathered = graph.gather(vertices)
    touched = np.zeros(graph.units, dtype=bool)  # a mask: np.unique's hashing cost more
    touched[gathered] = True
    units = np.flatnonzero(touched)
    units = units[graph.unit_visible(units, as_of)]
    per_unit = score[graph.src[units]] + score[graph.dst[units]]
    head = 4 * k
    if len(per_unit) > head:
        cut = np.partition(per_unit, len(per_unit) - head)[len(per_unit) - head]
        first = np.flatnonzero(per_unit >= cut)
        ranked = _distinct(graph, units, per_unit, first, k)
        if len(ranked) == k:
            return ranked
    return _distinct(graph, units, per_unit, np.arange(len(units)), k)


def _distinct(
    graph: TimedGraph, units: np.ndarray, per_unit: np.ndarray, among: np.ndarray, k: int
) -> list[tuple[int, float]]:
    """Up to ``k`` of ``among`` best first (ties in unit order), one unit per triple."""
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for i in among[np.argsort(-per_unit[among], kind="stable")]:
        tid = int(graph.triple_id[units[i]])
        if tid < 0 or tid in seen:
            continue
        seen.add(tid)
        out.append((int(units[i]), float(per_unit[i])))
        if len(out) == k:
            break
    return out


def confirm_active(
    deps: Deps, user_id: str, hits: list[TripleHit], as_of: datetime | None
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


@at_question_time
async def search_semantic(deps: Deps, user_id: str, query: str, asked: Asked) -> RetrievalResult:
    span = parse_time(query, asked.at, asked.tz)
    held_at = min(span.end, asked.at) if span.end is not None else asked.at
    vectors = await asyncio.to_thread(deps.embedder.embed, [query])
    hits = await asyncio.to_thread(rank_facts, deps, user_id, vectors[0], held_at)
    return RetrievalResult(memory_type="semantic", query=query, hits=hits)
