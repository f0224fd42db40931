"""Per-user graph cache in Redis, the process-local memo in front of it, and the no-op cache
used when no Redis is configured.

Keys: ``worldmm:graph:{user_id}:semantic`` and ``worldmm:graph:{user_id}:episodic:{scale}``,
each holding one time-masked graph (:mod:`worldmm.graph.timed`) as numpy buffers
(:func:`dumps_timed`). Writers of triples never touch the cache: every graph carries the
``fingerprint`` of the rows it was built from, and a reader compares it with the store's
before using it, extending or rebuilding a stale one
(:func:`worldmm.memory.retrieval.graph_lanes.load_timed`).

Race-free writes: ``get`` returns a token (what the key held: b"" when absent, else the
first bytes of the value), and ``put`` stores a graph only while the key still holds that
token (WATCH/MULTI compare-and-set), so of two readers that rebuilt at once only one writes,
and nothing newer is overwritten. A purge overwrites the user's keys with a short tombstone
(``TOMBSTONE`` + random nonce) instead of deleting them, so a rebuild that started before
it cannot store the purged memory afterwards. Every key has a TTL as a backstop.

Redis failures never reach the user: reads and writes log ``graph_cache.error`` and behave
as a miss (the caller builds from the database).

In front of Redis sits a process-local memo (:class:`GraphMemo`): the graphs this process
used last, each served only while its fingerprint equals the one the caller just read from
the database, so it is never staler than the database. It saves the Redis transfer and the
load, and keeps each graph's per-object arrays (degrees, igraph forms); a stale entry stays
as the base a reader extends with the rows added since.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
from collections import OrderedDict
from typing import NamedTuple, Protocol
from urllib.parse import quote

import numpy as np
import redis

from worldmm.graph.timed import Csr, TimedGraph
from worldmm.models import SCALES

log = logging.getLogger(__name__)

KEY_PREFIX = "worldmm:graph"
TOMBSTONE = b"TOMB"
DEFAULT_TTL_S = 6 * 3600
# vertices + units (a week's 30 s time-masked graph is about 0.9M, four weeks 3.6M)
DEFAULT_MEMO_ELEMENTS = 8_000_000
_PROBE_BYTES = 64  # enough to tell two values apart, never a whole graph


def _escape(user_id: str) -> str:
    """Percent-escape everything but plain id characters: keys are colon-separated and purge
    scans by glob pattern, so ':' '*' '?' '[' must never appear raw (and the map is 1:1)."""
    return quote(user_id, safe="@.-_~")


def user_key_prefix(user_id: str) -> str:
    """What every cache key of the user starts with (and no other user's key does)."""
    if not user_id:
        raise ValueError("empty user id")
    return f"{KEY_PREFIX}:{_escape(user_id)}:"


def cache_key(user_id: str, memory_type: str, scale: int | None = None) -> str:
    if not user_id:
        raise ValueError("empty user id")
    key = f"{KEY_PREFIX}:{_escape(user_id)}:{memory_type}"
    return key if scale is None else f"{key}:{scale}"


# --- a graph as bytes ----------------------------------------------------------------------
# Bytes of a TimedGraph for the Redis cache: numpy buffers.
#
# A cold process loads a graph with one ``frombuffer`` per column, CSR included, instead of
# re-walking rows into Python objects (an earlier JSON format took most of a second per week).
# Code-free: never pickle, so bytes read back from a shared cache can never run code. Layout:
# ``TIMED_MAGIC`` + 8 random bytes (payloads never share a prefix: the cache compares
# prefixes) + a 4-byte header length + the header (JSON: sizes, fingerprint, the string
# columns) + the raw arrays in ``_ARRAYS`` order, little-endian.
TIMED_MAGIC = b"WMT2"  # 2: CSR rows sorted by time (a WMT1 payload is not read)
_NONCE_BYTES = 8
# (attribute, dtype, length: "n" vertices, "u" units, "n1" vertices + 1, "c" CSR entries)
_ARRAYS = (
    ("kind", "<i1", "n"),
    ("segment_id", "<i8", "n"),
    ("v_from", "<i8", "n"),
    ("src", "<i4", "u"),
    ("dst", "<i4", "u"),
    ("ukind", "<i1", "u"),
    ("weight", "<f8", "u"),
    ("t_from", "<i8", "u"),
    ("t_to", "<i8", "u"),
    ("triple_id", "<i8", "u"),
    ("indptr", "<i8", "n1"),
    ("unit", "<i8", "c"),
)


class TimedFormatError(ValueError):
    """Bytes are not a graph written by :func:`dumps_timed` (wrong magic, corrupt, short)."""


def dumps_timed(graph: TimedGraph) -> bytes:
    assert graph.csr is not None
    header = {
        "memory_type": graph.memory_type,
        "fingerprint": graph.fingerprint,
        "n": graph.n,
        "u": graph.units,
        "c": len(graph.csr.unit),
        "sealed": graph.sealed,
        "seal_every": graph.seal_every,
        "names": graph.names,
        "label": graph.label,
        "predicate": graph.predicate,
    }
    head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    parts = [TIMED_MAGIC, os.urandom(_NONCE_BYTES), struct.pack("<I", len(head)), head]
    columns = {"indptr": graph.csr.indptr, "unit": graph.csr.unit}
    for attr, dtype, _ in _ARRAYS:
        value = columns[attr] if attr in columns else getattr(graph, attr)
        parts.append(np.ascontiguousarray(value, dtype=dtype).tobytes())
    return b"".join(parts)


def loads_timed(data: bytes) -> TimedGraph:
    if not data.startswith(TIMED_MAGIC):
        raise TimedFormatError("not a worldmm time-masked graph (bad magic)")
    try:
        at = len(TIMED_MAGIC) + _NONCE_BYTES
        (head_len,) = struct.unpack_from("<I", data, at)
        at += 4
        header = json.loads(data[at : at + head_len])
        at += head_len
        sizes = {"n": header["n"], "u": header["u"], "n1": header["n"] + 1, "c": header["c"]}
        cols: dict[str, np.ndarray] = {}
        for attr, dtype, length in _ARRAYS:
            count = int(sizes[length])
            cols[attr] = np.frombuffer(data, dtype=dtype, count=count, offset=at)
            at += cols[attr].nbytes
        if at != len(data):
            raise TimedFormatError(f"{len(data) - at} trailing bytes")
        csr = Csr(indptr=cols.pop("indptr"), unit=cols.pop("unit"))
        return TimedGraph(
            memory_type=header["memory_type"],
            names=header["names"],
            label=header["label"],
            predicate=header["predicate"],
            fingerprint=header["fingerprint"],
            seal_every=int(header["seal_every"]),
            csr=csr,
            sealed=int(header["sealed"]),
            **cols,
        )
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        if isinstance(exc, TimedFormatError):
            raise
        raise TimedFormatError(f"corrupt time-masked graph bytes: {exc}") from exc


# --- the caches ---------------------------------------------------------------------------
class CacheRead(NamedTuple):
    graph: TimedGraph | None  # None on a miss
    # What the key held (b"" = absent, a tombstone, or the prefix of the graph returned);
    # pass it back to ``put`` to replace exactly that state and nothing newer.
    token: bytes


class GraphMemo:
    """Least-recently-used graphs of this process, bounded by their vertices + units.

    Thread-safe (the query service reads graphs from worker threads). A graph larger than the
    whole budget is not kept; ``max_elements = 0`` turns the memo off.
    """

    def __init__(self, max_elements: int = DEFAULT_MEMO_ELEMENTS) -> None:
        self.max_elements = max_elements
        self._graphs: OrderedDict[str, tuple[str, TimedGraph, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: str, fingerprint: str) -> TimedGraph | None:
        with self._lock:
            found = self._graphs.get(key)
            if found is None or found[0] != fingerprint:
                return None
            self._graphs.move_to_end(key)
            return found[1]

    def latest(self, key: str) -> TimedGraph | None:
        """The key's graph whatever its fingerprint (it carries its own)."""
        with self._lock:
            found = self._graphs.get(key)
            return None if found is None else found[1]

    def put(self, key: str, graph: TimedGraph) -> None:
        """Keep ``graph``; one without a fingerprint cannot be checked, so it is not kept
        (and the key's older graph goes too)."""
        fingerprint, size = graph.fingerprint, graph.size
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

    def drop_user(self, user_id: str) -> int:
        """Drop every graph of one user (a forget or a purge: the memo must not keep the
        forgotten rows in memory); returns how many there were."""
        prefix = user_key_prefix(user_id)
        with self._lock:
            keys = [k for k in self._graphs if k.startswith(prefix)]
            for key in keys:
                self._pop(key)
        return len(keys)

    def __len__(self) -> int:
        return len(self._graphs)

    def _pop(self, key: str) -> None:
        found = self._graphs.pop(key, None)
        if found is not None:
            self._size -= found[2]


class GraphCacheLike(Protocol):
    def get(self, user_id: str, memory_type: str, scale: int | None = None) -> CacheRead: ...

    def put(
        self, user_id: str, memory_type: str, scale: int | None, graph: TimedGraph, token: bytes
    ) -> bool: ...

    def purge_user(self, user_id: str) -> int: ...


class NullCache:
    """No Redis configured: every read misses, so graphs are built from the database."""

    def get(self, user_id: str, memory_type: str, scale: int | None = None) -> CacheRead:
        return CacheRead(None, b"")

    def put(
        self, user_id: str, memory_type: str, scale: int | None, graph: TimedGraph, token: bytes
    ) -> bool:
        return False

    def purge_user(self, user_id: str) -> int:
        return 0


class GraphCache:
    """Redis-backed graph cache (redis-py, synchronous, short timeouts)."""

    def __init__(self, client: redis.Redis, ttl_s: int = DEFAULT_TTL_S) -> None:
        self._redis = client
        self._ttl_s = ttl_s

    @classmethod
    def from_url(cls, url: str, ttl_s: int = DEFAULT_TTL_S, timeout_s: float = 1.0) -> GraphCache:
        return cls(redis_client(url, timeout_s), ttl_s)

    def close(self) -> None:
        self._redis.close()

    def get(self, user_id: str, memory_type: str, scale: int | None = None) -> CacheRead:
        """The stored graph (no memo here: the caller keeps its own) and the token to pass
        back to :meth:`put`. A corrupt or foreign value is a miss."""
        key = cache_key(user_id, memory_type, scale)
        try:
            data = self._redis.get(key)
        except redis.RedisError as exc:
            log.warning("graph_cache.error op=get key=%s error=%s", key, exc)
            return CacheRead(None, _UNKNOWN)
        if data is None:
            return CacheRead(None, b"")
        token = bytes(data[:_PROBE_BYTES])
        if data.startswith(TIMED_MAGIC):
            try:
                return CacheRead(loads_timed(data), token)
            except ValueError as exc:
                log.warning("graph_cache.corrupt key=%s error=%s", key, exc)
        return CacheRead(None, token)

    def put(
        self, user_id: str, memory_type: str, scale: int | None, graph: TimedGraph, token: bytes
    ) -> bool:
        """Store ``graph`` if the key still holds ``token``; True when stored."""
        if token == _UNKNOWN:
            return False
        key = cache_key(user_id, memory_type, scale)
        try:
            with self._redis.pipeline(transaction=True) as pipe:
                pipe.watch(key)
                current = pipe.getrange(key, 0, _PROBE_BYTES - 1) or b""
                if current != token:
                    return False  # purged or filled by another reader meanwhile
                pipe.multi()
                pipe.set(key, dumps_timed(graph), ex=self._ttl_s)
                pipe.execute()
            return True
        except redis.WatchError:
            return False
        except redis.RedisError as exc:
            log.warning("graph_cache.error op=put key=%s error=%s", key, exc)
            return False

    def purge_user(self, user_id: str) -> int:
        """Forget every graph of one user; returns how many of its keys existed.

        Known keys are tombstoned (not deleted) so a rebuild that started before the purge
        cannot store the purged memory afterwards; other keys of the user are deleted.
        """
        pattern = user_key_prefix(user_id) + "*"
        known = [cache_key(user_id, "semantic")]
        known += [cache_key(user_id, "episodic", s) for s in SCALES]
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
    so every question (graphs come from PostgreSQL then)."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 1),
    )


def make_cache(redis_url: str | None, ttl_s: int = DEFAULT_TTL_S) -> GraphCache | NullCache:
    """GraphCache for a URL; NullCache when unset or ``'none'``."""
    if not redis_url or redis_url.strip().lower() == "none":
        return NullCache()
    return GraphCache.from_url(redis_url, ttl_s=ttl_s)
