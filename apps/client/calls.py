"""Every operation of the API, described once as a pure builder: its arguments in, a ``Call``
(method, path, query, body, response model) out. Validation happens here, with the API's own
request models, before anything is sent. ``apps.client.base`` turns each builder into a method
of both clients; the clients differ only in how they send a call.

The calls of the user's memory take the user's id first (``user``); the clients fill it in,
asking ``GET /v1/whoami`` when they were not told it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from worldmm.models import MemoryType
from worldmm.wire.schemas import (
    CreateUserRequest,
    CreateUserResponse,
    ForgetResponse,
    FramePage,
    Health,
    PauseRequest,
    PauseResponse,
    ProfileUpdate,
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
    UsageReport,
    UserProfileOut,
    WhoAmI,
)

T = TypeVar("T")


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    model: type[T] | None  # None: the reply is raw bytes (a frame)
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


def _user(user_id: str) -> str:
    return f"/v1/users/{quote(user_id, safe='@')}"


# --- the user's memory ----------------------------------------------------------------------
def query(
    user: str,
    question: str,
    *,
    choices: list[str] | None = None,
    as_of: datetime | None = None,
    max_rounds: int | None = None,
) -> Call[QueryResponse]:
    """Ask a question; the answer with its evidence (multiple choice when ``choices``)."""
    req = QueryRequest(question=question, choices=choices, as_of=as_of, max_rounds=max_rounds)
    return Call("POST", f"{_user(user)}/query", QueryResponse, body=_body(req))


def search(
    user: str, memory_type: MemoryType, query: str, *, as_of: datetime | None = None
) -> Call[SearchResponse]:
    """Search one memory (episodic, semantic or visual); no answer."""
    req = SearchRequest(memory_type=memory_type, query=query, as_of=as_of)
    return Call("POST", f"{_user(user)}/search", SearchResponse, body=_body(req))


def segments(
    user: str,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    scale: int | None = None,
    as_of: datetime | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[SegmentPage]:
    """One page of the segments overlapping ``[start, end)``, oldest first."""
    params = _params(start=start, end=end, scale=scale, as_of=as_of, limit=limit, cursor=cursor)
    return Call("GET", f"{_user(user)}/segments", SegmentPage, params=params)


def segment(user: str, segment_id: int) -> Call[SegmentOut]:
    """One segment by its id."""
    return Call("GET", f"{_user(user)}/segments/{int(segment_id)}", SegmentOut)


def frames(
    user: str,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[FramePage]:
    """One page of the stored frames in ``[start, end)``."""
    params = _params(start=start, end=end, limit=limit, cursor=cursor)
    return Call("GET", f"{_user(user)}/frames", FramePage, params=params)


def frame(user: str, key_or_url: str) -> Call[bytes]:
    """A frame's JPEG: a blob key, or the ``url`` the API gave for it."""
    path = key_or_url if key_or_url.startswith("/v1/") else None
    if path is None:
        path = f"{_user(user)}/frames/{quote(key_or_url, safe='/@')}"
    return Call("GET", path, None)


def semantic(
    user: str,
    *,
    history: bool = False,
    as_of: datetime | None = None,
    limit: int | None = None,
) -> Call[SemanticList]:
    """The semantic facts (with ``history``, the superseded ones too)."""
    params = _params(history=history, as_of=as_of, limit=limit)
    return Call("GET", f"{_user(user)}/semantic", SemanticList, params=params)


def remember(user: str, text: str, *, at: datetime | None = None) -> Call[RememberResponse]:
    """Remember a note, as episodic and semantic memory."""
    req = RememberRequest(text=text, at=at)
    return Call("POST", f"{_user(user)}/memories", RememberResponse, body=_body(req))


def forget(user: str, start: datetime, end: datetime) -> Call[ForgetResponse]:
    """Forget everything captured in ``[start, end)``, for good."""
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("forget needs times with a time zone")
    if start >= end:
        raise ValueError("forget: start must be before end")
    params = _params(start=start, end=end)
    return Call("DELETE", f"{_user(user)}/memories", ForgetResponse, params=params)


