"""Retrieval over the three memories (episodic, semantic, visual); see DESIGN.md §4.

Every search takes ``user_id`` explicitly and an optional ``as_of`` that limits it to memory
that existed at that time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING

from worldmm.llm.usage import for_user
from worldmm.memory.retrieval.episodic import search_episodic
from worldmm.memory.retrieval.reader import ClipMatch, FrameRef, MemoryReader
from worldmm.memory.retrieval.results import (
    FrameHit,
    RetrievalResult,
    SegmentHit,
    TripleHit,
)
from worldmm.memory.retrieval.semantic import search_semantic
from worldmm.memory.retrieval.visual import parse_time_range, search_visual
from worldmm.models import MemoryType

if TYPE_CHECKING:
    from worldmm.deps import Deps

Search = Callable[["Deps", str, str, datetime | None], Awaitable[RetrievalResult]]

SEARCHES: dict[MemoryType, Search] = {
    "episodic": search_episodic,
    "semantic": search_semantic,
    "visual": search_visual,
}


async def search(
    deps: Deps,
    memory_type: MemoryType,
    user_id: str,
    query: str,
    as_of: datetime | None = None,
) -> RetrievalResult:
    """Search one memory of one user (model calls it makes are that user's usage)."""
    try:
        fn = SEARCHES[memory_type]
    except KeyError:
        raise ValueError(
            f"unknown memory type {memory_type!r}; expected one of {list(SEARCHES)}"
        ) from None
    with for_user(user_id):
        return await fn(deps, user_id, query, as_of)


__all__ = [
    "SEARCHES",
    "Search",
    "ClipMatch",
    "FrameHit",
    "FrameRef",
    "MemoryReader",
    "RetrievalResult",
    "SegmentHit",
    "TripleHit",
    "parse_time_range",
    "search",
    "search_episodic",
    "search_semantic",
    "search_visual",
]
