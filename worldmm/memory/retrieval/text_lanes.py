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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from worldmm.memory.retrieval.fusion import Candidate
from worldmm.store.segment_search import Filters, LaneRow
from worldmm.store.term_stats import TermStats

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.memory.retrieval.reader import MemoryReader

LEXICAL, DENSE, GRAPH, ENTITY = "lexical", "dense", "graph", "entity"
MAX_QUERY_TERMS = 32


@dataclass(frozen=True)
class TimeRange:
    """The question's time range (either end open), applied by every lane."""

    start: datetime | None = None
    end: datetime | None = None


def _candidates(rows: Sequence[LaneRow]) -> list[Candidate]:
    return [Candidate(r.segment_id, r.scale, r.start, r.end, r.score) for r in rows]


def idf(docs: int, df: int) -> float:
    """BM25's IDF, never negative (a term in most segments weighs almost nothing)."""
    return float(np.log(1.0 + (docs - df + 0.5) / (df + 0.5)))


def weighted_terms(lexemes: Sequence[str], stats: TermStats) -> list[tuple[str, float]]:
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
    filters = Filters(as_of, time_range.start, time_range.end, ids=ids)
    if lane == DENSE:
        return _candidates(deps.reader.dense_segments(user_id, vector, k, filters))
    stats, lexemes = deps.reader.query_terms(user_id, query)
    terms = weighted_terms(lexemes, stats)
    return _candidates(deps.reader.lexical_segments(user_id, terms, stats, k, filters))


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
    asked = [n for n, _ in pairs]
    matched = deps.reader.entity_matches(user_id, asked, [v for _, v in pairs], threshold)
    found: dict[int, QueryEntity] = {}
    for name, got in zip(asked, matched, strict=True):
        if got is None:
            continue
        match = QueryEntity(got[0], name, got[1])
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
    # N of the IDF: the lexical lane's per-user statistics hold the window ends (a count over
    # the store read the user's whole segments table on every question)
    total, df = deps.reader.window_counts(user_id, sorted(strengths), as_of)
    weights = entity_weights(strengths, total, df)
    return ranked_windows(deps.reader, user_id, weights, k, filters)


# --- how the entity lane ranks windows, reading no more than the top ``k`` need -------------
# Score: the sum over the asked entities a window holds of their
# weight, plus :data:`AROUND_WEIGHT` times the weights of those only in its 3 min
# neighbourhood (its parent's and siblings' links); ties go to the newer window. A weight is the
# match strength times BM25's IDF over the 30 s windows that existed at ``as_of``
# (:func:`entity_weights`, document frequencies kept in :mod:`frequencies`).
#
# Bounded read (:func:`worldmm.store.entity_links.ranked_windows`). A common entity (a
# housemate, "table") is linked by thousands of episodic triples a week, and reading them all
# made the lane grow with the memory. Each entity's links (as subject and as object, every
# scale) are read newest first, at most ``cap`` per side; an entity whose read stopped there is
# *capped*, and its links at or before its boundary ``V`` (the time of the last link read) are
# unknown. Known exactly then: a window's own links when it ended after every capped entity's
# boundary, and its neighbourhood when its parent started at or after them (children lie inside
# their parent's window, as construction links them). Every other window read (one holding a
# rarer entity further back, one near a boundary) has its parent's window read again for the
# capped entities: a range read of each one's index over that window, a few entries. Then every
# window read is scored exactly, and the lane returns the best ``k`` of them
# (:func:`ranked_windows`): the best windows among each entity's newest links. The read, the
# re-read and the scoring are one statement; only the ``k`` windows leave the database.
#
# That is the exact ranking's top ``k`` whenever a bound proves no window left unread can
# outrank the ``k``-th (a window never read holds only capped entities; its score is at most
# that of holding them while near all the others). The lane does not check the proof: reading
# more until it held was what it did before, and with two or more common entities asked the
# proof almost never holds, so every such question read a common entity's whole history
# (docs/benchmarks/query.md). The proof, the full read and the same bounded read step by step
# in Python, which the tests compare with, are in ``tests/fixtures/entity_exact.py``.
AROUND_WEIGHT = 0.5  # an entity in the window's 3 min neighbourhood, not in the window itself
# Links read per entity and side (subject, object) first: a floor, and per window asked (a
# window names an entity in one or a few triples, and one link in five is of a coarser scale).
LINK_CAP_MIN = 256
LINK_CAP_PER_RESULT = 4


def entity_weights(
    strengths: Mapping[int, float], total: int, df: Mapping[int, int]
) -> dict[int, float]:
    """Each entity's weight: its match strength times its IDF over ``total`` windows."""
    return {e: s * idf(max(total, df.get(e, 0)), df.get(e, 0)) for e, s in strengths.items()}


def link_cap(k: int) -> int:
    """Links per entity and side a search of ``k`` windows reads first."""
    return max(LINK_CAP_MIN, LINK_CAP_PER_RESULT * k)


def ranked_windows(
    reader: MemoryReader,
    user_id: str,
    weights: Mapping[int, float],
    k: int,
    filters: Filters,
) -> list[Candidate]:
    """The top ``k`` windows from one bounded read, ranked in the database: the best among
    each entity's newest links (the work stays bounded however long the memory; exact where
    the proof above holds)."""
    if not weights or k <= 0:
        return []
    cap = link_cap(k)
    ranked = reader.ranked_entity_windows(user_id, weights, cap, k, filters, AROUND_WEIGHT)
    return [Candidate(w.segment_id, w.scale, w.start, w.end, w.score) for w in ranked]
