"""The lanes of episodic retrieval that read the store's own indexes, each usable alone, each
returning ranked candidates (the graph lane, personalized PageRank, is :mod:`graph_lanes`):

- lexical: PostgreSQL full-text search over each segment's caption + transcript
  (:func:`worldmm.store.segment_search.lexical_search`, IDF-weighted, GIN index);
- dense: the segment text embeddings in pgvector (HNSW), cosine to the question;
- entity: the 30 s windows where the question's people and things were, read from the
  knowledge graph's entities rather than from the words ("who did I move the whiteboard
  with": the window with the whiteboard and the people around it).

All filter by user and ``as_of`` and take the question's :class:`TimeRange`; the text lanes
also take an explicit set of segment ids (drill-down), and the graph lane's candidates are cut
to the range by :func:`restrict`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from typing import TYPE_CHECKING

import numpy as np
import psycopg

from worldmm.localtime import in_zone
from worldmm.memory.retrieval.frequencies import ENTITY_WINDOWS, TERM_STATS
from worldmm.memory.retrieval.fusion import BASE_SCALE, Candidate
from worldmm.store import entities as entity_repo
from worldmm.store import entity_links
from worldmm.store import segment_search as ss
from worldmm.store import term_stats as ts
from worldmm.store.entity_links import EntityLinks, LinkedWindow, LinkRow
from worldmm.store.segment_search import Filters

if TYPE_CHECKING:
    from worldmm.deps import Deps

LEXICAL, DENSE, GRAPH, ENTITY = "lexical", "dense", "graph", "entity"
MAX_QUERY_TERMS = 32


@dataclass(frozen=True)
class TimeRange:
    """The question's time range (either end open), applied by every lane."""

    start: datetime | None = None
    end: datetime | None = None


def _candidates(rows: Sequence[ss.LaneRow]) -> list[Candidate]:
    return [Candidate(r.segment_id, r.scale, r.start, r.end, r.score) for r in rows]


def idf(docs: int, df: int) -> float:
    """BM25's IDF, never negative (a term in most segments weighs almost nothing)."""
    return float(np.log(1.0 + (docs - df + 0.5) / (df + 0.5)))


def weighted_terms(lexemes: Sequence[str], stats: ts.TermStats) -> list[tuple[str, float]]:
    """The query's lexemes with their IDF; unknown lexemes (in no segment) are dropped, and
    at most ``MAX_QUERY_TERMS`` of the rarest are kept."""
    terms = [
        (lex, idf(stats.docs, stats.df[lex]))
        for lex in dict.fromkeys(lexemes)
        if stats.df.get(lex, 0) > 0
    ]
    terms.sort(key=lambda t: -t[1])
    return terms[:MAX_QUERY_TERMS]


def text_lane(
    deps: Deps,
    lane: str,
    user_id: str,
    query: str,
    vector: np.ndarray,
    k: int,
    as_of: datetime | None,
    time_range: TimeRange = TimeRange(),
    ids: Sequence[int] | None = None,
) -> list[Candidate]:
    """The ``k`` best segments of one text lane: ``LEXICAL`` ranks by ``query``'s words,
    ``DENSE`` by ``vector``."""
    filters = ss.Filters(as_of, time_range.start, time_range.end, ids=ids)
    with deps.db.connection() as conn:
        if lane == DENSE:
            return _candidates(ss.dense_search(conn, user_id, vector, k, filters))
        stats = TERM_STATS.get(conn, deps.db, user_id)
        terms = weighted_terms(ss.query_lexemes(conn, query), stats)
        rows = ss.lexical_search(
            conn,
            user_id,
            terms,
            stats.mean_length,
            k,
            filters,
            doc_freq=stats.df,
            max_candidates=ss.candidate_cap(k),
        )
    return _candidates(rows)


def restrict(cands: Sequence[Candidate], time_range: TimeRange, ids: set[int] | None = None):
    """Candidates inside ``time_range`` (overlapping it) and, when given, among ``ids``."""
    out = []
    for c in cands:
        if time_range.start is not None and c.end <= time_range.start:
            continue
        if time_range.end is not None and c.start >= time_range.end:
            continue
        if ids is not None and c.segment_id not in ids:
            continue
        out.append(c)
    return out