def usage(
    user: str, *, start: datetime | None = None, end: datetime | None = None
) -> Call[UsageReport]:
    """Model calls and tokens in ``[start, end)`` (default: today, UTC), per role and day,
    with estimated cost and the daily budget."""
    for t in (start, end):
        if t is not None and t.tzinfo is None:
            raise ValueError("usage needs times with a time zone")
    params = {k: v.isoformat() for k, v in (("start", start), ("end", end)) if v is not None}
    return Call("GET", f"{_user(user)}/usage", UsageReport, params=params)


def profile(user: str) -> Call[UserProfileOut]:
    """The user's profile: id, time zone and creation time."""
    return Call("GET", _user(user), UserProfileOut)


def update_profile(
    user: str,
    *,
    timezone: str | None = None,
    retention_days: int | Literal["default"] | None = None,
    face_blur: bool | None = None,
) -> Call[UserProfileOut]:
    """Change the user's profile; only the fields given change (``timezone``: an IANA name
    such as 'Asia/Tokyo', the zone questions are read in; ``retention_days``: days frames and
    audio are kept, ``"default"`` for the deployment's; ``face_blur=False``: opt out of
    bystander face blurring)."""
    given: dict[str, object] = {"timezone": timezone, "face_blur": face_blur}
    given = {k: v for k, v in given.items() if v is not None}
    if retention_days is not None:
        given["retention_days"] = None if retention_days == "default" else retention_days
    req = ProfileUpdate(**given)
    return Call("PATCH", _user(user), UserProfileOut, body=req.model_dump(exclude_unset=True))


def forget_recent(user: str, minutes: int) -> Call[ForgetResponse]:
    """Forget the last ``minutes`` up to the server's now, for good (a privacy undo)."""
    if not 1 <= minutes <= 7 * 24 * 60:
        raise ValueError("forget_recent: minutes must be between 1 and 10080 (a week)")
    return Call(
        "DELETE", f"{_user(user)}/memories/recent", ForgetResponse, params=_params(minutes=minutes)
    )


def pause(
    user: str, *, session_id: str | None = None, at: datetime | None = None
) -> Call[PauseResponse]:
    """Privacy pause: the flow drops the session's captures from ``at`` (now) on, unstored,
    until :func:`resume` or the session's end."""
    body = _body(PauseRequest(session_id=session_id, at=at))
    return Call("POST", f"{_user(user)}/pause", PauseResponse, body=body)


def resume(
    user: str, *, session_id: str | None = None, at: datetime | None = None
) -> Call[PauseResponse]:
    """End a privacy pause."""
    body = _body(PauseRequest(session_id=session_id, at=at))
    return Call("POST", f"{_user(user)}/resume", PauseResponse, body=body)


def export(user: str) -> Call[bytes]:
    """Everything held about the user as one gzipped tar (manifest.json, tables/*.jsonl,
    media/...); the reply is the archive's bytes (``worldmm export`` streams to a file)."""
    return Call("GET", f"{_user(user)}/export", None)


# --- service and admin: no user -------------------------------------------------------------
def whoami() -> Call[WhoAmI]:
    """The user of the key (None for the admin key)."""
    return Call("GET", "/v1/whoami", WhoAmI)


def health() -> Call[Health]:
    """Liveness."""
    return Call("GET", "/healthz", Health)


def ready() -> Call[Readiness]:
    """Readiness: the services the API needs, each up or not."""
    return Call("GET", "/readyz", Readiness)


def create_user(user_id: str, *, timezone: str | None = None) -> Call[CreateUserResponse]:
    """Admin key only: a new user and its key (shown once); ``timezone``: its IANA zone
    (default UTC)."""
    req = CreateUserRequest(user_id=user_id, timezone=timezone)
    return Call("POST", "/v1/users", CreateUserResponse, body=_body(req))


def purge_user(user_id: str) -> Call[PurgeResponse]:
    """Admin key only: every row, blob and cached graph of the user."""
    return Call("DELETE", _user(user_id), PurgeResponse)
