"""Retrieval's reads of one user's memory in PostgreSQL: one pooled connection per call, rows
mapped to the graph layer's shapes. Every method filters by ``user_id`` (and ``as_of``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter
from zoneinfo import ZoneInfo

import numpy as np
from pydantic import AwareDatetime, BaseModel

from worldmm.graph.types import GraphMemoryType, GraphTriple
from worldmm.localtime import zone
from worldmm.models import SegmentRecord
from worldmm.store import entities as entity_repo
from worldmm.store import frames as frame_repo
from worldmm.store import segment_search
from worldmm.store import segments as segment_repo
from worldmm.store import triples as triple_repo
from worldmm.store import users as user_repo
from worldmm.store import visual as visual_repo
from worldmm.store.db import Database
from worldmm.store.models import TripleRow

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
    """What retrievers read (synchronous psycopg; they call it in worker threads)."""

    def __init__(self, db: Database) -> None:
        self._db = db

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
        with self._db.connection() as conn:
            rows = triple_repo.graph_rows(conn, user_id, memory_type, scale, id_range=id_range)
        return [GraphTriple._make(r) for r in rows]  # columns in GraphTriple's field order

    def graph_fingerprint(
        self, user_id: str, memory_type: GraphMemoryType, scale: int | None = None
    ) -> str:
        """A version stamp of the rows the current graph is built from: any insert, soft
        delete or forget changes it (the store's one indexed aggregate)."""
        with self._db.connection() as conn:
            return triple_repo.triples_fingerprint(conn, user_id, memory_type, scale)

    def top_semantic_triples(
        self, user_id: str, embedding: np.ndarray, k: int, as_of: datetime | None = None
    ) -> list[tuple[GraphTriple, float]]:
        """The ``k`` semantic facts active at ``as_of`` nearest ``embedding``, with cosine."""
        with self._db.connection() as conn:
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
        with self._db.connection() as conn:
            near = segment_search.dense_search(conn, user_id, embedding, windows, filters)
            rows = triple_repo.top_episodic_in_segments(
                conn, user_id, embedding, k, [r.segment_id for r in near], as_of=as_of
            )
        return [(from_triple_row(r), score) for r, score in rows]

    def triples_by_id(self, user_id: str, ids: Sequence[int]) -> list[GraphTriple]:
        with self._db.connection() as conn:
            rows = triple_repo.get_triples(conn, user_id, list(ids))
        return [from_triple_row(r) for r in rows]

    def nearest_entities(
        self, user_id: str, embedding: np.ndarray, min_cosine: float, k: int
    ) -> list[tuple[str, float]]:
        with self._db.connection() as conn:
            rows = entity_repo.nearest_canonical_entities(conn, user_id, embedding, min_cosine, k)
        return [(entity.name, score) for entity, score in rows]

    def segments(self, user_id: str, ids: Sequence[int]) -> list[SegmentRecord]:
        if not ids:
            return []
        with self._db.connection() as conn:
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
        with self._db.connection() as conn:
            rows = visual_repo.search_visual(
                conn, user_id, embedding, k, as_of, start=start, end=end
            )
        return [
            ClipMatch(segment_id=s.id, start=s.window_start, end=s.window_end, score=score)
            for s, score in rows
        ]

    def frames(self, user_id: str, start: datetime, end: datetime, limit: int) -> list[FrameRef]:
        with self._db.connection() as conn:
            rows = frame_repo.list_frames(conn, user_id, start, end, limit)
        return [FrameRef(key=f.blob_key, ts=f.captured_at) for f in rows]

    def zone(self, user_id: str) -> ZoneInfo:
        """The user's time zone (UTC for an unknown user, or a name the zone database no
        longer knows, which is logged)."""
        with self._db.connection() as conn:
            name = user_repo.user_timezone(conn, user_id)
        try:
            return zone(name)
        except ValueError:
            log.warning("retrieval.unknown_zone user=%s zone=%r", user_id, name)
            return zone(None)
