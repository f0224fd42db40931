"""Episodic retrieval: three lanes fused by reciprocal rank, the question's time applied to
each, and coarse segments drilled down to the 30 s windows that hold the moment.

1. The question's time (:mod:`question_time`) becomes a range and/or a recency / earliness
   prior, read at the question's moment (``as_of``, or the injected clock's now) on the
   wearer's clock; the lanes see only the memory that existed at that moment either way.
2. Lanes, each usable alone: lexical (PostgreSQL full-text, IDF-weighted), dense (segment
   text embeddings, HNSW) and entity (the windows holding the question's people and things,
   and those around them) in :mod:`text_lanes`, graph (per-scale personalized PageRank) in
   :mod:`graph_lanes`. Each filters by user, ``as_of`` and the range, then reorders its
   candidates by the prior.
3. Reciprocal rank fusion with weights from settings (:mod:`fusion`); every hit keeps each
   lane's rank and score.
4. Drill-down: the best coarse segments are expanded into their 30 s descendants, ranked by
   the same lanes; the best of those replace the summary, which is kept as context. A coarse
   segment none of whose windows matches better stays as it is.
5. Optionally, the rerank model reorders the result (``episodic_llm_rerank``).

Everything after the lanes is cheap, so :func:`run_lanes` + :func:`finish` let the benchmark
score several variants (a lane alone, no drill-down, ...) from one set of lane runs; the
children a drill-down reads are kept on the run, so a variant never reads them twice.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import numpy as np

from worldmm.localtime import Asked, in_zone
from worldmm.memory.retrieval import text_lanes
from worldmm.memory.retrieval.fusion import (
    BASE_SCALE,
    DRILL_KEEP,
    PRIOR_HALFLIFE_H,
    RRF_K,
    Candidate,
    Fused,
    Pick,
    PriorParams,
    apply_prior,
    drill_down,
    rrf,
    top_coarse,
)
from worldmm.memory.retrieval.graph_lanes import entity_seed_scores, graph_lane, query_entities
from worldmm.memory.retrieval.question_time import (
    NONE,
    TimeConstraint,
    first_memory_day,
    parse_time,
    question_time,
)
from worldmm.memory.retrieval.results import LaneScore, RetrievalResult, SegmentHit, hit_line
from worldmm.memory.retrieval.text_lanes import (
    DENSE,
    ENTITY,
    GRAPH,
    LEXICAL,
    QueryEntity,
    TimeRange,
    entity_lane,
    resolve_entities,
)
from worldmm.metrics import RETRIEVAL_STAGE
from worldmm.providers.errors import ModelCallError
from worldmm.settings import Settings
from worldmm.store.segment_search import Filters

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger(__name__)

_MENTIONS_DAY_N = re.compile(r"\bday\s*\d", re.IGNORECASE)
# A drilled-down window "fits" when it matched the question's words, or its text is nearly as
# close to the question as its parent's summary (cosine within this margin).
DRILL_COSINE_MARGIN = 0.05


@dataclass(frozen=True)
class EpisodicOptions:
    """How one episodic search runs; every value comes from :class:`Settings`
    (:meth:`from_settings`), so there is one default for each, kept there."""

    weights: dict[str, float]  # a lane runs when its weight is above 0
    rrf_k: float
    candidates: int
    drill_parents: int  # 0: no drill-down
    drill_keep: int
    keep: int
    prior: PriorParams
    llm_rerank: bool

    @property
    def lanes(self) -> tuple[str, ...]:
        """The lanes that run: a lane of weight 0 cannot change the fused order."""
        return tuple(x for x in (LEXICAL, DENSE, GRAPH, ENTITY) if self.weights.get(x, 0.0) > 0)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides) -> EpisodicOptions:
        base = cls(
            weights=settings.episodic_lane_weight_map(),
            rrf_k=RRF_K,
            candidates=settings.episodic_lane_candidates,
            drill_parents=settings.episodic_drill_parents,
            drill_keep=DRILL_KEEP,
            keep=settings.rerank_keep,
            prior=PriorParams(
                default_weight=settings.episodic_recency_weight,
                default_halflife_h=PRIOR_HALFLIFE_H,
                weight=settings.episodic_prior_weight,
                halflife_h=PRIOR_HALFLIFE_H,
                importance_weight=settings.episodic_importance_weight,
                recall_weight=settings.episodic_recall_weight,
            ),
            llm_rerank=settings.episodic_llm_rerank,
        )
        return replace(base, **overrides)


@dataclass
class LaneRun:
    """One question's lane results (priors applied), shared by every fusion variant;
    ``asked``: the moment and zone the question was read at (``as_of`` is its moment).
    ``children`` keeps, per drill-down parent, its 30 s descendants and the text lanes' raw
    candidates among them (read once per run, whatever the variant); ``priors`` each
    candidate's importance and recall count (read once, children's when they are read)."""

    user_id: str
    query: str
    asked: Asked
    constraint: TimeConstraint
    time_range: TimeRange
    vector: np.ndarray
    lanes: dict[str, list[Candidate]]
    children: dict[int, tuple[list[int], dict[str, list[Candidate]]]] = field(default_factory=dict)
    priors: dict[int, tuple[float | None, int]] = field(default_factory=dict)

    @property
    def as_of(self) -> datetime:
        return self.asked.at


async def run_lanes(
    deps: Deps,
    user_id: str,
    query: str,
    as_of: datetime | None,
    options: EpisodicOptions,
    *,
    time_text: str | None = None,
    tz: ZoneInfo | None = None,
    importance: bool | None = None,
) -> LaneRun:
    """Parse the question's time, embed it, and run the enabled lanes concurrently.
    ``time_text`` is what the time is read from when the query carries more than the
    question (answer choices naming times must not constrain the search; lettered options
    listed after the question are never read, :func:`question_time.asked_part`). Without
    ``as_of`` the question is read at the injected clock's now, and sees memory as it was
    then, exactly as with ``as_of``. ``importance``: whether the candidates' importance is
    read (default: when it weighs anything; the tuner, which re-applies other weights to
    the run, reads it always)."""
    time_text = query if time_text is None else time_text
    with RETRIEVAL_STAGE.labels("prepare").time():
        asked = await question_time(deps, user_id, as_of, tz)
        as_of = asked.at
        first_day = None
        if _MENTIONS_DAY_N.search(time_text):
            first_day = await asyncio.to_thread(first_memory_day, deps, user_id, asked.tz)
        constraint = parse_time(time_text, as_of, asked.tz, first_day=first_day)
        graph, entity = GRAPH in options.lanes, ENTITY in options.lanes
        entities = await query_entities(deps, query) if graph or entity else []
        vectors = await asyncio.to_thread(deps.embedder.embed, [query, *entities])
        seeds = Seeds()
        if graph and len(vectors) > 1:
            seeds.scores = await asyncio.to_thread(entity_seed_scores, deps, user_id, vectors[1:])
        if entity and len(vectors) > 1:
            seeds.matches = await asyncio.to_thread(
                resolve_entities, deps, user_id, entities, vectors[1:]
            )
    time_range = TimeRange(constraint.start, constraint.end)
    found = await _lanes(deps, user_id, query, vectors[0], seeds, as_of, time_range, options)
    if constraint.has_range and not any(found.values()):
        # Nothing in the range ("yesterday" before the glasses were worn): search it all.
        log.info("retrieval.time_range_empty phrases=%s", constraint.phrases)
        constraint = TimeConstraint(prior=constraint.prior, phrases=constraint.phrases)
        time_range = TimeRange()
        found = await _lanes(deps, user_id, query, vectors[0], seeds, as_of, time_range, options)
    ids = {c.segment_id for cands in found.values() for c in cands}
    if importance is None:
        importance = options.prior.importance_weight > 0
    priors = await asyncio.to_thread(
        partial(deps.reader.segment_priors, importance=importance), user_id, ids
    )
    prior = options.prior
    lanes = {name: apply_prior(c, constraint, as_of, prior, priors) for name, c in found.items()}
    return LaneRun(user_id, query, asked, constraint, time_range, vectors[0], lanes, priors=priors)


@dataclass
class Seeds:
    """What the graph lanes start from: PageRank seed scores by vertex name (graph) and the
    question's resolved entities (entity)."""

    scores: dict[str, float] = field(default_factory=dict)
    matches: list[QueryEntity] = field(default_factory=list)


