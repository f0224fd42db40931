"""The moment a search reads its question at, and on whose clock.

A question with ``as_of`` is read at that time; a live one (no ``as_of``) at the injected
clock's now (``Deps.clock``), and it sees only the memory that existed then, exactly as with
``as_of``: nothing in memory can come from the future. The zone is the caller's (resolved
once per question) or the user's profile zone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol
from zoneinfo import ZoneInfo

from worldmm.localtime import Asked, in_zone

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.memory.retrieval.results import RetrievalResult


class Search(Protocol):
    """One memory's search: ``(deps, user_id, query, as_of=None, *, tz=None)``."""

    def __call__(
        self,
        deps: Deps,
        user_id: str,
        query: str,
        as_of: datetime | None = None,
        *,
        tz: ZoneInfo | None = None,
    ) -> Awaitable[RetrievalResult]: ...


async def question_time(
    deps: Deps, user_id: str, as_of: datetime | None = None, tz: ZoneInfo | None = None
) -> Asked:
    """``as_of`` or the clock's now, on ``tz`` (default: the user's zone, UTC when unset)."""
    at = as_of if as_of is not None else deps.clock()
    if tz is None:
        tz = await asyncio.to_thread(deps.reader.zone, user_id)
    return Asked(in_zone(at, UTC), tz)


def at_question_time(
    search: Callable[[Deps, str, str, Asked], Awaitable[RetrievalResult]],
) -> Search:
    """``search`` of a question read at :func:`question_time`, called as every search is."""

    async def searched(deps, user_id, query, as_of=None, *, tz=None):  # typed by Search
        return await search(deps, user_id, query, await question_time(deps, user_id, as_of, tz))

    searched.__doc__ = search.__doc__
    return searched
