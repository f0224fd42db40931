"""The memory browser at /ui: a day of one wearer's memory, server-rendered (Jinja2), with a
small script of our own (static/ui.js) that swaps HTML fragments in place. Everything is on
the wearer's clock: a day runs from their midnight to midnight, times are shown (and the
forget form read) in their zone."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Form, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from pydantic import ValidationError

from query_api.auth import enforce_rate_limit
from query_api.cursors import CursorError, decode_cursor, page_of, segment_key
from query_api.depends import AppDeps, Failures, Limiter
from query_api.ops.forget import forget
from query_api.ops.frames import frame_jpeg
from query_api.ops.query import run_query
from query_api.ops.remember import is_note
from query_api.proxies import client_address
from query_api.ui import views
from query_api.ui.session import (
    COOKIE,
    Csrf,
    Session,
    UiUser,
    UiWrite,
    clear_session,
    login_token,
    login_token_matches,
    owner_of_key,
    set_login_cookie,
    set_session,
)
from worldmm.localtime import in_zone, zone
from worldmm.models import SCALES
from worldmm.providers.errors import ModelCallError
from worldmm.store import frames as frame_store
from worldmm.store import segments as segment_store
from worldmm.store.input_gaps import list_gaps
from worldmm.store.models import FrameRecord
from worldmm.store.triples import list_semantic, triples_for_segments
from worldmm.store.ui_sessions import close_session, open_session
from worldmm.wire.schemas import QueryRequest, in_range

HERE = Path(__file__).parent
STATIC = {"ui.js": "text/javascript", "ui.css": "text/css"}
templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["hm"] = lambda ts, tz=UTC: in_zone(ts, tz).strftime("%H:%M:%S")
templates.env.filters["iso"] = lambda ts, tz=UTC: in_zone(ts, tz).isoformat()
templates.env.filters["day"] = lambda ts, tz=UTC: in_zone(ts, tz).date().isoformat()
templates.env.globals["scale_name"] = views.SCALE_NAMES.get

router = APIRouter(prefix="/ui", include_in_schema=False)


def _page(request: Request, name: str, code: int = 200, **context: object) -> HTMLResponse:
    return templates.TemplateResponse(request, name, context, status_code=code)


def _zone(deps: AppDeps, user_id: str) -> ZoneInfo:
    """The wearer's zone: every time on a page is shown on it."""
    return deps.reader.zone(user_id)


# --- session -----------------------------------------------------------------------------
@router.get("/login")
def login_form(request: Request) -> HTMLResponse:
    return _login_page(request, None)


def _login_page(request: Request, error: str | None, code: int = 200) -> HTMLResponse:
    """The login form with its CSRF token (the cookie's, or a new one set beside it)."""
    token = login_token(request)
    response = _page(request, "login.html", code, error=error, csrf=token)
    set_login_cookie(response, request, token)
    return response


