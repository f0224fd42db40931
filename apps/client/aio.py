"""The asyncio client: ``AsyncWorldMMClient(api_url, key, user_id=None)``, the same calls as
``WorldMMClient`` (``ClientBase``'s table) awaited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

import httpx

from apps.client import calls
from apps.client.base import ClientBase, Endpoint, Pages
from apps.client.calls import Call
from apps.client.errors import ApiConnectionError
from apps.client.retry import asend_with_retry
from apps.client.wire import build_request, decode

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class AsyncWorldMMClient(ClientBase):
    """One user's memory over the query API, awaited. ``user_id`` may be left out: the first
    call that needs it asks the API whose key this is (``GET /v1/whoami``).

    >>> async with AsyncWorldMMClient("http://127.0.0.1:8080", key) as mm:  # doctest: +SKIP
    ...     print((await mm.query("Where did I leave my keys?")).answer)
    """

    _http_class = httpx.AsyncClient
    _default_sleep = staticmethod(asyncio.sleep)

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
            return self._learn_user(await self.send(calls.whoami()))
        return self._user_id

    def _bind(self, endpoint: Endpoint[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
        async def method(*args: P.args, **kwargs: P.kwargs) -> R:
            user_id = await self.resolve_user() if endpoint.needs_user else None
            return await self.send(endpoint.call(user_id, *args, **kwargs))

        return method

    def _bind_pages(self, pages: Pages[P, T]) -> Callable[P, AsyncIterator[T]]:
        one_page = self._bind(pages.endpoint)

        async def every_item(*args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
            page = await one_page(*args, **kwargs)
            for item in page.items:
                yield item
            while page.next_cursor is not None:
                page = await one_page(*args, **{**kwargs, "cursor": page.next_cursor})
                for item in page.items:
                    yield item

        return every_item
