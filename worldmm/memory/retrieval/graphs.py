"""Get a user's memory graph: from this process's memo, from Redis, or from the store.

One time-masked graph per user, type and scale (:mod:`worldmm.graph.timed`) serves "now"
and every ``as_of``: it holds every row with its time, and queries hide what did not exist.

A graph is used only while its ``fingerprint`` (row count, highest id and soft-delete count
of its rows, read before the rows) equals the store's, so a graph is never served stale and
writers need not tell the cache anything.

A graph whose rows have only grown since it was built (same soft-delete count, and exactly
``count`` more rows with ids above its highest) is extended with those rows instead of
rebuilt: during a live session the 30 s graph changes every 30 s, and rebuilding a week of
it took seconds. Any other change (a forget, a soft delete, rows committed out of id order)
rebuilds from scratch.
"""

from __future__ import annotations

import logging
import time

from worldmm.graph.cache import GraphCacheLike, GraphMemo, cache_key
from worldmm.graph.timed import TimedGraph, build_timed, extend
from worldmm.graph.types import GraphMemoryType
from worldmm.memory.retrieval.reader import MemoryReader
from worldmm.store.triples import parse_fingerprint

log = logging.getLogger(__name__)


def load_timed(
    reader: MemoryReader,
    cache: GraphCacheLike,
    memo: GraphMemo,
    user_id: str,
    memory_type: GraphMemoryType,
    scale: int | None = None,
) -> TimedGraph:
    """The user's time-masked graph (:mod:`worldmm.graph.timed`): every row with its time, so
    one graph answers "now" and any ``as_of``. From this process's memo when its fingerprint
    matches the store's; else from Redis (numpy buffers, when a cache is configured); else
    the newest graph at hand extended with the rows appended since; else built from the
    store. Keys carry the user id, so no user is ever served another's graph."""
    key = cache_key(user_id, memory_type, scale)
    fingerprint = reader.graph_fingerprint(user_id, memory_type, scale)
    found = memo.get(key, fingerprint)
    if found is not None:
        return found
    base = memo.latest(key)
    stored, token = cache.get(user_id, memory_type, scale)
    if stored is not None and stored.fingerprint == fingerprint:
        memo.put(key, stored)
        log.info(
            "retrieval.timed_graph source=redis type=%s scale=%s vertices=%d units=%d",
            memory_type,
            scale,
            stored.n,
            stored.units,
        )
        return stored
    if stored is not None and _top_id(stored) > _top_id(base):
        base = stored
    started = time.perf_counter()
    graph = _extend_timed(reader, user_id, memory_type, scale, base, fingerprint)
    how = "extended"
    if graph is None:
        graph, how = _build_timed(reader, user_id, memory_type, scale, fingerprint), "built"
    if graph.fingerprint is not None:
        memo.put(key, graph)
        # Redis gets a built graph, and a grown one only when its tail was just folded into
        # the CSR (a growth unit, a few hours of wear): rewriting a week's bytes for every
        # 30 s segment would cost more than the query. A process that starts cold loads the
        # last copy and extends it by at most one unit.
        if how == "built" or graph.sealed == graph.units:
            cache.put(user_id, memory_type, scale, graph, token)
    log.info(
        "retrieval.timed_graph source=%s type=%s scale=%s vertices=%d units=%d ms=%.1f",
        how,
        memory_type,
        scale,
        graph.n,
        graph.units,
        1000 * (time.perf_counter() - started),
    )
    return graph


def _top_id(graph: TimedGraph | None) -> int:
    parsed = parse_fingerprint(graph.fingerprint) if graph is not None else None
    return -1 if parsed is None else parsed[1]


def _build_timed(
    reader: MemoryReader,
    user_id: str,
    memory_type: GraphMemoryType,
    scale: int | None,
    fingerprint: str,
) -> TimedGraph:
    """Built from the rows the fingerprint counts (ids up to its highest): a row committed
    after the fingerprint was read is left for the next extension, never counted twice. When
    the rows do not match the count (a delete raced the read) the graph serves this query
    but carries no fingerprint, so it is never kept."""
    parsed = parse_fingerprint(fingerprint)
    id_range = None if parsed is None else (0, parsed[1])
    rows = reader.graph_history(user_id, memory_type, scale, id_range=id_range)
    graph = build_timed(memory_type, rows)
    if parsed is None or len(rows) == parsed[0]:
        graph.fingerprint = fingerprint
    return graph


def _extend_timed(
    reader: MemoryReader,
    user_id: str,
    memory_type: GraphMemoryType,
    scale: int | None,
    base: TimedGraph | None,
    fingerprint: str,
) -> TimedGraph | None:
    """``base`` plus the rows appended since it was built, or None when the change is not a
    pure append (a soft delete, a forget, a row committed below the old highest id)."""
    if base is None:
        return None
    old, new = parse_fingerprint(base.fingerprint), parse_fingerprint(fingerprint)
    if old is None or new is None or new[2] != old[2] or new[0] <= old[0] or new[1] <= old[1]:
        return None
    rows = reader.graph_history(user_id, memory_type, scale, id_range=(old[1], new[1]))
    if len(rows) != new[0] - old[0]:
        return None
    graph = extend(base, rows)
    graph.fingerprint = fingerprint
    return graph
