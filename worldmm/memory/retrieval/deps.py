"""Everything a retriever needs, passed in as one typed bundle (tests pass fakes).

Retrievers read memory through :class:`MemoryReader`, a narrow synchronous port (the store
is synchronous psycopg; retrievers call it in worker threads). ``RetrievalDeps.reader`` is
the PostgreSQL adapter over ``db`` unless a reader is passed explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from worldmm.graph.cache import DEFAULT_MEMO_ELEMENTS, GraphCache, GraphMemo, NullCache
from worldmm.memory.retrieval.reader import ClipMatch, FrameRef, MemoryReader

__all__ = ["ClipMatch", "FrameRef", "MemoryReader", "RetrievalDeps", "build_retrieval_deps"]

if TYPE_CHECKING:
    from worldmm.embed.base import TextEmbedder
    from worldmm.encoder.base import VisualEncoder
    from worldmm.llm.roles import ModelRoles
    from worldmm.settings import Settings
    from worldmm.store.db import Database


@dataclass
class RetrievalDeps:
    db: Database | None
    roles: ModelRoles
    embedder: TextEmbedder
    encoder: VisualEncoder | None
    cache: GraphCache | NullCache
    settings: Settings
    store: MemoryReader | None = None  # overrides the PostgreSQL adapter (tests)
    # This process's time-masked graphs (worldmm.graph.timed), in front of Redis and used
    # without it too; each is served only while its fingerprint matches the store's. None:
    # one sized by ``settings.graph_memo_elements`` (copies made with dataclasses.replace
    # share it).
    graphs: GraphMemo = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.graphs is None:
            budget = getattr(self.settings, "graph_memo_elements", DEFAULT_MEMO_ELEMENTS)
            self.graphs = GraphMemo(budget)
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
        cache=make_cache(settings.redis_url),
        settings=settings,
        graphs=GraphMemo(settings.graph_memo_elements),
    )
