"""Retrieval's one door to PostgreSQL: every read a search makes, one pooled connection per
call (in autocommit: no transaction round trips around a read), rows mapped to the shapes
retrieval uses. A thin adapter: the SQL is the store modules' (:mod:`worldmm.store`), the
ranking is the lanes'. Every method filters by ``user_id`` (and ``as_of`` where time
applies). The per-user document frequencies the lanes weigh by are kept in
:mod:`frequencies` (the bundle's, shared by its copies) and read through here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from operator import attrgetter
from zoneinfo import ZoneInfo

import numpy as np
from pydantic import AwareDatetime, BaseModel

from worldmm.graph.types import GraphMemoryType, GraphTriple
from worldmm.localtime import zone
from worldmm.memory.retrieval.frequencies import EntityWindowsMemo, TermStatsMemo
from worldmm.models import SegmentRecord
from worldmm.store import entities as entity_repo
from worldmm.store import entity_links, segment_search
from worldmm.store import frames as frame_repo
from worldmm.store import segments as segment_repo
from worldmm.store import triples as triple_repo
from worldmm.store import users as user_repo
from worldmm.store import visual as visual_repo
from worldmm.store.db import Database
from worldmm.store.entity_links import RankedWindow
from worldmm.store.importance_recall import recalled_segments, segment_priors
from worldmm.store.models import TripleRow
from worldmm.store.segment_search import ChildRow, Filters, LaneRow
from worldmm.store.term_stats import TermStats

log = logging.getLogger(__name__)


class ClipMatch(BaseModel):
    """A visual clip (one 30 s segment's embedding) matched by cosine."""

    segment_id: int
    start: AwareDatetime
    end: AwareDatetime
    score: float


class FrameRef(BaseModel):
    key: str
    ts: AwareDatetime


# A stored triple's attributes in GraphTriple's field order.
_graph_fields = attrgetter(
    "id",
    "subject_name",
    "predicate",
    "object_name",
    "object_is_literal",
    "segment_id",
    "scale_seconds",
    "valid_from",
    "invalidated_at",
)


def from_triple_row(row: TripleRow) -> GraphTriple:
    """A stored triple (or any row with its attributes) as the graph builder takes it."""
    return GraphTriple(*_graph_fields(row))


class MemoryReader:
    """What retrievers read (synchronous psycopg; they call it in worker threads), over
    ``db``, with the bundle's per-user document frequencies (new ones when not given)."""

    def __init__(
        self,
        db: Database,
        term_stats: TermStatsMemo | None = None,
        entity_windows: EntityWindowsMemo | None = None,
    ) -> None:
        self._db = db
        self._term_stats = term_stats if term_stats is not None else TermStatsMemo()
        self._entity_windows = entity_windows if entity_windows is not None else EntityWindowsMemo()

    # --- the episodic lanes ---------------------------------------------------------------
    def dense_segments(
        self, user_id: str, embedding: np.ndarray, k: int, filters: Filters
    ) -> list[LaneRow]:
        """The ``k`` segments within ``filters`` whose text is nearest ``embedding``. Over
        the whole memory up to ``as_of``, the term statistics kept in process say how many
        30 s windows pass at least (each has its embedding once the backfill has run), so a
        memory too large for an exact scan goes to the index without a count."""
        with self._db.reading() as conn:
            at_least = 0
            if (
                filters.start is None
                and filters.end is None
                and filters.ids is None
                and filters.scales is None
            ):
                stats = self._term_stats.get(conn, self._db, user_id)
                at_least = stats.windows_at(filters.as_of)
            return segment_search.dense_search(
                conn, user_id, embedding, k, filters, at_least=at_least
            )

    def query_terms(self, user_id: str, query: str) -> tuple[TermStats, list[str]]:
        """The user's term statistics (kept per process) and the lexemes of ``query``."""
        with self._db.reading() as conn:
            stats = self._term_stats.get(conn, self._db, user_id)
            return stats, segment_search.query_lexemes(conn, query)

    def word_terms(
        self, user_id: str, words: Sequence[str]
    ) -> tuple[TermStats, dict[str, list[str]]]:
        """The user's term statistics (kept per process) and each word's lexemes."""
        with self._db.reading() as conn:
            stats = self._term_stats.get(conn, self._db, user_id)
            return stats, segment_search.word_lexemes(conn, words)

    def lexical_segments(
        self,
        user_id: str,
        terms: Sequence[tuple[str, float]],
        stats: TermStats,
        k: int,
        filters: Filters,
    ) -> list[LaneRow]:
        """The ``k`` segments within ``filters`` with the best BM25 score for the weighted
        ``terms`` (lengths and document frequencies from ``stats``): exact when the proof's
        posting lists fit the candidate cap, else among the rarest lexemes' candidates."""
        with self._db.reading() as conn:
            return segment_search.lexical_search(
                conn,
                user_id,
                terms,
                stats.mean_length,
                k,
                filters,
                doc_freq=stats.df,
                max_candidates=segment_search.candidate_cap(k),
                max_proof=segment_search.candidate_cap(k),
            )

    def entity_matches(
        self, user_id: str, names: Sequence[str], embeddings: np.ndarray, min_cosine: float
    ) -> list[tuple[int, float] | None]:
        """Per name, the canonical entity it names and how strongly: the same name or an
        alias (1.0), else the nearest by its embedding with cosine at least ``min_cosine``
        (that cosine); None when neither."""
        out: list[tuple[int, float] | None] = []
        with self._db.reading() as conn:
            exact = entity_links.canonical_ids(conn, user_id, list(names))
            for name, vec in zip(names, embeddings, strict=True):
                if (eid := exact.get(name.strip().lower())) is not None:
                    out.append((eid, 1.0))
                    continue
                near = entity_repo.nearest_canonical_entities(conn, user_id, vec, min_cosine, 1)
                out.append((near[0][0].id, near[0][1]) if near else None)
        return out

    def window_counts(
        self, user_id: str, entity_ids: Sequence[int], as_of: datetime | None
    ) -> tuple[int, dict[int, int]]:
        """How many 30 s windows had ended by ``as_of``, and how many of them name each of
        ``entity_ids`` (both kept per process)."""
        with self._db.reading() as conn:
            stats = self._term_stats.get(conn, self._db, user_id)
            ends = stats.base_ends
            df = self._entity_windows.counts(conn, self._db, user_id, entity_ids, as_of, ends)
        return stats.windows_at(as_of), df

    def ranked_entity_windows(
        self,
        user_id: str,
        weights: Mapping[int, float],
        cap: int,
        k: int,
        filters: Filters,
        around: float,
    ) -> list[RankedWindow]:
        """The top ``k`` 30 s windows for the weighted entities (``around``: the weight of
        one only near a window), from a read of at most ``cap`` links per entity and side,
        newest first, ranked in one statement
        (:func:`worldmm.store.entity_links.ranked_windows`)."""
        with self._db.reading() as conn:
            return entity_links.ranked_windows(conn, user_id, weights, cap, k, filters, around)

    def segment_windows(
        self, user_id: str, ids: Sequence[int]
    ) -> dict[int, tuple[datetime, datetime]]:
        """(window start, window end) of the segments among ``ids`` (forgotten ones absent)."""
        with self._db.reading() as conn:
            return segment_search.segment_windows(conn, user_id, ids)

    def segment_priors(
        self, user_id: str, ids: Sequence[int], *, importance: bool = True
    ) -> dict[int, tuple[float | None, int]]:
        """Importance and recall count of the segments among ``ids`` (one read by id);
        without ``importance``, only the recalled ones (importance None), through their own
        small index."""
        if not ids:
            return {}
        with self._db.reading() as conn:
            if not importance:
                return dict(recalled_segments(conn, user_id, sorted(ids)))
            return dict(segment_priors(conn, user_id, sorted(ids)))

    def drill_children(
        self,
        user_id: str,
        parent_ids: Sequence[int],
        terms: Sequence[tuple[str, float]],
        stats: TermStats,
        embedding: np.ndarray,
        filters: Filters,
    ) -> list[ChildRow]:
        """The 30 s descendants of ``parent_ids`` within ``filters``, each with its lexical
        score for the weighted ``terms``, its cosine to ``embedding`` and its priors (one
        statement: :func:`worldmm.store.segment_search.drill_children`)."""
        with self._db.reading() as conn:
            return segment_search.drill_children(
                conn, user_id, parent_ids, terms, stats.mean_length, embedding, filters
            )

    def first_segment_start(self, user_id: str) -> datetime | None:
        """When the user's first segment starts (None without any)."""
        with self._db.reading() as conn:
            return segment_search.first_segment_start(conn, user_id)

    # --- the graphs and facts -------------------------------------------------------------

    def graph_history(
        self,
        user_id: str,
        memory_type: GraphMemoryType,
        scale: int | None = None,
        *,
        id_range: tuple[int, int] | None = None,
    ) -> list[GraphTriple]:
        """Every row of a graph whatever its time, soft-deleted semantic ones included, each
        with ``valid_from`` and ``invalidated_at``, oldest id first; ``id_range=(after,
        upto]`` only those ids. A time-masked graph is built from these."""
        with self._db.reading() as conn:
            rows = triple_repo.graph_rows(conn, user_id, memory_type, scale, id_range=id_range)
        return [GraphTriple._make(r) for r in rows]  # columns in GraphTriple's field order

    def graph_fingerprint(
        self, user_id: str, memory_type: GraphMemoryType, scale: int | None = None
    ) -> str:
        """A version stamp of the rows the current graph is built from: any insert, soft
        delete or forget changes it (the store's one indexed aggregate)."""
        with self._db.reading() as conn:
            return triple_repo.triples_fingerprint(conn, user_id, memory_type, scale)

    def top_semantic_triples(
        self, user_id: str, embedding: np.ndarray, k: int, as_of: datetime | None = None
    ) -> list[tuple[GraphTriple, float]]:
        """The ``k`` semantic facts active at ``as_of`` nearest ``embedding``, with cosine."""
        with self._db.reading() as conn:
            rows = triple_repo.top_semantic_triples(conn, user_id, embedding, k, as_of=as_of)
        return [(from_triple_row(r), score) for r, score in rows]

    def nearest_window_facts(
        self,
        user_id: str,
        embedding: np.ndarray,
        k: int,
        *,
        scale: int,
        windows: int,
        as_of: datetime | None = None,
    ) -> list[tuple[GraphTriple, float]]:
        """The ``k`` episodic facts nearest ``embedding`` among those of the ``windows``
        segments of ``scale`` whose text is nearest it (all existing at ``as_of``), with
        their cosine: two reads through indexes, whatever the size of the memory."""
        filters = segment_search.Filters(as_of=as_of, scales=[scale])
        with self._db.reading() as conn:
            near = segment_search.dense_search(conn, user_id, embedding, windows, filters)
            rows = triple_repo.top_episodic_in_segments(
                conn, user_id, embedding, k, [r.segment_id for r in near], as_of=as_of
            )
        return [(from_triple_row(r), score) for r, score in rows]

    def triples_by_id(self, user_id: str, ids: Sequence[int]) -> list[GraphTriple]:
        with self._db.reading() as conn:
            rows = triple_repo.get_triples(conn, user_id, list(ids))
        return [from_triple_row(r) for r in rows]

    def nearest_entities(
        self, user_id: str, embedding: np.ndarray, min_cosine: float, k: int
    ) -> list[tuple[str, float]]:
        with self._db.reading() as conn:
            rows = entity_repo.nearest_canonical_entities(conn, user_id, embedding, min_cosine, k)
        return [(entity.name, score) for entity, score in rows]

    # --- text, frames and the wearer's zone -----------------------------------------------
    def segments(self, user_id: str, ids: Sequence[int]) -> list[SegmentRecord]:
        if not ids:
            return []
        with self._db.reading() as conn:
            return list(segment_repo.get_segments(conn, user_id, list(ids)))

    def search_visual(
        self,
        user_id: str,
        embedding: np.ndarray,
        k: int,
        as_of: datetime | None = None,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> list[ClipMatch]:
        """The ``k`` clips nearest ``embedding``; ``start``/``end``: only windows overlapping
        that range."""
        with self._db.reading() as conn:
            rows = visual_repo.search_visual(
                conn, user_id, embedding, k, as_of, start=start, end=end
            )
        return [
            ClipMatch(segment_id=s.id, start=s.window_start, end=s.window_end, score=score)
            for s, score in rows
        ]

    def frames(self, user_id: str, start: datetime, end: datetime, limit: int) -> list[FrameRef]:
        with self._db.reading() as conn:
            rows = frame_repo.list_frames(conn, user_id, start, end, limit)
        return [FrameRef(key=f.blob_key, ts=f.captured_at) for f in rows]

    def zone(self, user_id: str) -> ZoneInfo:
        """The user's time zone (UTC for an unknown user, or a name the zone database no
        longer knows, which is logged)."""
        with self._db.reading() as conn:
            name = user_repo.user_timezone(conn, user_id)
        try:
            return zone(name)
        except ValueError:
            log.warning("retrieval.unknown_zone user=%s zone=%r", user_id, name)
            return zone(None)
