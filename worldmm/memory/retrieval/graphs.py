"""Get a user's memory graph: from the cache, or rebuilt from the store (and cached).

A cached graph is used only while its ``fingerprint`` (count and highest id of its rows,
read before the rows) still matches the store: writers invalidate the key on a new triple,
and this check keeps the cache correct even when one does not. ``as_of`` queries bypass the
cache in both directions: the cached graph is the current one, and a graph of the past must
never be served as the present.

An episodic graph whose rows have only grown since it was built (same soft-delete count, and
exactly ``count`` more rows with ids above its highest) is extended with those rows instead
of rebuilt: during a live session the 30 s graph changes every 30 s, and rebuilding a week of
it took seconds. Any other change (a forget, a soft delete, rows committed out of id order)
rebuilds from scratch.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

import igraph as ig

from worldmm.graph.build import build_graph, extend_episodic_graph
from worldmm.graph.cache import GraphCache, NullCache, graph_fingerprint
from worldmm.graph.types import GraphMemoryType
from worldmm.memory.retrieval.deps import MemoryReader
from worldmm.store.triples import parse_fingerprint

log = logging.getLogger(__name__)


def load_graph(
    reader: MemoryReader,
    cache: GraphCache | NullCache,
    user_id: str,
    memory_type: GraphMemoryType,
    scale: int | None = None,
    as_of: datetime | None = None,
) -> ig.Graph:
    cacheable = as_of is None and not isinstance(cache, NullCache)
    token, fingerprint = b"", None
    if cacheable:
        fingerprint = reader.graph_fingerprint(user_id, memory_type, scale)
        read = cache.get(user_id, memory_type, scale, fingerprint=fingerprint)
        token = read.token
        if read.graph is not None:
            if graph_fingerprint(read.graph) == fingerprint:
                log.debug("retrieval.graph_cache_hit type=%s scale=%s", memory_type, scale)
                return read.graph
            log.info("retrieval.graph_cache_stale type=%s scale=%s", memory_type, scale)
        base = read.graph if read.graph is not None else read.base
        if memory_type == "episodic" and base is not None:
            grown = _extend(reader, user_id, scale, base, fingerprint)
            if grown is not None:
                cache.put(user_id, memory_type, scale, grown, token)
                return grown
    started = time.perf_counter()
    rows = reader.triples_for_graph(user_id, memory_type, scale=scale, as_of=as_of)
    graph = build_graph(memory_type, rows, as_of=as_of)
    stored = False
    if cacheable:
        graph["fingerprint"] = fingerprint
        stored = cache.put(user_id, memory_type, scale, graph, token)
    log.info(
        "retrieval.graph_built type=%s scale=%s triples=%d vertices=%d ms=%.1f cached=%s",
        memory_type,
        scale,
        len(rows),
        graph.vcount(),
        1000 * (time.perf_counter() - started),
        stored,
    )
    return graph


def _extend(
    reader: MemoryReader, user_id: str, scale: int | None, base: ig.Graph, fingerprint: str
) -> ig.Graph | None:
    """``base`` plus the rows appended since it was built, or None when the change is not
    a pure append (the caller then rebuilds)."""
    old, new = parse_fingerprint(graph_fingerprint(base)), parse_fingerprint(fingerprint)
    if old is None or new is None or new[2] != old[2] or new[0] <= old[0] or new[1] <= old[1]:
        return None
    started = time.perf_counter()
    rows = reader.triples_for_graph(user_id, "episodic", scale=scale, id_range=(old[1], new[1]))
    if len(rows) != new[0] - old[0]:
        return None  # a row below the old highest id arrived late, or one was deleted
    graph = extend_episodic_graph(base, rows)
    graph["fingerprint"] = fingerprint
    log.info(
        "retrieval.graph_extended type=episodic scale=%s triples=%d vertices=%d ms=%.1f",
        scale,
        len(rows),
        graph.vcount(),
        1000 * (time.perf_counter() - started),
    )
    return graph
