"""Everything memory construction needs, passed in as one typed bundle (tests pass fakes)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from worldmm.blobs import BlobStore
    from worldmm.embed.base import TextEmbedder
    from worldmm.encoder.base import VisualEncoder
    from worldmm.graph.cache import GraphCacheLike
    from worldmm.llm.roles import ModelRoles
    from worldmm.settings import Settings
    from worldmm.store.db import Database


class Transcriber(Protocol):
    """Speech to text (worldmm.asr); returns an object with a ``text`` attribute."""

    def transcribe(self, audio_bytes: bytes, *, content_type: str, sample_rate: int) -> Any: ...


def _null_cache() -> GraphCacheLike:
    from worldmm.graph.cache import NullCache

    return NullCache()


@dataclass
class IngestDeps:
    settings: Settings
    db: Database
    roles: ModelRoles
    embedder: TextEmbedder
    transcriber: Transcriber | None
    encoder: VisualEncoder | None
    blobs: BlobStore
    # Graph cache whose keys construction invalidates after each committed write; the
    # default (no Redis) is the no-op cache, so callers that build graphs elsewhere need none.
    cache: GraphCacheLike = field(default_factory=_null_cache)
    _locks: dict[str, asyncio.Lock] = field(default_factory=dict, repr=False)

    def user_lock(self, user_id: str) -> asyncio.Lock:
        """Per-user lock (one event loop per process) for steps that must not interleave."""
        lock = self._locks.get(user_id)
        if lock is None:
            lock = self._locks[user_id] = asyncio.Lock()
        return lock

    def close(self) -> None:
        self.db.close()
        close_cache = getattr(self.cache, "close", None)
        if close_cache is not None:
            close_cache()


def pool_size(concurrency: int) -> int:
    """Database connections for ``concurrency`` windows in flight: a window holds one only
    for its short store calls (never across a model call), and PostgreSQL allows 100
    connections by default, so the pool stops growing at 32."""
    return min(max(4, concurrency // 2), 32)


def build_ingest_deps(settings: Settings) -> IngestDeps:
    """The real dependencies from settings (models load here, once per process)."""
    from worldmm.blobs import build_blob_store
    from worldmm.embed import build_embedder
    from worldmm.encoder import build_visual_encoder
    from worldmm.graph.cache import make_cache
    from worldmm.llm.roles import build_roles
    from worldmm.store.db import Database

    if not settings.database_url:
        raise ValueError("WORLDMM_DATABASE_URL is not set (run `worldmm up` or point it at PG)")
    embedder = build_embedder(settings)
    transcriber = None
    if settings.asr_backend != "none":
        from worldmm.asr import build_transcriber

        transcriber = build_transcriber(settings)
    return IngestDeps(
        settings=settings,
        db=Database(settings.database_url, max_size=pool_size(settings.llm_concurrency)),
        roles=build_roles(settings, embedder),
        embedder=embedder,
        transcriber=transcriber,
        encoder=build_visual_encoder(settings),
        blobs=build_blob_store(settings),
        cache=make_cache(settings.redis_url),
    )
