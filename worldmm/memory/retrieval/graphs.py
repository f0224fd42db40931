"""Get a user's memory graph: from the cache, or rebuilt from the store (and cached).

A cached graph is used only while its ``fingerprint`` (count and highest id of its rows,
read before the rows) still matches the store: writers invalidate the key on a new triple,
and this check keeps the cache correct even when one does not. ``as_of`` queries bypass the
cache in both directions: the cached graph is the current one, and a graph of the past must
never be served as the present.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

import igraph as ig

from worldmm.graph.build import build_graph
from worldmm.graph.cache import GraphCache, NullCache, graph_fingerprint
from worldmm.graph.types import GraphMemoryType
from worldmm.memory.retrieval.deps import MemoryReader

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
