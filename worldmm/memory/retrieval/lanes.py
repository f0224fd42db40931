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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from typing import TYPE_CHECKING

import numpy as np

from worldmm.localtime import in_zone
from worldmm.memory.retrieval.fusion import Candidate
from worldmm.store import segment_search as ss
from worldmm.store import term_stats as ts

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.store.db import Database

log = logging.getLogger(__name__)

LEXICAL, DENSE, GRAPH, ENTITY = "lexical", "dense", "graph", "entity"
# A live question's words may be in the window written a moment ago: a copy this old is
# checked for new segments (two index reads), and what changed is counted.
TERM_STATS_CHECK_S = 2.0
# Edits to counted segments show in a whole recount, made this often in the background.
TERM_STATS_RECOUNT_S = 1800.0
TERM_STATS_USERS = 256
MAX_QUERY_TERMS = 32


@dataclass(frozen=True)
class TimeRange:
    """The question's time range (either end open), applied by every lane."""

    start: datetime | None = None
    end: datetime | None = None


def _candidates(rows: Sequence[ss.LaneRow]) -> list[Candidate]:
    return [Candidate(r.segment_id, r.scale, r.start, r.end, r.score) for r in rows]


@dataclass
class _Kept:
    stats: ts.TermStats
    covered: ts.Coverage
    checked: float  # when the store was last asked what changed
    counted: float  # when every segment was last counted
    recounting: bool = False


def _in_thread(job: Callable[[], None]) -> None:
    threading.Thread(target=job, name="term-stats-recount", daemon=True).start()


class TermStatsMemo:
    """Per user (and database), the term statistics the lexical and entity lanes weigh by,
    kept in process: counted whole once, then brought up to date with the segments completed
    since (a question need not pay a count over its whole memory), and recounted whole in the
    background every ``TERM_STATS_RECOUNT_S``. ``spawn`` runs that recount (tests run it at
    once)."""

    def __init__(
        self,
        max_users: int = TERM_STATS_USERS,
        spawn: Callable[[Callable[[], None]], None] = _in_thread,
    ) -> None:
        self._lock = threading.Lock()
        self._max = max_users
        self._spawn = spawn
        self._entries: OrderedDict[tuple[int, str], _Kept] = OrderedDict()

    def get(self, conn, db: Database, user_id: str) -> ts.TermStats:
        key = (id(db), user_id)
        now = time.monotonic()
        with self._lock:
            kept = self._entries.get(key)
            if kept is not None:
                self._entries.move_to_end(key)
                if now - kept.checked < TERM_STATS_CHECK_S:
                    return kept.stats
        covered = ts.coverage(conn, user_id)
        if kept is None or covered.upto < kept.covered.upto:  # new, or its segments deleted
            stats = ts.read_since(conn, user_id, ts.NOTHING, covered)
            self._put(key, _Kept(stats, covered, now, now))
            return stats
        stats = kept.stats
        if covered != kept.covered:
            stats = ts.merge(stats, ts.read_since(conn, user_id, kept.covered, covered))
        recount = now - kept.counted >= TERM_STATS_RECOUNT_S and not kept.recounting
        self._put(key, _Kept(stats, covered, now, kept.counted, kept.recounting or recount))
        if recount:
            self._spawn(lambda: self._recount(db, key, user_id))
        return stats

    def _recount(self, db: Database, key: tuple[int, str], user_id: str) -> None:
        started = time.monotonic()
        try:
            with db.connection() as conn:
                stats, covered = ts.read_all(conn, user_id)
        except Exception as exc:  # the kept copy serves on; the next check tries again
            log.warning("retrieval.term_stats_recount_failed user=%s error=%s", user_id, exc)
            with self._lock:
                if (kept := self._entries.get(key)) is not None:
                    kept.recounting = False
            return
        self._put(key, _Kept(stats, covered, started, started))

    def _put(self, key: tuple[int, str], kept: _Kept) -> None:
        with self._lock:
            keep_recent(self._entries, key, kept, self._max)


def keep_recent(entries: OrderedDict, key, value, limit: int) -> None:
    """Store ``value`` as the most recent entry; the least recent leave past ``limit``."""
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > limit:
        entries.popitem(last=False)


TERM_STATS = TermStatsMemo()


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
