"""Get a user's memory graph: from the cache, or rebuilt from the store (and cached).

``as_of`` queries bypass the cache in both directions: the cached graph is the current one,
and a graph of the past must never be served as the present.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

import igraph as ig

from worldmm.graph.build import build_graph
from worldmm.graph.cache import GraphCache, NullCache
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
    token = b""
    if as_of is None:
        read = cache.get(user_id, memory_type, scale)
        if read.graph is not None:
            log.debug("retrieval.graph_cache_hit type=%s scale=%s", memory_type, scale)
            return read.graph
        token = read.token
    started = time.perf_counter()
    rows = reader.triples_for_graph(user_id, memory_type, scale=scale, as_of=as_of)
    graph = build_graph(memory_type, rows, as_of=as_of)
    stored = as_of is None and cache.put(user_id, memory_type, scale, graph, token)
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
