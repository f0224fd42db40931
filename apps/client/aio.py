"""The asyncio client: ``AsyncWorldMMClient(api_url, key, user_id=None)``, the same calls as
``WorldMMClient`` awaited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from apps.client.calls import Call, Calls
from apps.client.errors import ApiConnectionError
from apps.client.retry import API_CLIENT, RetryPolicy, asend_with_retry
from apps.client.wire import build_request, decode, redacted
from worldmm.models import MemoryType
from worldmm.wire.schemas import (
    CreateUserResponse,
    ForgetResponse,
    FramePage,
    Health,
    PurgeResponse,
    QueryResponse,
    Readiness,
    RememberResponse,
    SearchResponse,
    SegmentOut,
    SegmentPage,
    SemanticList,
    WhoAmI,
)

M = TypeVar("M", bound=BaseModel)
DEFAULT_TIMEOUT_S = 300.0  # a question runs up to five rounds of model calls


class AsyncWorldMMClient:
    """One user's memory over the query API. ``user_id`` may be left out: the first call that
    needs it asks the API whose key this is (``GET /v1/whoami``).

    >>> async with AsyncWorldMMClient("http://127.0.0.1:8080", key) as mm:  # doctest: +SKIP
    ...     print((await mm.query("Where did I leave my keys?")).answer)
    """

    def __init__(
        self,
        api_url: str,
        key: str,
        user_id: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not key:
            raise ValueError("an API key is needed")
        self.api_url = api_url.rstrip("/")
        self._key = key
        self._user_id = user_id
        self.retry = retry or API_CLIENT
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            base_url=self.api_url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout_s,
            transport=transport,
        )

    def __repr__(self) -> str:
        key = redacted(self._key)
        return f"AsyncWorldMMClient({self.api_url!r}, key={key}, user={self._user_id!r})"

    async def __aenter__(self) -> AsyncWorldMMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- sending --------------------------------------------------------------------------
    async def send(self, call: Call[Any]) -> Any:
        """Send one call, retrying 429/503 as the policy says; typed result or ApiError."""

        async def attempt() -> httpx.Response:
            try:
                return await self._http.send(build_request(self._http, call))
            except httpx.TransportError as exc:
                raise ApiConnectionError(f"cannot reach {self.api_url}: {exc}") from None

        return decode(call, await asend_with_retry(attempt, self.retry, self._sleep))

    async def resolve_user(self) -> str:
        """The user of the key (asked once)."""
        if self._user_id is None:
            me: WhoAmI = await self.send(Calls.whoami())
            if me.user_id is None:
                raise ValueError("the admin key acts for any user: pass user_id")
            self._user_id = me.user_id
        return self._user_id

    async def _calls(self) -> Calls:
        return Calls(await self.resolve_user())

    # --- the user's memory ---------------------------------------------------------------
    async def query(
        self,
        question: str,
        *,
        choices: list[str] | None = None,
        as_of: datetime | None = None,
        max_rounds: int | None = None,
    ) -> QueryResponse:
        call = (await self._calls()).query(
            question, choices=choices, as_of=as_of, max_rounds=max_rounds
        )
        return await self.send(call)

    async def search(
        self, memory_type: MemoryType, query: str, *, as_of: datetime | None = None
    ) -> SearchResponse:
        return await self.send((await self._calls()).search(memory_type, query, as_of=as_of))

    async def segments(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        scale: int | None = None,
        as_of: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> SegmentPage:
        """One page of the segments overlapping ``[start, end)``, oldest first."""
        call = (await self._calls()).segments(
            start=start, end=end, scale=scale, as_of=as_of, limit=limit, cursor=cursor
        )
        return await self.send(call)

    async def iter_segments(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        scale: int | None = None,
        as_of: datetime | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[SegmentOut]:
        """Every matching segment, page after page."""
        cursor: str | None = None
        while True:
            page = await self.segments(
                start=start, end=end, scale=scale, as_of=as_of, limit=limit, cursor=cursor
            )
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def segment(self, segment_id: int) -> SegmentOut:
        return await self.send((await self._calls()).segment(segment_id))

    async def frames(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> FramePage:
        return await self.send(
            (await self._calls()).frames(start=start, end=end, limit=limit, cursor=cursor)
        )

    async def frame(self, key_or_url: str) -> bytes:
        return await self.send((await self._calls()).frame(key_or_url))

    async def semantic(
        self, *, history: bool = False, as_of: datetime | None = None, limit: int | None = None
    ) -> SemanticList:
        return await self.send(
            (await self._calls()).semantic(history=history, as_of=as_of, limit=limit)
        )

    async def remember(self, text: str, *, at: datetime | None = None) -> RememberResponse:
        return await self.send((await self._calls()).remember(text, at=at))

    async def forget(self, start: datetime, end: datetime) -> ForgetResponse:
        return await self.send((await self._calls()).forget(start, end))

    # --- service and admin ----------------------------------------------------------------
    async def whoami(self) -> WhoAmI:
        return await self.send(Calls.whoami())

    async def health(self) -> Health:
        return await self.send(Calls.health())

    async def ready(self) -> Readiness:
        return await self.send(Calls.ready())

    async def create_user(self, user_id: str) -> CreateUserResponse:
        """Admin key only: a new user and its key (shown once)."""
        return await self.send(Calls.create_user(user_id))

    async def purge_user(self, user_id: str) -> PurgeResponse:
        """Admin key only: every row, blob and cached graph of the user."""
        return await self.send(Calls.purge_user(user_id))