@router.post("/login")
def login(
    request: Request,
    deps: AppDeps,
    limiter: Limiter,
    failures: Failures,
    key: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    if not login_token_matches(request, csrf_token):
        return _login_page(
            request, "The login form had expired: log in again.", status.HTTP_403_FORBIDDEN
        )
    address = client_address(request)
    decision = failures.check(address)
    if not decision.allowed:
        response = _login_page(
            request,
            f"Too many failed logins: try again in {decision.retry_after_s} s.",
            status.HTTP_429_TOO_MANY_REQUESTS,
        )
        response.headers["Retry-After"] = str(decision.retry_after_s)
        return response
    try:
        owner = owner_of_key(deps, key)
    except ValueError as exc:
        failures.failed(address)
        return _login_page(request, str(exc), status.HTTP_401_UNAUTHORIZED)
    enforce_rate_limit(limiter, key.strip())  # a login is a request of that key too
    lifetime = timedelta(minutes=deps.settings.ui_session_minutes)
    with deps.db.transaction() as conn:
        session_id, _ = open_session(conn, owner.user_id, owner.key_id, lifetime)
    response = RedirectResponse("/ui/", status_code=status.HTTP_303_SEE_OTHER)
    set_session(response, request, session_id)
    return response


@router.post("/logout", dependencies=[Csrf])
def logout(request: Request, deps: AppDeps, session: Session) -> Response:
    with deps.db.transaction() as conn:
        close_session(conn, session.user_id, request.cookies.get(COOKIE, ""))
    response = RedirectResponse("/ui/login", status_code=status.HTTP_303_SEE_OTHER)
    clear_session(response)
    return response


@router.get("/static/{name}")
def static(name: str) -> FileResponse:
    if name not in STATIC:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such file")
    return FileResponse(HERE / "static" / name, media_type=STATIC[name])


# --- the day -------------------------------------------------------------------------------
def _lane_page(
    deps: AppDeps, user_id: str, day: date, tz: tzinfo, scale: int, cursor: str | None
) -> tuple[list[views.Card], str | None]:
    """One page of one lane of one day (the wearer's): the day's range only, never the whole
    memory."""
    start, end = views.day_bounds(day, tz)
    after = decode_cursor(cursor) if cursor else None
    with deps.db.connection() as conn:
        rows = segment_store.list_segments(
            conn, user_id, start=start, end=end, scale=scale, limit=views.LANE_PAGE + 1, after=after
        )
        gaps = list_gaps(conn, user_id, start, end)
    rows, next_cursor = page_of(rows, views.LANE_PAGE, segment_key)
    return [views.card_of(r, is_note(r.source_topic), gaps) for r in rows], next_cursor


def _latest_day(deps: AppDeps, user_id: str, tz: tzinfo) -> date:
    """The wearer's day of their latest segment; today without any."""
    with deps.db.connection() as conn:
        rows = segment_store.list_segments(conn, user_id, limit=1, descending=True)
    return in_zone(rows[0].window_start if rows else deps.clock(), tz).date()


@router.get("/")
def day_view(
    request: Request,
    deps: AppDeps,
    session: Session,
    user_id: UiUser,
    day: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    tz = _zone(deps, user_id)
    try:
        shown = views.parse_day(day) if day else _latest_day(deps, user_id, tz)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    lanes = []
    for scale, name in views.lanes():
        cards, cursor = _lane_page(deps, user_id, shown, tz, scale, None)
        lanes.append({"scale": scale, "name": name, "cards": cards, "cursor": cursor})
    return _page(
        request,
        "day.html",
        user_id=user_id,
        tz=tz,
        day=shown,
        prev_day=shown - timedelta(days=1),
        next_day=shown + timedelta(days=1),
        lanes=lanes,
        csrf=session.csrf_token,
    )


@router.get("/lane")
def lane_more(
    request: Request,
    deps: AppDeps,
    user_id: UiUser,
    day: Annotated[str, Query()],
    scale: Annotated[int, Query()],
    cursor: Annotated[str, Query(max_length=200)],
) -> HTMLResponse:
    if scale not in SCALES:
        return _page(request, "_error.html", 422, message=f"Unknown scale {scale}.")
    tz = _zone(deps, user_id)
    try:
        shown = views.parse_day(day)
        cards, next_cursor = _lane_page(deps, user_id, shown, tz, scale, cursor)
    except (ValueError, CursorError) as exc:
        return _page(request, "_error.html", 422, message=str(exc))
    return _page(
        request, "_cards.html", cards=cards, cursor=next_cursor, scale=scale, day=shown, tz=tz
    )


# --- a segment -----------------------------------------------------------------------------
@router.get("/segments/{segment_id}")
def segment_detail(
    request: Request, deps: AppDeps, user_id: UiUser, segment_id: int
) -> HTMLResponse:
    with deps.db.connection() as conn:
        row = segment_store.get_segment(conn, user_id, segment_id)
        if row is None:  # another user's id reads the same as a missing one
            return _page(request, "_error.html", 404, message=f"No segment {segment_id}.")
        parent = (
            segment_store.get_segment(conn, user_id, row.parent_segment_id)
            if row.parent_segment_id
            else None
        )
        children = segment_store.children_of(conn, user_id, row.id)
        triples = triples_for_segments(conn, user_id, [row.id])
        frames = frame_store.list_frames(
            conn, user_id, start=row.window_start, end=row.window_end, limit=12
        )
        gaps = list_gaps(conn, user_id, row.window_start, row.window_end)
    return _page(
        request,
        "_segment.html",
        seg=row,
        status_word=views.status_of(row),
        parent=parent,
        children=children,
        triples=triples,
        frames=frames,
        input_lost=gaps,
        tz=_zone(deps, user_id),
    )


# What the browser shows where a frame is past its retention (the API answers 410).
EXPIRED_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="160" height="90" viewBox="0 0 160 90">'
    '<rect width="160" height="90" fill="#e5e7eb"/><text x="80" y="42" font-size="11" '
    'text-anchor="middle" fill="#4b5563" font-family="sans-serif">image deleted</text>'
    '<text x="80" y="58" font-size="9" text-anchor="middle" fill="#6b7280" '
    'font-family="sans-serif">past media retention</text></svg>'
)


def _frame_or_placeholder(
    deps: AppDeps, user_id: str, key: str, row: FrameRecord | None = None
) -> Response:
    try:
        return frame_jpeg(deps, user_id, key, row)
    except HTTPException as exc:
        if exc.status_code != status.HTTP_410_GONE:
            raise
        return Response(
            EXPIRED_SVG, media_type="image/svg+xml", headers={"X-WorldMM-Media": "expired"}
        )


@router.get("/frames/{key:path}")
def frame(deps: AppDeps, user_id: UiUser, key: str) -> Response:
    return _frame_or_placeholder(deps, user_id, key)


@router.get("/thumb/{segment_id}")
def thumbnail(deps: AppDeps, user_id: UiUser, segment_id: int) -> Response:
    """The first frame of a segment's window (loaded lazily, as cards scroll into view)."""
    with deps.db.connection() as conn:
        row = segment_store.get_segment(conn, user_id, segment_id)
        frames = (
            frame_store.list_frames(
                conn, user_id, start=row.window_start, end=row.window_end, limit=1
            )
            if row
            else []
        )
    if not frames:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return _frame_or_placeholder(deps, user_id, frames[0].blob_key, frames[0])


# --- semantic facts --------------------------------------------------------------------------
@router.get("/facts")
def facts(request: Request, deps: AppDeps, session: Session, user_id: UiUser) -> HTMLResponse:
    with deps.db.connection() as conn:
        rows = list_semantic(conn, user_id, history=True, limit=2000)
    return _page(
        request,
        "facts.html",
        user_id=user_id,
        chains=views.fact_histories(rows),
        tz=_zone(deps, user_id),
        csrf=session.csrf_token,
    )


# --- ask and forget --------------------------------------------------------------------------
@router.post("/ask", dependencies=[UiWrite, Csrf])
async def ask(
    request: Request, deps: AppDeps, user_id: UiUser, question: Annotated[str, Form()] = ""
) -> HTMLResponse:
    try:
        req = QueryRequest(question=question)
    except ValidationError:
        return _page(request, "_error.html", 422, message="Type a question first.")
    try:
        reply = await run_query(
            deps,
            user_id,
            req,
            url_of=lambda _u, k: f"/ui/frames/{k}",
            recalls=request.app.state.recalls,
        )
    except ModelCallError as exc:
        return _page(request, "_error.html", 502, message=f"The model call failed: {exc}")
    return _page(request, "_answer.html", reply=reply, tz=zone(reply.timezone))


def _range(start: str, end: str, tz: tzinfo) -> tuple[datetime, datetime]:
    """Times from the form (datetime-local inputs, read on the wearer's clock like
    everything shown)."""
    try:
        a, b = datetime.fromisoformat(start), datetime.fromisoformat(end)
    except ValueError:
        raise ValueError("Give both times as YYYY-MM-DDTHH:MM.") from None
    a = in_range(a if a.tzinfo else a.replace(tzinfo=tz))
    b = in_range(b if b.tzinfo else b.replace(tzinfo=tz))
    if a >= b:
        raise ValueError("The start must be before the end.")
    return a, b


@router.post("/forget/confirm", dependencies=[UiWrite, Csrf])
def forget_confirm(
    request: Request,
    deps: AppDeps,
    user_id: UiUser,
    start: Annotated[str, Form()] = "",
    end: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """Step one: say what would go, and ask."""
    tz = _zone(deps, user_id)
    try:
        a, b = _range(start, end, tz)
    except ValueError as exc:
        return _page(request, "_error.html", 422, message=str(exc))
    with deps.db.connection() as conn:
        count = len(segment_store.list_segments(conn, user_id, start=a, end=b, limit=10001))
    return _page(request, "_forget_confirm.html", start=a, end=b, count=count, tz=tz)


@router.post("/forget", dependencies=[UiWrite, Csrf])
async def forget_range(
    request: Request,
    deps: AppDeps,
    user_id: UiUser,
    start: Annotated[str, Form()] = "",
    end: Annotated[str, Form()] = "",
    confirm: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """Step two, only with the confirmation's field; the page then reloads its lanes."""
    if confirm != "yes":
        return _page(request, "_error.html", 422, message="Forgetting needs a confirmation.")
    tz = await run_in_threadpool(_zone, deps, user_id)
    try:
        a, b = _range(start, end, tz)
    except ValueError as exc:
        return _page(request, "_error.html", 422, message=str(exc))
    outcome = await run_in_threadpool(forget, deps, user_id, a, b)
    response = _page(request, "_forget_done.html", start=a, end=b, rows=outcome.rows, tz=tz)
    response.headers["X-UI-Reload"] = "1"
    return response