async def _lanes(
    deps: Deps,
    user_id: str,
    query: str,
    vector: np.ndarray,
    seeds: Seeds,
    as_of: datetime | None,
    time_range: TimeRange,
    options: EpisodicOptions,
) -> dict[str, list[Candidate]]:
    k = options.candidates
    jobs = {}
    for lane in [x for x in TEXT_LANES if x in options.lanes]:
        jobs[lane] = asyncio.to_thread(
            _timed,
            lane,
            text_lanes.text_lane,
            deps,
            lane,
            user_id,
            query,
            vector,
            k,
            as_of,
            time_range,
        )
    if GRAPH in options.lanes:
        jobs[GRAPH] = asyncio.to_thread(
            _timed, GRAPH, _graph, deps, user_id, vector, seeds.scores, k, as_of, time_range
        )
    if ENTITY in options.lanes:
        jobs[ENTITY] = asyncio.to_thread(
            _timed, ENTITY, entity_lane, deps, user_id, seeds.matches, k, as_of, time_range
        )
    results = await asyncio.gather(*jobs.values())
    return dict(zip(jobs, results, strict=True))


def _timed(stage: str, fn, *args):
    """``fn(*args)``, its wall time recorded as the search stage ``stage``."""
    with RETRIEVAL_STAGE.labels(stage).time():
        return fn(*args)


