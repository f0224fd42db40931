"""Everything a retriever needs, passed in as one typed bundle (tests pass fakes).

Retrievers read memory through :class:`MemoryReader`, a narrow synchronous port (the store
is synchronous psycopg; retrievers call it in worker threads). ``RetrievalDeps.reader`` is
the PostgreSQL adapter over ``db`` unless a reader is passed explicitly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import numpy as np
from pydantic import AwareDatetime, BaseModel

from worldmm.graph.cache import GraphCache, NullCache
from worldmm.graph.types import GraphMemoryType, GraphTriple, GraphTripleLike
from worldmm.models import SegmentRecord

if TYPE_CHECKING:
    from worldmm.embed.base import TextEmbedder
    from worldmm.encoder.base import VisualEncoder
    from worldmm.llm.roles import ModelRoles
    from worldmm.settings import Settings
    from worldmm.store.db import Database


class ClipMatch(BaseModel):
    """A visual clip (one 30 s segment's embedding) matched by cosine."""

    segment_id: int
    start: AwareDatetime
    end: AwareDatetime
    score: float


class FrameRef(BaseModel):
    key: str
    ts: AwareDatetime


class MemoryReader(Protocol):
    """Reads one user's memory; every method filters by ``user_id`` (and ``as_of``)."""

    def triples_for_graph(
        self,
        user_id: str,
        memory_type: GraphMemoryType,
        scale: int | None = None,
        as_of: datetime | None = None,
        *,
        id_range: tuple[int, int] | None = None,
    ) -> Sequence[GraphTripleLike]:
        """The rows of a graph, oldest id first; ``id_range=(after, upto]`` only those ids."""
        ...

    def graph_fingerprint(
        self, user_id: str, memory_type: GraphMemoryType, scale: int | None = None
    ) -> str:
        """Changes whenever the rows of the current graph change (cache freshness check)."""
        ...

    def top_triples(
        self,
        user_id: str,
        memory_type: GraphMemoryType,
        embedding: np.ndarray,
        k: int,
        scale: int | None = None,
        as_of: datetime | None = None,
    ) -> list[tuple[GraphTriple, float]]: ...

    def triples_by_id(self, user_id: str, ids: Sequence[int]) -> list[GraphTriple]: ...

    def nearest_entities(
        self, user_id: str, embedding: np.ndarray, min_cosine: float, k: int
    ) -> list[tuple[str, float]]: ...

    def segments(self, user_id: str, ids: Sequence[int]) -> list[SegmentRecord]: ...

    def search_visual(
        self, user_id: str, embedding: np.ndarray, k: int, as_of: datetime | None = None
    ) -> list[ClipMatch]: ...

    def frames(
        self, user_id: str, start: datetime, end: datetime, limit: int
    ) -> list[FrameRef]: ...


@dataclass
class RetrievalDeps:
    db: Database | None
    roles: ModelRoles
    embedder: TextEmbedder
    encoder: VisualEncoder | None
    cache: GraphCache | NullCache
    settings: Settings
    store: MemoryReader | None = None  # overrides the PostgreSQL adapter (tests)

    def __post_init__(self) -> None:
        if self.store is None:
            if self.db is None:
                raise ValueError("RetrievalDeps needs a Database (db) or a MemoryReader (store)")
            from worldmm.memory.retrieval.pg_reader import PgMemoryReader

            self.store = PgMemoryReader(self.db)

    @property
    def reader(self) -> MemoryReader:
        assert self.store is not None  # set in __post_init__
        return self.store


def build_retrieval_deps(settings: Settings, db: Database | None = None) -> RetrievalDeps:
    """The real dependencies from settings (models load here, once per process). Pass ``db``
    to share a pool; otherwise one is opened on ``settings.database_url``."""
    from worldmm.embed import build_embedder
    from worldmm.encoder.factory import build_visual_encoder
    from worldmm.graph.cache import make_cache
    from worldmm.llm.roles import build_roles
    from worldmm.store.db import Database

    if db is None:
        if not settings.database_url:
            raise ValueError("WORLDMM_DATABASE_URL is not set (run `worldmm up` or point it at PG)")
        db = Database(settings.database_url)
    embedder = build_embedder(settings)
    return RetrievalDeps(
        db=db,
        roles=build_roles(settings, embedder),
        embedder=embedder,
        encoder=build_visual_encoder(settings),
        cache=make_cache(settings.redis_url, memo_elements=settings.graph_memo_elements),
        settings=settings,
    )
