"""The service's dependencies, built once at start-up and handed to routes via ``Depends``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request

if TYPE_CHECKING:
    import redis

    from apps.query_api.limits import RateLimiter
    from worldmm.blobs import BlobStore
    from worldmm.embed.base import TextEmbedder
    from worldmm.encoder.base import VisualEncoder
    from worldmm.graph.cache import GraphCacheLike
    from worldmm.llm.roles import ModelRoles
    from worldmm.memory.deps import IngestDeps
    from worldmm.memory.retrieval import RetrievalDeps
    from worldmm.settings import Settings
    from worldmm.store.db import Database


@dataclass
class ServiceDeps:
    """Everything a request needs. Tests build one with fakes (e.g. scripted roles)."""

    settings: Settings
    db: Database
    roles: ModelRoles
    embedder: TextEmbedder
    encoder: VisualEncoder | None
    cache: GraphCacheLike
    blobs: BlobStore
    redis: redis.Redis | None = None  # readiness ping and purge sweep; None = no Redis
    owned: list[object] = field(default_factory=list)  # closed by close()
    _retrieval: RetrievalDeps | None = field(default=None, repr=False)
    _limiter: RateLimiter | None = field(default=None, repr=False)
    _ingest: IngestDeps | None = field(default=None, repr=False)

    def retrieval(self, max_rounds: int | None = None) -> RetrievalDeps:
        """The agent's bundle over the same pool and models; ``max_rounds`` (already
        validated against the server's limit) overrides the rounds of this one request."""
        from worldmm.memory.retrieval import RetrievalDeps

        if self._retrieval is None:
            self._retrieval = RetrievalDeps(
                db=self.db,
                roles=self.roles,
                embedder=self.embedder,
                encoder=self.encoder,
                cache=self.cache,  # type: ignore[arg-type]  # any GraphCacheLike works
                settings=self.settings,
            )
        if max_rounds is None or max_rounds == self.settings.agent_max_rounds:
            return self._retrieval
        settings = self.settings.model_copy(update={"agent_max_rounds": max_rounds})
        return dataclasses.replace(self._retrieval, settings=settings)

    def rate_limiter(self) -> RateLimiter:
        """Per-key request budget (WORLDMM_API_RATE_LIMIT), kept in Redis when there is one."""
        from apps.query_api.limits import RateLimiter

        if self._limiter is None:
            self._limiter = RateLimiter(self.settings.api_rate_limit, self.redis)
        return self._limiter

    def ingest(self) -> IngestDeps:
        """Memory construction's bundle (for "remember this" notes); no transcriber needed.
        One instance, so its per-user locks serialise this process's consolidations."""
        from worldmm.memory.deps import IngestDeps

        if self._ingest is None:
            self._ingest = IngestDeps(
                settings=self.settings,
                db=self.db,
                roles=self.roles,
                embedder=self.embedder,
                transcriber=None,
                encoder=self.encoder,
                blobs=self.blobs,
            )
        return self._ingest

    def close(self) -> None:
        for thing in reversed(self.owned):
            close = getattr(thing, "close", None)
            if close is not None:
                close()
        self.owned.clear()


def build_service_deps(settings: Settings) -> ServiceDeps:
    """Real dependencies from settings: the models load here, once per process."""

    from worldmm.blobs import build_blob_store
    from worldmm.embed import build_embedder
    from worldmm.encoder import build_visual_encoder
    from worldmm.graph.cache import GraphCache, NullCache, redis_client
    from worldmm.llm.roles import build_roles
    from worldmm.stack import database_url, redis_url
    from worldmm.store.db import Database

    # only PostgreSQL and Redis: the query service never talks to Kafka
    # a short pool wait: while PostgreSQL is down a request gets 503 + Retry-After in
    # seconds instead of hanging for the pool's default 30 s
    db = Database(database_url(settings), max_size=8, timeout_s=5.0, name="worldmm-query")
    owned: list[object] = [db]
    try:
        embedder = build_embedder(settings)
        client = None
        cache: GraphCacheLike = NullCache()
        cache_url = redis_url(settings)
        if cache_url:
            client = redis_client(cache_url, timeout_s=1.0)  # fails fast while Redis is down
            owned.append(client)
            cache = GraphCache(client)
        return ServiceDeps(
            settings=settings,
            db=db,
            roles=build_roles(settings, embedder),
            embedder=embedder,
            encoder=build_visual_encoder(settings),
            cache=cache,
            blobs=build_blob_store(settings),
            redis=client,
            owned=owned,
        )
    except BaseException:
        for thing in reversed(owned):
            thing.close()  # type: ignore[attr-defined]
        raise


def get_deps(request: Request) -> ServiceDeps:
    return request.app.state.deps


Deps = Annotated[ServiceDeps, Depends(get_deps)]