def first_memory_day(deps: Deps, user_id: str, tz: tzinfo) -> date | None:
    """The day of the user's first segment on the wearer's clock ("day 1" in a question)."""
    with deps.db.connection() as conn:
        first = ss.first_segment_start(conn, user_id)
    return None if first is None else in_zone(first, tz).date()


# --- the entity lane --------------------------------------------------------------------------
# The question's entities (NER) are resolved to the user's canonical entities: the same name or
# an alias first, else the nearest canonical entity by embedding (cosine at least
# ``entity_match_threshold``). "I" and "me" are left out: the wearer is in every window.
# A window *holds* an entity its own triples link (named in the caption, or speaking: a
# transcript line ties its speaker to what it mentions). It is *around* the entities its 3 min
# parent links (its siblings' and the summary's): who was there while it happened.
# Score: the sum over the question's entities of IDF x match strength, full for held ones and
# half for those only around; ties go to the newer window. IDF is BM25's over the 30 s windows
# that existed at ``as_of`` (however the question's range narrows the windows), so a person in
# every window (a housemate) counts little and the two named people together outrank either
# alone. Reads: each entity's windows newest first up to a cap, once (below); the work follows
# what is returned, not how many windows share a housemate.
FIRST_PERSON = frozenset({"i", "me", "my", "myself", "mine"})


@dataclass(frozen=True)
class QueryEntity:
    """A canonical entity the question names; ``strength`` is 1 for the same name or an
    alias, the cosine for an embedding match."""

    entity_id: int
    name: str
    strength: float


def resolve_entities(
    deps: Deps, user_id: str, names: Sequence[str], vectors: np.ndarray
) -> list[QueryEntity]:
    """The user's canonical entities for the question's ``names`` (``vectors`` are their
    embeddings, in order), the strongest match per entity, first person left out."""
    pairs = [(n, v) for n, v in zip(names, vectors, strict=True) if n.lower() not in FIRST_PERSON]
    if not pairs:
        return []
    threshold = deps.settings.entity_match_threshold
    found: dict[int, QueryEntity] = {}
    with deps.db.connection() as conn:
        exact = entity_links.canonical_ids(conn, user_id, [n for n, _ in pairs])
        for name, vec in pairs:
            if (eid := exact.get(name.strip().lower())) is not None:
                match = QueryEntity(eid, name, 1.0)
            else:
                near = entity_repo.nearest_canonical_entities(conn, user_id, vec, threshold, 1)
                if not near:
                    continue
                match = QueryEntity(near[0][0].id, name, near[0][1])
            best = found.get(match.entity_id)
            if best is None or match.strength > best.strength:
                found[match.entity_id] = match
    return list(found.values())


def entity_lane(
    deps: Deps,
    user_id: str,
    matches: Sequence[QueryEntity],
    k: int,
    as_of: datetime | None,
    time_range: TimeRange,
) -> list[Candidate]:
    """The top ``k`` windows for the question's resolved entities (none: no candidates)."""
    if not matches or k <= 0:
        return []
    strengths = {m.entity_id: m.strength for m in matches}
    filters = Filters(as_of, time_range.start, time_range.end)
    with deps.db.connection() as conn:
        # N of the IDF: the lexical lane's per-user statistics hold the window ends (a count
        # over the store read the user's whole segments table on every question)
        total = TERM_STATS.get(conn, deps.db, user_id).windows_at(as_of)
        df = ENTITY_WINDOWS.counts(conn, deps.db, user_id, sorted(strengths), as_of)
        weights = entity_weights(strengths, total, df)
        return ranked_windows(conn, user_id, weights, k, filters)


