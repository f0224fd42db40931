"""Retrieval over the three memories (episodic, semantic, visual); see DESIGN.md §4.

Every search takes ``user_id`` explicitly, an optional ``as_of`` (the question's time; without
it, the injected clock's now), and an optional ``tz`` (the wearer's zone; without it, the
user's profile zone). A search reads its question's time words at that moment on that clock
(:mod:`question_time`) and sees only the memory that existed then.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from worldmm.llm.usage_ledger import for_user
from worldmm.memory.retrieval.episodic import search_episodic
from worldmm.memory.retrieval.question_time import Search
from worldmm.memory.retrieval.reader import ClipMatch, FrameRef, MemoryReader
from worldmm.memory.retrieval.results import (
    FrameHit,
    RetrievalResult,
    SegmentHit,
    TripleHit,
)
from worldmm.memory.retrieval.semantic import search_semantic
from worldmm.memory.retrieval.visual import search_visual
from worldmm.models import MemoryType

if TYPE_CHECKING:
    from worldmm.deps import Deps


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
    *,
    tz: ZoneInfo | None = None,
) -> RetrievalResult:
    """Search one memory of one user (model calls it makes are that user's usage)."""
    try:
        fn = SEARCHES[memory_type]
    except KeyError:
        raise ValueError(
            f"unknown memory type {memory_type!r}; expected one of {list(SEARCHES)}"
        ) from None
    with for_user(user_id):
        return await fn(deps, user_id, query, as_of, tz=tz)


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
    "search",
    "search_episodic",
    "search_semantic",
    "search_visual",
]
