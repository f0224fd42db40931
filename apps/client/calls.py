"""The API's operations as plain request descriptions, shared by the sync and async clients:
each builder returns a ``Call`` (method, path, query, body, response model), so the two
clients differ only in how they send it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from worldmm.models import MemoryType
from worldmm.wire.schemas import (
    CreateUserRequest,
    CreateUserResponse,
    ForgetResponse,
    FramePage,
    Health,
    PurgeResponse,
    QueryRequest,
    QueryResponse,
    Readiness,
    RememberRequest,
    RememberResponse,
    SearchRequest,
    SearchResponse,
    SegmentOut,
    SegmentPage,
    SemanticList,
    WhoAmI,
)

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Call(Generic[M]):
    method: str
    path: str
    model: type[M] | None  # None: the body is raw bytes (a frame)
    params: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None


def _params(**values: object) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        key = {"start": "from", "end": "to"}.get(name, name)
        if isinstance(value, datetime):
            out[key] = value.isoformat()
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


def _body(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude_none=True)


class Calls:
    """The calls of one user's routes (and the admin ones); validation happens here, with the
    API's own request models, before anything is sent."""

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.prefix = f"/v1/users/{quote(user_id, safe='@')}"

    def query(
        self,
        question: str,
        *,
        choices: list[str] | None = None,
        as_of: datetime | None = None,
        max_rounds: int | None = None,
    ) -> Call[QueryResponse]:
        req = QueryRequest(question=question, choices=choices, as_of=as_of, max_rounds=max_rounds)
        return Call("POST", f"{self.prefix}/query", QueryResponse, body=_body(req))

    def search(
        self, memory_type: MemoryType, query: str, *, as_of: datetime | None = None
    ) -> Call[SearchResponse]:
        req = SearchRequest(memory_type=memory_type, query=query, as_of=as_of)
        return Call("POST", f"{self.prefix}/search", SearchResponse, body=_body(req))

    def segments(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        scale: int | None = None,
        as_of: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Call[SegmentPage]:
        params = _params(start=start, end=end, scale=scale, as_of=as_of, limit=limit, cursor=cursor)
        return Call("GET", f"{self.prefix}/segments", SegmentPage, params=params)

    def segment(self, segment_id: int) -> Call[SegmentOut]:
        return Call("GET", f"{self.prefix}/segments/{int(segment_id)}", SegmentOut)

    def frames(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Call[FramePage]:
        params = _params(start=start, end=end, limit=limit, cursor=cursor)
        return Call("GET", f"{self.prefix}/frames", FramePage, params=params)

    def frame(self, key_or_url: str) -> Call[BaseModel]:
        """A frame's JPEG: a blob key, or the ``url`` the API gave for it."""
        path = key_or_url if key_or_url.startswith("/v1/") else None
        if path is None:
            path = f"{self.prefix}/frames/{quote(key_or_url, safe='/@')}"
        return Call("GET", path, None)

    def semantic(
        self, *, history: bool = False, as_of: datetime | None = None, limit: int | None = None
    ) -> Call[SemanticList]:
        params = _params(history=history, as_of=as_of, limit=limit)
        return Call("GET", f"{self.prefix}/semantic", SemanticList, params=params)

    def remember(self, text: str, *, at: datetime | None = None) -> Call[RememberResponse]:
        req = RememberRequest(text=text, at=at)
        return Call("POST", f"{self.prefix}/memories", RememberResponse, body=_body(req))

    def forget(self, start: datetime, end: datetime) -> Call[ForgetResponse]:
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("forget needs times with a time zone")
        if start >= end:
            raise ValueError("forget: start must be before end")
        params = _params(start=start, end=end)
        return Call("DELETE", f"{self.prefix}/memories", ForgetResponse, params=params)

    # --- not user-scoped --------------------------------------------------------------
    @staticmethod
    def health() -> Call[Health]:
        return Call("GET", "/healthz", Health)

    @staticmethod
    def ready() -> Call[Readiness]:
        return Call("GET", "/readyz", Readiness)

    @staticmethod
    def whoami() -> Call[WhoAmI]:
        return Call("GET", "/v1/whoami", WhoAmI)

    @staticmethod
    def create_user(user_id: str) -> Call[CreateUserResponse]:
        req = CreateUserRequest(user_id=user_id)
        return Call("POST", "/v1/users", CreateUserResponse, body=_body(req))

    @staticmethod
    def purge_user(user_id: str) -> Call[PurgeResponse]:
        return Call("DELETE", f"/v1/users/{quote(user_id, safe='@')}", PurgeResponse)
