"""Reading and editing one user's memory: segments, frames, semantic facts, notes, forgetting."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import HTTPException, Path, Query, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from psycopg import Connection

from query_api.auth import UserIdPath, user_router
from query_api.cursors import decode_cursor, frame_key, page_of, segment_key
from query_api.depends import AppDeps
from query_api.ops.forget import forget
from query_api.ops.frames import frame_jpeg
from query_api.ops.query import frame_url
from query_api.ops.remember import is_note, remember
from query_api.routes.common import MODEL_ERROR, USER_ERRORS, check_range, check_scale
from worldmm.models import SCALES
from worldmm.store import frames as frame_store
from worldmm.store import segments as segment_store
from worldmm.store.input_gaps import InputGapSpan, gaps_in, list_gaps
from worldmm.store.models import SegmentRow
from worldmm.store.triples import list_semantic
from worldmm.wire.schemas import (
    DEFAULT_PAGE,
    MAX_PAGE,
    ForgetResponse,
    FrameOut,
    FramePage,
    InputGapOut,
    Instant,
    RememberRequest,
    RememberResponse,
    SegmentOut,
    SegmentPage,
    SemanticFactOut,
    SemanticList,
)

router = user_router(tags=["memory"], responses=USER_ERRORS)

From = Annotated[
    Instant | None,
    Query(alias="from", description="Start of the range (ISO 8601 with zone), inclusive."),
]
To = Annotated[Instant | None, Query(alias="to", description="End of the range, exclusive.")]
AsOf = Annotated[Instant | None, Query(description="Only what existed at this time (ISO 8601).")]
Limit = Annotated[int, Query(ge=1, le=MAX_PAGE, description=f"Page size (1-{MAX_PAGE}).")]
Cursor = Annotated[
    str | None,
    Query(max_length=200, description="next_cursor of the previous page."),
]


def _gap_out(gap: InputGapSpan) -> InputGapOut:
    return InputGapOut.model_validate(gap, from_attributes=True)


def _segment_out(row: SegmentRow, gaps: list[InputGapSpan] | None = None) -> SegmentOut:
    start, end = row.window_start, row.window_end
    return SegmentOut.model_validate(
        {
            **row.model_dump(),
            "scale": row.scale_seconds,
            "start": start,
            "end": end,
            "note": is_note(row.source_topic),
            "degraded": row.model_versions.get("degraded"),
            "input_lost": [_gap_out(g) for g in gaps_in(gaps or [], start, end)],
        }
    )


# --- segments --------------------------------------------------------------------------
@router.get(
    "/segments",
    summary="List segments overlapping a time range",
    description="Oldest first, every scale unless `scale` is given; paged with `cursor`.",
)
def list_segments(
    user_id: UserIdPath,
    deps: AppDeps,
    start: From = None,
    end: To = None,
    scale: Annotated[
        int | None,
        Query(description="30, 180, 600 or 3600 seconds.", json_schema_extra={"enum": SCALES}),
    ] = None,
    as_of: AsOf = None,
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
) -> SegmentPage:
    check_range(start, end)
    check_scale(scale)
    after = decode_cursor(cursor) if cursor else None
    with deps.db.connection() as conn:
        rows = segment_store.list_segments(
            conn, user_id, start=start, end=end, scale=scale, as_of=as_of, limit=limit + 1,
            after=after,
        )  # fmt: skip
        rows, next_cursor = page_of(rows, limit, segment_key)
        gaps = _gaps_of(conn, user_id, rows)
    return SegmentPage(items=[_segment_out(r, gaps) for r in rows], next_cursor=next_cursor)


@router.get("/segments/{segment_id}", summary="One segment")
def read_segment(
    user_id: UserIdPath,
    segment_id: Annotated[int, Path(ge=1, le=2**63 - 1)],
    deps: AppDeps,
) -> SegmentOut:
    with deps.db.connection() as conn:
        row = segment_store.get_segment(conn, user_id, segment_id)
        gaps = _gaps_of(conn, user_id, [row] if row is not None else [])
    if row is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no segment {segment_id}")
    return _segment_out(row, gaps)


def _gaps_of(conn: Connection, user_id: str, rows: list[SegmentRow]) -> list[InputGapSpan]:
    """The user's lost input over the rows' span (one query per page)."""
    if not rows:
        return []
    start = min(r.window_start for r in rows)
    return list_gaps(conn, user_id, start, max(r.window_end for r in rows))


# --- frames ----------------------------------------------------------------------------
@router.get("/frames", summary="List stored frames captured in a time range")
def list_frames(
    user_id: UserIdPath,
    deps: AppDeps,
    start: From = None,
    end: To = None,
    limit: Limit = DEFAULT_PAGE,
    cursor: Cursor = None,
) -> FramePage:
    check_range(start, end)
    after = decode_cursor(cursor) if cursor else None
    with deps.db.connection() as conn:
        rows = frame_store.list_frames(
            conn, user_id, start=start, end=end, limit=limit + 1, after=after
        )
    rows, next_cursor = page_of(rows, limit, frame_key)
    return FramePage(
        items=[
            FrameOut(
                key=r.blob_key,
                ts=r.captured_at,
                session_id=r.session_id,
                seq=r.seq,
                url=frame_url(user_id, r.blob_key),
            )
            for r in rows
        ],
        next_cursor=next_cursor,
    )


@router.get(
    "/frames/{key:path}",
    response_class=Response,
    summary="One frame's JPEG bytes",
    responses={200: {"content": {"image/jpeg": {}}, "description": "The frame"}},
)
def read_frame(user_id: UserIdPath, key: str, deps: AppDeps) -> Response:
    return frame_jpeg(deps, user_id, key)


# --- semantic --------------------------------------------------------------------------
@router.get("/semantic", summary="Semantic facts (active ones, or every version with history=true)")
def semantic(
    user_id: UserIdPath,
    deps: AppDeps,
    history: Annotated[bool, Query(description="Include replaced facts.")] = False,
    as_of: AsOf = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 1000,
) -> SemanticList:
    with deps.db.connection() as conn:
        rows = list_semantic(conn, user_id, history=history, as_of=as_of, limit=limit)
    return SemanticList(
        items=[
            SemanticFactOut.model_validate(
                {**r.model_dump(), "subject": r.subject_name, "object": r.object_name}
            )
            for r in rows
        ]
    )


# --- writing -----------------------------------------------------------------------------
@router.post(
    "/memories",
    status_code=status.HTTP_201_CREATED,
    summary="Remember this: store a note as episodic and semantic memory",
    responses=MODEL_ERROR,
)
async def remember_route(
    user_id: UserIdPath, body: RememberRequest, deps: AppDeps
) -> RememberResponse:
    return await remember(deps, user_id, body)


@router.delete(
    "/memories",
    summary="Forget a time range: segments, facts drawn from them, frames and audio",
)
async def forget_route(
    user_id: UserIdPath,
    deps: AppDeps,
    start: Annotated[Instant, Query(alias="from", description="Start (inclusive).")],
    end: Annotated[Instant, Query(alias="to", description="End (exclusive).")],
) -> ForgetResponse:
    if start >= end:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "'from' must be before 'to'")
    return await _forget(deps, user_id, start, end)


MAX_RECENT_MINUTES = 7 * 24 * 60


@router.delete(
    "/memories/recent",
    summary="Forget the last N minutes (up to now): a privacy undo in one call",
)
async def forget_recent_route(
    user_id: UserIdPath,
    deps: AppDeps,
    minutes: Annotated[
        int, Query(ge=1, le=MAX_RECENT_MINUTES, description="How far back from now to forget.")
    ],
) -> ForgetResponse:
    end = deps.clock()
    start = end - timedelta(minutes=minutes)
    # a capture stamped a little ahead of the server's clock is "recent" too
    return await _forget(deps, user_id, start, end, until=end + timedelta(minutes=5))


async def _forget(
    deps: AppDeps, user_id: str, start: datetime, end: datetime, *, until: datetime | None = None
) -> ForgetResponse:
    """Forget [start, ``until`` or end) and answer with the range asked for."""
    outcome = await run_in_threadpool(forget, deps, user_id, start, until or end)
    return ForgetResponse(
        user_id=user_id,
        start=start,
        end=end,
        rows_deleted=outcome.rows,
        blobs_deleted=outcome.blobs,
    )
