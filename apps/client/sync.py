"""The blocking client: ``WorldMMClient(api_url, key, user_id=None)``. Its calls are
``ClientBase``'s table; this module only sends them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, TypeVar

import httpx

from apps.client import calls
from apps.client.base import ClientBase, Endpoint, Pages
from apps.client.calls import Call
from apps.client.errors import ApiConnectionError
from apps.client.retry import send_with_retry
from apps.client.wire import build_request, decode

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class WorldMMClient(ClientBase):
    """One user's memory over the query API, blocking. ``user_id`` may be left out: the first
    call that needs it asks the API whose key this is (``GET /v1/whoami``).

    >>> with WorldMMClient("http://127.0.0.1:8080", key) as mm:  # doctest: +SKIP
    ...     print(mm.query("Where did I leave my keys?").answer)
    """

    _http_class = httpx.Client
    _default_sleep = staticmethod(time.sleep)

    def __enter__(self) -> WorldMMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- sending --------------------------------------------------------------------------
    def send(self, call: Call[Any]) -> Any:
        """Send one call, retrying 429/503 as the policy says; typed result or ApiError."""

        def attempt() -> httpx.Response:
            try:
                return self._http.send(build_request(self._http, call))
            except httpx.TransportError as exc:
                raise ApiConnectionError(f"cannot reach {self.api_url}: {exc}") from None

        return decode(call, send_with_retry(attempt, self.retry, self._sleep))

    @property
    def user_id(self) -> str:
        if self._user_id is None:
            return self._learn_user(self.send(calls.whoami()))
        return self._user_id

    def _bind(self, endpoint: Endpoint[P, R]) -> Callable[P, R]:
        def method(*args: P.args, **kwargs: P.kwargs) -> R:
            user_id = self.user_id if endpoint.needs_user else None
            return self.send(endpoint.call(user_id, *args, **kwargs))

        return method

    def _bind_pages(self, pages: Pages[P, T]) -> Callable[P, Iterator[T]]:
        one_page = self._bind(pages.endpoint)

        def every_item(*args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
            page = one_page(*args, **kwargs)
            yield from page.items
            while page.next_cursor is not None:
                page = one_page(*args, **{**kwargs, "cursor": page.next_cursor})
                yield from page.items

        return every_item