def _graph(deps, user_id, vector, entity_scores, k, as_of, time_range) -> list[Candidate]:
    cands = graph_lane(deps, user_id, vector, entity_scores, k, as_of)
    return text_lanes.restrict(cands, time_range)


def fuse(run: LaneRun, options: EpisodicOptions) -> list[Fused]:
    """RRF over the lanes ``options`` runs."""
    lanes = {name: c for name, c in run.lanes.items() if name in options.lanes}
    return rrf(lanes, options.weights, options.rrf_k)


def expand(deps: Deps, run: LaneRun, fused: list[Fused], options: EpisodicOptions):
    """The drill-down: children of the top coarse segments, ranked by the same lanes."""
    parents = top_coarse(fused, options.drill_parents)
    if not parents:
        return drill_down(fused, {}, options.keep, options.drill_keep)
    read_children(deps, run, [p.segment_id for p in parents])
    children: dict[int, list[Fused]] = {}
    fits: dict[int, bool] = {}
    for parent in parents:
        kids, text = run.children[parent.segment_id]
        own = set(kids)
        lanes = {lane: text[lane] for lane in TEXT_LANES if lane in options.lanes}
        for lane in (GRAPH, ENTITY):
            if lane in options.lanes:
                fine = [c for c in run.lanes.get(lane, []) if c.scale == BASE_SCALE]
                lanes[lane] = text_lanes.restrict(fine, run.time_range, own)
        ranked = rrf(
            {
                k: apply_prior(v, run.constraint, run.as_of, options.prior, run.priors)
                for k, v in lanes.items()
            },
            options.weights,
            options.rrf_k,
        )
        children[parent.segment_id] = ranked
        fits[parent.segment_id] = bool(ranked) and _fits(parent, ranked[0])
    return drill_down(fused, children, options.keep, options.drill_keep, fits)


TEXT_LANES = (LEXICAL, DENSE)


def read_children(deps: Deps, run: LaneRun, parents: list[int]) -> None:
    """Fill ``run.children`` for ``parents`` not read before in this run: their 30 s
    descendants and both text lanes' candidates among them (raw scores, before the prior),
    and the descendants' priors, from one statement (whatever lanes a variant runs)."""
    new = [p for p in parents if p not in run.children]
    if not new:
        return
    stats, lexemes = deps.reader.query_terms(run.user_id, run.query)
    rows = deps.reader.drill_children(
        run.user_id,
        new,
        text_lanes.weighted_terms(lexemes, stats),
        stats,
        run.vector,
        Filters(run.as_of, run.time_range.start, run.time_range.end),
    )
    for p in new:
        run.children[p] = ([], {LEXICAL: [], DENSE: []})
    for child in rows:
        kids, text = run.children[child.parent_id]
        kids.append(child.row.segment_id)
        r = child.row
        if child.lexical is not None:
            text[LEXICAL].append(Candidate(r.segment_id, r.scale, r.start, r.end, child.lexical))
        if child.cosine is not None:
            text[DENSE].append(Candidate(r.segment_id, r.scale, r.start, r.end, child.cosine))
        run.priors.setdefault(r.segment_id, (child.importance, child.recall_count))
    for _, text in (run.children[p] for p in new):
        # best first, ties by id, as the lanes' own searches return them
        for lane in (LEXICAL, DENSE):
            text[lane].sort(key=lambda c: (-c.score, c.segment_id))


def _fits(parent: Fused, child: Fused) -> bool:
    if LEXICAL in child.lanes:
        return True
    if DENSE in child.lanes and DENSE in parent.lanes:
        return child.lanes[DENSE][1] >= parent.lanes[DENSE][1] - DRILL_COSINE_MARGIN
    return DENSE in child.lanes or GRAPH in child.lanes or ENTITY in child.lanes