# --- how the entity lane ranks windows, reading no more than the top ``k`` need -------------
# Score (:func:`score_windows`): the sum over the asked entities a window holds of their
# weight, plus :data:`AROUND_WEIGHT` times the weights of those only in its 3 min
# neighbourhood (its parent's and siblings' links); ties go to the newer window. A weight is the
# match strength times BM25's IDF over the 30 s windows that existed at ``as_of``
# (:func:`entity_weights`, document frequencies kept in :mod:`frequencies`).
#
# Bounded read (:func:`bounded_read`). A common entity (a housemate, "table") is linked by
# thousands of episodic triples a week, and reading them all made the lane grow with the
# memory. Each entity's links (as subject and as object, every scale) are read newest first, at
# most ``cap`` per side; an entity whose read stopped there is *capped*, and its links at or
# before its boundary ``V`` (the time of the last link read) are unknown. Known exactly then: a
# window's own links when it ended after every capped entity's boundary, and its neighbourhood
# when its parent started at or after them (children lie inside their parent's window, as
# construction links them). Every other window read (one holding a rarer entity further back,
# one near a boundary) has its parent's window read again for the capped entities: a range read
# of each one's index over that window, a few entries. Then every window read is scored
# exactly, and the lane returns the best ``k`` of them (:func:`ranked_windows`): the best
# windows among each entity's newest links.
#
# That is the exact ranking's top ``k`` whenever a bound proves no window left unread can
# outrank the ``k``-th (a window never read holds only capped entities; its score is at most
# that of holding them while near all the others). The lane does not check the proof: reading
# more until it held was what it did before, and with two or more common entities asked the
# proof almost never holds, so every such question read a common entity's whole history
# (docs/benchmarks/query.md). The proof and the full read the tests compare with are in
# ``tests/fixtures/entity_exact.py``.
AROUND_WEIGHT = 0.5  # an entity in the window's 3 min neighbourhood, not in the window itself
# Links read per entity and side (subject, object) first: a floor, and per window asked (a
# window names an entity in one or a few triples, and one link in five is of a coarser scale).
LINK_CAP_MIN = 256
LINK_CAP_PER_RESULT = 4

Span = tuple[datetime, datetime]


def entity_weights(
    strengths: Mapping[int, float], total: int, df: Mapping[int, int]
) -> dict[int, float]:
    """Each entity's weight: its match strength times its IDF over ``total`` windows."""
    return {e: s * idf(max(total, df.get(e, 0)), df.get(e, 0)) for e, s in strengths.items()}


def window_score(held: Iterable[int], near: Iterable[int], weights: Mapping[int, float]) -> float:
    """A window's score from the entities it holds and those near it (summed in id order, so
    the same sets always give the same float)."""
    own = sorted(set(held))
    return sum(weights.get(e, 0.0) for e in own) + AROUND_WEIGHT * sum(
        weights.get(e, 0.0) for e in sorted(set(near) - set(own))
    )


def score_windows(links: Sequence[EntityLinks], weights: Mapping[int, float]) -> list[Candidate]:
    """The 30 s windows among ``links`` that hold a weighted entity, best first (ties: the
    newer window)."""
    nearby: dict[int, set[int]] = {}
    for link in links:
        key = link.parent_id if link.scale == BASE_SCALE else link.segment_id
        if key is not None:
            nearby.setdefault(key, set()).update(link.entity_ids)
    scored = []
    for link in links:
        if link.scale != BASE_SCALE or not any(weights.get(e, 0.0) > 0 for e in link.entity_ids):
            continue
        near = nearby.get(link.parent_id, set()) if link.parent_id is not None else set()
        score = window_score(link.entity_ids, near, weights)
        scored.append(Candidate(link.segment_id, link.scale, link.start, link.end, score))
    scored.sort(key=lambda c: (-c.score, -c.end.timestamp(), c.segment_id))
    return scored


def link_cap(k: int) -> int:
    """Links per entity and side a search of ``k`` windows reads first."""
    return max(LINK_CAP_MIN, LINK_CAP_PER_RESULT * k)


def boundaries(rows: Iterable[LinkRow], cap: int) -> dict[int, datetime]:
    """Per capped entity (a side of it returned ``cap`` rows, newest first), the time at and
    before which its links are unknown: the later of its full sides' last times."""
    count: dict[tuple[int, bool], int] = defaultdict(int)
    last: dict[tuple[int, bool], datetime] = {}
    for r in rows:
        count[(r.entity_id, r.subject)] += 1
        last[(r.entity_id, r.subject)] = r.valid_from
    out: dict[int, datetime] = {}
    for (entity, subject), n in count.items():
        if n >= cap:
            at = last[(entity, subject)]
            out[entity] = max(out.get(entity, at), at)
    return out


