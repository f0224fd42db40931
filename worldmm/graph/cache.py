"""Per-user graph cache in Redis, and the no-op cache used when no Redis is configured.

Keys: ``worldmm:graph:{user_id}:{memory_type}`` (semantic) and
``worldmm:graph:{user_id}:{memory_type}:{scale}`` (episodic, one per scale).

Cached graphs also carry the ``fingerprint`` of the rows they were built from, so a reader
can tell a stale graph even when a writer forgot to invalidate (see retrieval.graphs), and
replace it by passing the hit's token to ``put``.

Race-free invalidation: ``invalidate`` overwrites exactly one key with a short tombstone
(``TOMB`` + random nonce) instead of deleting it. A reader remembers what it saw (the
tombstone, or "absent") before rebuilding from the database and stores its graph only if the
key still holds that same value (WATCH/MULTI compare-and-set). A triple written while the
reader was building therefore changes the tombstone and the reader's now-stale graph is
dropped instead of being cached until the next write. Every key has a TTL as a backstop.

Redis failures never reach the user: reads and writes log ``graph_cache.error`` and behave
as a miss (the caller rebuilds from the database).

In front of Redis sits a process-local memo (:class:`GraphMemo`): the graphs this process
used last, each with the fingerprint it was built from. A read that passes the fingerprint
it just took from the database is served from the memo when they are equal, so the memo is
never staler than the database; it saves the Redis transfer and the deserialisation (about
0.5 s per query on a week of memory) and keeps each graph's look-up index
(:mod:`worldmm.graph.index`). Invalidation retires the memo's graph of that key: never served
again, it stays as the base a reader extends with the rows added since
(:mod:`worldmm.memory.retrieval.graphs`). A purge drops the user's graphs.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import igraph as ig
import redis

from worldmm.graph.serialize import MAGIC, GraphFormatError, dumps, loads
from worldmm.graph.timed import TimedGraph
from worldmm.graph.timed_io import TIMED_MAGIC, dumps_timed, loads_timed
from worldmm.models import SCALES

log = logging.getLogger(__name__)

KEY_PREFIX = "worldmm:graph"
TOMBSTONE = b"TOMB"
DEFAULT_TTL_S = 6 * 3600
# vertices + edges (or units: a week's 30 s time-masked graph is about 0.9M, four weeks 3.6M)
DEFAULT_MEMO_ELEMENTS = 8_000_000
_PROBE_BYTES = 64  # enough to read a tombstone back, never a whole graph


def _escape(user_id: str) -> str:
    """Percent-escape everything but plain id characters: keys are colon-separated and purge
    scans by glob pattern, so ':' '*' '?' '[' must never appear raw (and the map is 1:1)."""
    return quote(user_id, safe="@.-_~")


def cache_key(user_id: str, memory_type: str, scale: int | None = None) -> str:
    if not user_id:
        raise ValueError("empty user id")
    key = f"{KEY_PREFIX}:{_escape(user_id)}:{memory_type}"
    return key if scale is None else f"{key}:{scale}"


@dataclass(frozen=True)
class CacheRead:
    graph: ig.Graph | None  # None on a miss
    # What the key held (b"" = absent, a tombstone, or the prefix of the graph returned);
    # pass it back to ``put`` to replace exactly that state and nothing newer.
    token: bytes
    source: str = ""  # "memo" or "redis" on a hit
    # On a miss: this process's last graph of the key, built from older rows (or None). A
    # reader may extend it with the rows added since instead of rebuilding from scratch.
    base: ig.Graph | None = None


def graph_fingerprint(graph: ig.Graph | TimedGraph) -> str | None:
    if isinstance(graph, TimedGraph):
        return graph.fingerprint
    return graph["fingerprint"] if "fingerprint" in graph.attributes() else None


def graph_size(graph: ig.Graph | TimedGraph) -> int:
    """Vertices + edges (a time-masked graph: + units), what the memo budgets."""
    if isinstance(graph, TimedGraph):
        return graph.size
    return graph.vcount() + graph.ecount()


def timed_key(key: str) -> str:
    """The key of the time-masked graph (:mod:`worldmm.graph.timed`) next to ``key``'s
    igraph graph. Writers do not tombstone it: a reader checks its fingerprint and extends
    it with the rows appended since, so an older copy is still a good start; a purge
    tombstones it and a forget deletes it with the user's other keys."""
    return f"{key}:t"


