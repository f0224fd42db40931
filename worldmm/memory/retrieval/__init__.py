"""Retrieval over the three memories (episodic, semantic, visual); see DESIGN.md §4.

Every search takes ``user_id`` explicitly and an optional ``as_of`` that limits it to memory
that existed at that time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime

from worldmm.memory.retrieval.deps import (
    ClipMatch,
    FrameRef,
    MemoryReader,
    RetrievalDeps,
    build_retrieval_deps,
)
from worldmm.memory.retrieval.episodic import search_episodic
from worldmm.memory.retrieval.results import (
    FrameHit,
    RetrievalResult,
    SegmentHit,
    TripleHit,
)
from worldmm.memory.retrieval.semantic import search_semantic
from worldmm.memory.retrieval.visual import parse_time_range, search_visual
from worldmm.models import MemoryType

Search = Callable[[RetrievalDeps, str, str, datetime | None], Awaitable[RetrievalResult]]

SEARCHES: dict[MemoryType, Search] = {
    "episodic": search_episodic,
    "semantic": search_semantic,
    "visual": search_visual,
}


async def search(
    deps: RetrievalDeps,
    memory_type: MemoryType,
    user_id: str,
    query: str,
    as_of: datetime | None = None,
) -> RetrievalResult:
    """Search one memory of one user."""
    try:
        fn = SEARCHES[memory_type]
    except KeyError:
        raise ValueError(
            f"unknown memory type {memory_type!r}; expected one of {list(SEARCHES)}"
        ) from None
    return await fn(deps, user_id, query, as_of)


__all__ = [
    "SEARCHES",
    "Search",
    "ClipMatch",
    "FrameHit",
    "FrameRef",
    "MemoryReader",
    "RetrievalDeps",
    "RetrievalResult",
    "SegmentHit",
    "TripleHit",
    "build_retrieval_deps",
    "parse_time_range",
    "search",
    "search_episodic",
    "search_semantic",
    "search_visual",
]