class Known:
    """What a bounded read has seen: each segment's asked entities, the segments' windows,
    the capped entities' boundaries, and the windows read again in full."""

    def __init__(self, bounds: Mapping[int, datetime]) -> None:
        self.bounds = dict(bounds)
        self.held: dict[int, set[int]] = defaultdict(set)
        self.windows: dict[int, LinkedWindow] = {}
        self.spans: set[Span] = set()

    def add(self, links: Iterable[tuple[int, int, datetime]], *, complete: bool) -> None:
        """(entity, segment, time) links; unless ``complete`` (read over a whole span), a
        capped entity's at or before its boundary are left out: some of their ties may be
        missing, and the windows they belong to are read again."""
        for entity, segment, at in links:
            bound = self.bounds.get(entity)
            if complete or bound is None or at > bound:
                self.held[segment].add(entity)

    def unread(self) -> list[int]:
        return sorted(s for s in self.held if s not in self.windows)

    def after_bounds(self, at: datetime | None) -> bool:
        """Whether every capped entity's links after ``at`` are all known."""
        return at is not None and all(at >= v for v in self.bounds.values())

    def certain(self, w: LinkedWindow) -> bool:
        """Whether the 30 s window's score is exact: its own links and its neighbourhood's
        are known for every capped entity."""
        own = all(w.end > v for v in self.bounds.values()) or any(
            lo < w.end <= hi for lo, hi in self.spans
        )
        if w.parent_id is None:
            return own
        return own and (self.after_bounds(w.parent_start) or _parent_span(w) in self.spans)

    def to_read(self) -> set[Span]:
        """The windows to read again for the capped entities: the neighbourhood of every
        uncertain 30 s window (its parent's window, or its own without a parent), and each
        coarse segment naming an entity read in full (its children are near that one)."""
        out: set[Span] = set()
        for sid, w in self.windows.items():
            if w.scale == BASE_SCALE:
                if not self.certain(w):
                    out.add(_parent_span(w) or (w.start, w.end))
            elif self.held.get(sid, set()) - self.bounds.keys() and not self.after_bounds(w.start):
                out.add((w.start, w.end))
        return out - self.spans

    def links(self) -> list[EntityLinks]:
        return [
            EntityLinks(w.segment_id, w.scale, w.start, w.end, w.parent_id, frozenset(held))
            for sid, w in self.windows.items()
            if (held := self.held.get(sid))
        ]


def _parent_span(w: LinkedWindow) -> Span | None:
    if w.parent_start is None or w.parent_end is None:
        return None
    return (w.parent_start, w.parent_end)


def bounded_read(
    conn: psycopg.Connection,
    user_id: str,
    weights: Mapping[int, float],
    filters: Filters,
    cap: int,
) -> tuple[list[Candidate], Known]:
    """Every window the bounded read reached (``cap`` links per entity and side), ranked,
    and what the read saw (what a proof of exactness needs; the lane does not prove it)."""
    rows = entity_links.newest_links(conn, user_id, sorted(weights), cap, filters)
    known = Known(boundaries(rows, cap))
    known.add(((r.entity_id, r.segment_id, r.valid_from) for r in rows), complete=False)
    known.windows = entity_links.windows_of(conn, user_id, known.unread(), filters)
    if spans := known.to_read():
        capped = sorted(known.bounds)
        known.add(entity_links.links_within(conn, user_id, capped, spans, filters), complete=True)
        known.spans |= spans
        known.windows |= entity_links.windows_of(conn, user_id, known.unread(), filters)
    return score_windows(known.links(), weights), known


def ranked_windows(
    conn: psycopg.Connection,
    user_id: str,
    weights: Mapping[int, float],
    k: int,
    filters: Filters,
) -> list[Candidate]:
    """The top ``k`` windows from one bounded read: the best among each entity's newest links
    (the work stays bounded however long the memory; exact where the module's proof holds)."""
    if not weights or k <= 0:
        return []
    return bounded_read(conn, user_id, weights, filters, link_cap(k))[0][:k]