class GraphMemo:
    """Least-recently-used graphs of this process, bounded by their vertices + edges.

    Thread-safe (the query service reads graphs from worker threads). A graph larger than the
    whole budget is not kept; ``max_elements = 0`` turns the memo off.
    """

    def __init__(self, max_elements: int = DEFAULT_MEMO_ELEMENTS) -> None:
        self.max_elements = max_elements
        self._graphs: OrderedDict[str, tuple[str, Any, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: str, fingerprint: str) -> Any:
        with self._lock:
            found = self._graphs.get(key)
            if found is None or found[0] != fingerprint:
                return None
            self._graphs.move_to_end(key)
            return found[1]

    def latest(self, key: str) -> Any:
        """The key's graph whatever its fingerprint (it carries its own)."""
        with self._lock:
            found = self._graphs.get(key)
            return None if found is None else found[1]

    def put(self, key: str, graph: ig.Graph | TimedGraph) -> None:
        fingerprint = graph_fingerprint(graph)
        size = graph_size(graph)
        if fingerprint is None or size > self.max_elements:
            self.drop(key)
            return
        with self._lock:
            self._pop(key)
            self._graphs[key] = (fingerprint, graph, size)
            self._size += size
            while self._size > self.max_elements:
                self._pop(next(iter(self._graphs)))

    def drop(self, key: str) -> None:
        with self._lock:
            self._pop(key)

    def retire(self, key: str) -> None:
        """Never serve the key's graph again, but keep it as a base to extend (:meth:`latest`)."""
        with self._lock:
            found = self._graphs.get(key)
            if found is not None:
                self._graphs[key] = ("", found[1], found[2])

    def drop_prefix(self, prefix: str) -> None:
        with self._lock:
            for key in [k for k in self._graphs if k.startswith(prefix)]:
                self._pop(key)

    def __len__(self) -> int:
        return len(self._graphs)

    def _pop(self, key: str) -> None:
        found = self._graphs.pop(key, None)
        if found is not None:
            self._size -= found[2]


class GraphCacheLike(Protocol):
    def get(
        self,
        user_id: str,
        memory_type: str,
        scale: int | None = None,
        fingerprint: str | None = None,
    ) -> CacheRead: ...

    def put(
        self, user_id: str, memory_type: str, scale: int | None, graph: ig.Graph, token: bytes
    ) -> bool: ...

    def invalidate(self, user_id: str, memory_type: str, scale: int | None = None) -> bool: ...

    def purge_user(self, user_id: str) -> int: ...


class NullCache:
    """No Redis configured: every read misses, so graphs are rebuilt from the database."""

    def get(
        self,
        user_id: str,
        memory_type: str,
        scale: int | None = None,
        fingerprint: str | None = None,
    ) -> CacheRead:
        return CacheRead(None, b"")

    def put(
        self, user_id: str, memory_type: str, scale: int | None, graph: ig.Graph, token: bytes
    ) -> bool:
        return False

    def invalidate(self, user_id: str, memory_type: str, scale: int | None = None) -> bool:
        return True

    def purge_user(self, user_id: str) -> int:
        return 0

    def get_timed(
        self, user_id: str, memory_type: str, scale: int | None = None
    ) -> tuple[TimedGraph | None, bytes]:
        return None, b""

    def put_timed(
        self, user_id: str, memory_type: str, scale: int | None, graph: TimedGraph, token: bytes
    ) -> bool:
        return False


class GraphCache:
    """Redis-backed graph cache (redis-py, synchronous, short timeouts)."""

    def __init__(
        self,
        client: redis.Redis,
        ttl_s: int = DEFAULT_TTL_S,
        memo_elements: int = DEFAULT_MEMO_ELEMENTS,
    ) -> None:
        self._redis = client
        self._ttl_s = ttl_s
        self.memo = GraphMemo(memo_elements)

    @classmethod
    def from_url(
        cls,
        url: str,
        ttl_s: int = DEFAULT_TTL_S,
        timeout_s: float = 1.0,
        memo_elements: int = DEFAULT_MEMO_ELEMENTS,
    ) -> GraphCache:
        return cls(redis_client(url, timeout_s), ttl_s, memo_elements)

    def close(self) -> None:
        self._redis.close()

    def get(
        self,
        user_id: str,
        memory_type: str,
        scale: int | None = None,
        fingerprint: str | None = None,
    ) -> CacheRead:
        """The cached graph. With the caller's current ``fingerprint``, an equal graph of the
        memo is served without asking Redis (its token lets no ``put`` through)."""
        key = cache_key(user_id, memory_type, scale)
        base = None
        if fingerprint is not None:
            graph = self.memo.get(key, fingerprint)
            if graph is not None:
                return CacheRead(graph, _UNKNOWN, "memo")
            base = self.memo.latest(key)
        try:
            data = self._redis.get(key)
        except redis.RedisError as exc:
            log.warning("graph_cache.error op=get key=%s error=%s", key, exc)
            return CacheRead(None, _UNKNOWN, base=base)
        if data is None:
            return CacheRead(None, b"", base=base)
        if data.startswith(MAGIC):
            try:
                graph = loads(data)
            except GraphFormatError as exc:
                log.warning("graph_cache.corrupt key=%s error=%s", key, exc)
                return CacheRead(None, _UNKNOWN, base=base)
            if fingerprint is not None and graph_fingerprint(graph) == fingerprint:
                self.memo.put(key, graph)
            return CacheRead(graph, bytes(data[:_PROBE_BYTES]), "redis")
        return CacheRead(None, bytes(data[:_PROBE_BYTES]), base=base)

    def put(
        self, user_id: str, memory_type: str, scale: int | None, graph: ig.Graph, token: bytes
    ) -> bool:
        """Store ``graph`` if the key still holds ``token``; True when stored."""
        if token == _UNKNOWN:
            return False
        key = cache_key(user_id, memory_type, scale)
        if not self._put_if(key, dumps(graph), token):
            return False
        self.memo.put(key, graph)
        return True

    def get_timed(
        self, user_id: str, memory_type: str, scale: int | None = None
    ) -> tuple[TimedGraph | None, bytes]:
        """The time-masked graph stored in Redis (no memo here: the caller keeps its own)
        and the token to pass back to :meth:`put_timed`."""
        key = timed_key(cache_key(user_id, memory_type, scale))
        try:
            data = self._redis.get(key)
        except redis.RedisError as exc:
            log.warning("graph_cache.error op=get key=%s error=%s", key, exc)
            return None, _UNKNOWN
        if data is None:
            return None, b""
        token = bytes(data[:_PROBE_BYTES])
        if data.startswith(TIMED_MAGIC):
            try:
                return loads_timed(data), token
            except ValueError as exc:
                log.warning("graph_cache.corrupt key=%s error=%s", key, exc)
        return None, token

    def put_timed(
        self, user_id: str, memory_type: str, scale: int | None, graph: TimedGraph, token: bytes
    ) -> bool:
        """Store a time-masked graph if its key still holds ``token``."""
        if token == _UNKNOWN:
            return False
        return self._put_if(
            timed_key(cache_key(user_id, memory_type, scale)), dumps_timed(graph), token
        )

    def _put_if(self, key: str, payload: bytes, token: bytes) -> bool:
        """SET ``key`` to ``payload`` only while it still holds ``token`` (compare-and-set)."""
        try:
            with self._redis.pipeline(transaction=True) as pipe:
                pipe.watch(key)
                current = pipe.getrange(key, 0, _PROBE_BYTES - 1) or b""
                if current != token:
                    return False  # invalidated (or filled) while we were building
                pipe.multi()
                pipe.set(key, payload, ex=self._ttl_s)
                pipe.execute()
            return True
        except redis.WatchError:
            return False
        except redis.RedisError as exc:
            log.warning("graph_cache.error op=put key=%s error=%s", key, exc)
            return False

    def invalidate(self, user_id: str, memory_type: str, scale: int | None = None) -> bool:
        """Replace exactly this one key with a fresh tombstone; False if Redis failed."""
        key = cache_key(user_id, memory_type, scale)
        self.memo.retire(key)
        try:
            self._redis.set(key, TOMBSTONE + os.urandom(8).hex().encode(), ex=self._ttl_s)
            return True
        except redis.RedisError as exc:
            log.error("graph_cache.error op=invalidate key=%s error=%s", key, exc)
            return False

    def purge_user(self, user_id: str) -> int:
        """Forget every graph of one user; returns how many of its keys existed.

        Known keys are tombstoned (not deleted) so a rebuild that started before the purge
        cannot store the purged memory afterwards; other keys of the user are deleted.
        """
        pattern = f"{KEY_PREFIX}:{_escape(user_id)}:*"
        self.memo.drop_prefix(pattern[:-1])
        known = [cache_key(user_id, "semantic")]
        known += [cache_key(user_id, "episodic", s) for s in SCALES]
        known += [timed_key(k) for k in known]
        try:
            found = {k.decode() for k in self._redis.scan_iter(match=pattern, count=500)}
            with self._redis.pipeline(transaction=True) as pipe:
                for key in known:
                    pipe.set(key, TOMBSTONE + os.urandom(8).hex().encode(), ex=self._ttl_s)
                extra = sorted(found - set(known))
                if extra:
                    pipe.delete(*extra)
                pipe.execute()
            return len(found)
        except redis.RedisError as exc:
            log.error("graph_cache.error op=purge key=%s error=%s", pattern, exc)
            return 0


# Token of a read that failed: ``put`` must not write after it (the key's state is unknown).
_UNKNOWN = b"\x00unknown"


def redis_client(url: str, timeout_s: float = 1.0) -> redis.Redis:
    """A client that fails fast when Redis is down: one immediate retry (a pooled
    connection gone stale across a Redis restart), not redis-py's default of 10 retries
    with backoff, which stalled each cache call for many seconds while Redis was away and
    so every question (graphs come from PostgreSQL then) and every ingest window."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1),
    )


def make_cache(
    redis_url: str | None,
    ttl_s: int = DEFAULT_TTL_S,
    memo_elements: int = DEFAULT_MEMO_ELEMENTS,
) -> GraphCache | NullCache:
    """GraphCache for a URL; NullCache when unset or ``'none'``."""
    if not redis_url or redis_url.strip().lower() == "none":
        return NullCache()
    return GraphCache.from_url(redis_url, ttl_s=ttl_s, memo_elements=memo_elements)