def to_hits(deps: Deps, user_id: str, picks: list[Pick]) -> list[SegmentHit]:
    """Picks as hits with their text, lane ranks and drill-down context (a segment deleted
    since, or one without text, is dropped)."""
    ids = [p.fused.segment_id for p in picks] + [p.parent.segment_id for p in picks if p.parent]
    records = {s.id: s for s in deps.reader.segments(user_id, ids)}
    hits = []
    for p in picks:
        seg = records.get(p.fused.segment_id)
        text = (seg.caption or seg.transcript or "").strip() if seg else ""
        if seg is None or not text:
            continue
        parent = records.get(p.parent.segment_id) if p.parent else None
        lanes = dict(p.fused.lanes)
        hits.append(
            SegmentHit(
                segment_id=seg.id,
                scale=seg.scale_seconds,
                start=seg.window_start,
                end=seg.window_end,
                text=text,
                score=p.parent.score if p.parent else p.fused.score,
                transcript=seg.transcript,
                lanes={k: LaneScore(rank=r, score=s) for k, (r, s) in lanes.items()},
                context=(parent.caption or None) if parent else None,
                context_segment_id=parent.id if parent else None,
            )
        )
    return hits


def select(deps: Deps, run: LaneRun, options: EpisodicOptions) -> list[Pick]:
    """Fusion and drill-down: the segments a search returns (more when the rerank model
    chooses among them), in order, without their text. Reads the database only for
    drill-down children not read before for this run."""
    fused = fuse(run, options)
    pool = options.keep * 3 if options.llm_rerank else options.keep
    if options.drill_parents:
        return expand(deps, run, fused, replace(options, keep=pool))
    return [Pick(f) for f in fused[:pool]]


async def finish(deps: Deps, run: LaneRun, options: EpisodicOptions) -> RetrievalResult:
    """Fusion, drill-down and (optionally) the rerank model over one question's lanes."""
    picks = await asyncio.to_thread(_timed, "drill_down", select, deps, run, options)
    hits = await asyncio.to_thread(_timed, "hits", to_hits, deps, run.user_id, picks)
    if options.llm_rerank:
        hits = await rerank(deps, run.query, hits, options.keep)
    return RetrievalResult(
        memory_type="episodic", query=run.query, hits=hits[: options.keep], note=_note(run)
    )


def _note(run: LaneRun) -> str | None:
    """What time the question's words were read as, on the wearer's clock."""
    c = run.constraint
    if c == NONE or not c.phrases:
        return None
    tz = run.asked.tz
    parts = []
    if c.has_range:
        lo = in_zone(c.start, tz).isoformat(timespec="minutes") if c.start else "the beginning"
        hi = in_zone(c.end, tz).isoformat(timespec="minutes") if c.end else "the question time"
        parts.append(f"from {lo} to {hi}")
    if c.prior:
        parts.append(f"favouring {'recent' if c.prior == 'recent' else 'early'} moments")
    return f"time read from {', '.join(repr(p) for p in c.phrases)}: {'; '.join(parts)}"


async def search_episodic(
    deps: Deps,
    user_id: str,
    query: str,
    as_of: datetime | None = None,
    *,
    tz: ZoneInfo | None = None,
    options: EpisodicOptions | None = None,
    time_text: str | None = None,
) -> RetrievalResult:
    """The episodic search the agent's rounds and the search route run (``time_text``: see
    :func:`run_lanes`)."""
    options = options or EpisodicOptions.from_settings(deps.settings)
    run = await run_lanes(deps, user_id, query, as_of, options, time_text=time_text, tz=tz)
    return await finish(deps, run, options)


async def rerank(deps: Deps, query: str, hits: list[SegmentHit], keep: int) -> list[SegmentHit]:
    """The rerank model's choice (ids it invents are ignored); on its failure, or an empty
    choice, the fused order stands (logged) — the search still answers."""
    if len(hits) <= keep:
        return hits
    by_id = {str(h.segment_id): h for h in hits}
    try:
        chosen = await deps.roles.rerank(query, [(i, hit_line(h)) for i, h in by_id.items()], keep)
    except ModelCallError as exc:
        log.warning("retrieval.rerank_failed error=%s", exc)
        chosen = []
    picked = [by_id[i] for i in dict.fromkeys(chosen) if i in by_id][:keep]
    return picked or hits[:keep]
