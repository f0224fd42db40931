"""The one dependency bundle: what memory construction, retrieval, the agent, the query API
and the benchmarks need, built in one place (:func:`build_deps`).

PostgreSQL and Redis come from settings alone (``WORLDMM_DATABASE_URL``,
``WORLDMM_REDIS_URL``): the programs that run beside the embedded dev stack fill them in
before they build a bundle. Tests build a :class:`Deps` with fakes for its parts
(scripted roles, a hash embedder) over the real embedded PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from worldmm.graph.cache import GraphMemo, NullCache
from worldmm.llm.usage_ledger import NullUsage
from worldmm.localtime import utc_now

if TYPE_CHECKING:
    import redis

    from worldmm.asr.base import Transcriber
    from worldmm.blobs import BlobStore
    from worldmm.embed.base import TextEmbedder
    from worldmm.encoder.base import VisualEncoder
    from worldmm.graph.cache import GraphCacheLike
    from worldmm.llm.roles import ModelRoles
    from worldmm.llm.usage_ledger import UsageLedger
    from worldmm.media.spool import WindowSpool
    from worldmm.memory.carried_captions import RecentWindows
    from worldmm.memory.retrieval.frequencies import EntityWindowsMemo, TermStatsMemo
    from worldmm.memory.retrieval.reader import MemoryReader
    from worldmm.privacy.blur_policy import FaceBlur
    from worldmm.settings import Settings
    from worldmm.store.db import Database

Role = Literal["ingest", "api"]


@dataclass
class Deps:
    """Everything a part needs; built by :func:`build_deps`, or by a test with fakes."""

    settings: Settings
    db: Database
    roles: ModelRoles
    embedder: TextEmbedder
    encoder: VisualEncoder | None  # None: no visual encoder (visual search says so)
    blobs: BlobStore
    transcriber: Transcriber | None = None  # ingest only; None: audio is not transcribed
    # Bystander face blurring before frames are stored (ingest only; None: off).
    faces: FaceBlur | None = None
    # Retrieval's cache of time-masked graphs (writers never touch it: a graph carries the
    # fingerprint of its rows); NullCache without Redis.
    cache: GraphCacheLike = field(default_factory=NullCache)
    redis: redis.Redis | None = None  # readiness ping, shared rate limits, purge sweep
    # This process's time-masked graphs, in front of Redis and used without it too; None:
    # one sized by ``settings.graph_memo_elements``. Copies (:meth:`with_settings`) share it.
    graphs: GraphMemo = None  # type: ignore[assignment]
    # This process's per-user document frequencies, what the lexical and entity lanes weigh
    # by (read through :attr:`reader`); None: new ones. Copies share them, as ``graphs``.
    term_stats: TermStatsMemo = None  # type: ignore[assignment]
    entity_windows: EntityWindowsMemo = None  # type: ignore[assignment]
    # Each wearer's latest 30 s windows built here, for a still, silent window to take the
    # caption of the one before (worldmm.memory.carried_captions); None: a new one.
    recent_windows: RecentWindows = None  # type: ignore[assignment]
    # Model usage per user (batched into llm_usage) and the daily token budget; NullUsage:
    # Prometheus only, no budget.
    usage: UsageLedger | NullUsage = field(default_factory=NullUsage)
    # "Now" for every part that reads the time a person means (a live question, a note
    # without a time, the browser's today): the one clock, set by tests and benchmarks.
    clock: Callable[[], datetime] = utc_now

    def __post_init__(self) -> None:
        from worldmm.memory.retrieval.frequencies import EntityWindowsMemo, TermStatsMemo

        if self.graphs is None:
            self.graphs = GraphMemo(self.settings.graph_memo_elements)
        if self.term_stats is None:
            self.term_stats = TermStatsMemo()
        if self.entity_windows is None:
            self.entity_windows = EntityWindowsMemo()
        if self.recent_windows is None:
            from worldmm.memory.carried_captions import RecentWindows

            self.recent_windows = RecentWindows()

    @cached_property
    def reader(self) -> MemoryReader:
        """Retrieval's one door to this database, with this bundle's document frequencies."""
        from worldmm.memory.retrieval.reader import MemoryReader

        return MemoryReader(self.db, self.term_stats, self.entity_windows)

    @cached_property
    def spool(self) -> WindowSpool:
        """Captures of windows whose container is not stored yet (``media_spool_dir``)."""
        from worldmm.media.spool import WindowSpool

        return WindowSpool(self.settings.resolved_spool_dir)

    def with_settings(self, **update: Any) -> Deps:
        """The same services, pool and memo under other settings (one request's rounds, a
        benchmark's variant)."""
        return replace(self, settings=self.settings.model_copy(update=update))

    def with_clock(self, clock: Callable[[], datetime]) -> Deps:
        """The same services under another clock (a benchmark asking at each question's
        time as if live)."""
        return replace(self, clock=clock)

    def close(self) -> None:
        """Write the buffered usage, then close the pool and the Redis connections (the
        models need no closing)."""
        self.usage.close()
        self.db.close()
        for part in (self.cache, self.redis):
            close = getattr(part, "close", None)
            if close is not None:
                close()


# The query API's connections: a search runs its lanes at once, each on its own connection.
API_POOL_SIZE = 8


def pool_size(concurrency: int) -> int:
    """Database connections for ``concurrency`` windows in flight: a window holds one only
    for its short store calls (never across a model call), and PostgreSQL allows 100
    connections by default, so the pool stops growing at 32."""
    return min(max(4, concurrency // 2), 32)


def _open_database(settings: Settings, role: Role) -> Database:
    from worldmm.settings import SettingsError
    from worldmm.store.db import Database

    url = settings.database_url
    if not url:
        raise SettingsError(
            "WORLDMM_DATABASE_URL is not set: point it at PostgreSQL with pgvector "
            "(or run `worldmm up` and start the service through the `worldmm` CLI)"
        )
    if role == "api":
        # a short pool wait: while PostgreSQL is down a request gets 503 + Retry-After
        # instead of hanging for the pool's default 30 s
        return Database(url, max_size=API_POOL_SIZE, timeout_s=5.0, name="worldmm-query")
    return Database(url, max_size=pool_size(settings.in_flight_start), name="worldmm-ingest")


def build_deps(
    settings: Settings,
    *,
    role: Role,
    roles: ModelRoles | None = None,
    embedder: TextEmbedder | None = None,
    encoder: VisualEncoder | None = None,
    transcriber: Transcriber | None = None,
) -> Deps:
    """The real dependencies (models load here, once per process). ``role`` sizes the pool
    (ingest: by the windows in flight; api: small, failing fast) and says whether audio is
    transcribed (ingest only); everything else is built alike for every role. A model part
    passed in (a benchmark's simulated models) is used as it is; the others are built from
    settings. Raises SettingsError when no database URL is set; the API without a Redis
    URL (or with 'none') builds its graphs from the database."""
    from worldmm.blobs import build_blob_store
    from worldmm.graph.cache import GraphCache, redis_client
    from worldmm.llm.usage_ledger import UsageLedger

    # Only retrieval reads the graph cache (ingest writes no graph: readers grow theirs by
    # fingerprint), so ingest needs no Redis.
    redis_set = (settings.redis_url or "none").strip().lower() != "none"
    cache_url = settings.redis_url if role == "api" and redis_set else None
    db = _open_database(settings, role)
    usage = UsageLedger(
        db, flush_s=settings.usage_flush_s, daily_budget=settings.llm_user_daily_token_budget
    )
    client = None
    try:
        cache: GraphCacheLike = NullCache()
        if cache_url:
            client = redis_client(cache_url, timeout_s=1.0)  # fails fast while Redis is down
            cache = GraphCache(client)
        if embedder is None:
            from worldmm.embed import build_embedder

            embedder = build_embedder(settings)
        if roles is None:
            from worldmm.llm.roles import build_roles

            roles = build_roles(settings, embedder, usage)
        if encoder is None:
            from worldmm.encoder import build_visual_encoder

            encoder = build_visual_encoder(settings)
        if transcriber is None and role == "ingest" and settings.asr_backend != "none":
            from worldmm.asr import build_transcriber

            transcriber = build_transcriber(settings)
        faces = None
        if role == "ingest":
            from worldmm.privacy.blur_policy import FaceBlur

            faces = FaceBlur.from_settings(settings, db)
        return Deps(
            settings=settings,
            db=db,
            roles=roles,
            embedder=embedder,
            encoder=encoder,
            blobs=build_blob_store(settings),
            transcriber=transcriber,
            faces=faces,
            cache=cache,
            redis=client,
            usage=usage,
        )
    except BaseException:
        if client is not None:
            client.close()
        db.close()
        raise
