"""The text lanes of episodic retrieval, each usable alone, each returning ranked candidates.

- lexical: PostgreSQL full-text search over each segment's caption + transcript
  (:func:`worldmm.store.segment_search.lexical_search`, IDF-weighted, GIN index);
- dense: the segment text embeddings in pgvector (HNSW), cosine to the question.

The lanes over the knowledge graph are :mod:`graph_lane` (per-scale personalized PageRank
over the triples) and :mod:`entity_lane` (the windows holding the question's entities).
All filter by user and ``as_of``; these two also take the question's :class:`TimeRange`
and, for drill-down, an explicit set of segment ids (the graph lane's candidates are cut to
the range by :func:`restrict`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from typing import TYPE_CHECKING

import numpy as np

from worldmm.localtime import in_zone
from worldmm.memory.retrieval.fusion import Candidate
from worldmm.store import segment_search as ss

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger(__name__)

LEXICAL, DENSE, GRAPH, ENTITY = "lexical", "dense", "graph", "entity"
# Term statistics are a corpus statistic: a minute-old copy ranks as well as a fresh one, and
# recomputing them after every 30 s window of a live session would cost a scan each time.
TERM_STATS_MAX_AGE_S = 60.0
TERM_STATS_USERS = 256
MAX_QUERY_TERMS = 32


@dataclass(frozen=True)
class TimeRange:
    """The question's time range (either end open), applied by every lane."""

    start: datetime | None = None
    end: datetime | None = None


def _candidates(rows: Sequence[ss.LaneRow]) -> list[Candidate]:
    return [Candidate(r.segment_id, r.scale, r.start, r.end, r.score) for r in rows]


class TermStatsMemo:
    """Per user, the lexeme document frequencies the lexical lane weighs terms by, kept in
    process and refreshed when the user's segments changed and the copy is a minute old."""

    def __init__(self, max_users: int = TERM_STATS_USERS) -> None:
        self._lock = threading.Lock()
        self._max = max_users
        self._entries: OrderedDict[tuple[int, str], tuple[tuple[int, int], float, ss.TermStats]]
        self._entries = OrderedDict()

    def get(self, conn, db_key: int, user_id: str) -> ss.TermStats:
        # A copy younger than the max age is served without asking the store anything; an
        # older one is checked against the segments' stamp (a count over the user's segments,
        # which grows with the memory) and recomputed only when they changed.
        key = (db_key, user_id)
        now = time.monotonic()
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and now - hit[1] < TERM_STATS_MAX_AGE_S:
                self._entries.move_to_end(key)
                return hit[2]
        stamp = ss.segment_count_stamp(conn, user_id)
        if hit is not None and hit[0] == stamp:
            with self._lock:
                self._entries[key] = (stamp, now, hit[2])
                self._entries.move_to_end(key)
            return hit[2]
        stats = ss.term_stats(conn, user_id)
        with self._lock:
            self._entries[key] = (stamp, now, stats)
            self._entries.move_to_end(key)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return stats


TERM_STATS = TermStatsMemo()


def idf(docs: int, df: int) -> float:
    """BM25's IDF, never negative (a term in most segments weighs almost nothing)."""
    return float(np.log(1.0 + (docs - df + 0.5) / (df + 0.5)))


def weighted_terms(lexemes: Sequence[str], stats: ss.TermStats) -> list[tuple[str, float]]:
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
        stats = TERM_STATS.get(conn, id(deps.db), user_id)
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
