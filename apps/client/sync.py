"""The blocking client: ``WorldMMClient(api_url, key, user_id=None)``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from apps.client.calls import Call, Calls
from apps.client.errors import ApiConnectionError
from apps.client.retry import API_CLIENT, RetryPolicy, send_with_retry
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


class WorldMMClient:
    """One user's memory over the query API. ``user_id`` may be left out: the first call that
    needs it asks the API whose key this is (``GET /v1/whoami``).

    >>> with WorldMMClient("http://127.0.0.1:8080", key) as mm:  # doctest: +SKIP
    ...     print(mm.query("Where did I leave my keys?").answer)
    """

    def __init__(
        self,
        api_url: str,
        key: str,
        user_id: str | None = None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not key:
            raise ValueError("an API key is needed")
        self.api_url = api_url.rstrip("/")
        self._key = key
        self._user_id = user_id
        self.retry = retry or API_CLIENT
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self.api_url,
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout_s,
            transport=transport,
        )

    def __repr__(self) -> str:
        key = redacted(self._key)
        return f"WorldMMClient({self.api_url!r}, key={key}, user={self._user_id!r})"

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
            me: WhoAmI = self.send(Calls.whoami())
            if me.user_id is None:
                raise ValueError("the admin key acts for any user: pass user_id")
            self._user_id = me.user_id
        return self._user_id

    @property
    def _calls(self) -> Calls:
        return Calls(self.user_id)

    # --- the user's memory ---------------------------------------------------------------
    def query(
        self,
        question: str,
        *,
        choices: list[str] | None = None,
        as_of: datetime | None = None,
        max_rounds: int | None = None,
    ) -> QueryResponse:
        call = self._calls.query(question, choices=choices, as_of=as_of, max_rounds=max_rounds)
        return self.send(call)

    def search(
        self, memory_type: MemoryType, query: str, *, as_of: datetime | None = None
    ) -> SearchResponse:
        return self.send(self._calls.search(memory_type, query, as_of=as_of))

    def segments(
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
        call = self._calls.segments(
            start=start, end=end, scale=scale, as_of=as_of, limit=limit, cursor=cursor
        )
        return self.send(call)

    def iter_segments(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        scale: int | None = None,
        as_of: datetime | None = None,
        limit: int | None = None,
    ) -> Iterator[SegmentOut]:
        """Every matching segment, page after page."""
        cursor: str | None = None
        while True:
            page = self.segments(
                start=start, end=end, scale=scale, as_of=as_of, limit=limit, cursor=cursor
            )
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def segment(self, segment_id: int) -> SegmentOut:
        return self.send(self._calls.segment(segment_id))

    def frames(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> FramePage:
        return self.send(self._calls.frames(start=start, end=end, limit=limit, cursor=cursor))

    def frame(self, key_or_url: str) -> bytes:
        return self.send(self._calls.frame(key_or_url))

    def semantic(
        self, *, history: bool = False, as_of: datetime | None = None, limit: int | None = None
    ) -> SemanticList:
        return self.send(self._calls.semantic(history=history, as_of=as_of, limit=limit))

    def remember(self, text: str, *, at: datetime | None = None) -> RememberResponse:
        return self.send(self._calls.remember(text, at=at))

    def forget(self, start: datetime, end: datetime) -> ForgetResponse:
        return self.send(self._calls.forget(start, end))

    # --- service and admin ----------------------------------------------------------------
    def whoami(self) -> WhoAmI:
        return self.send(Calls.whoami())

    def health(self) -> Health:
        return self.send(Calls.health())

    def ready(self) -> Readiness:
        return self.send(Calls.ready())

    def create_user(self, user_id: str) -> CreateUserResponse:
        """Admin key only: a new user and its key (shown once)."""
        return self.send(Calls.create_user(user_id))

    def purge_user(self, user_id: str) -> PurgeResponse:
        """Admin key only: every row, blob and cached graph of the user."""
        return self.send(Calls.purge_user(user_id))
