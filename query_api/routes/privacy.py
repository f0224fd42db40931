"""Privacy routes: the export of everything held about a user (worldmm.privacy.export), and
privacy pauses sent as control records (docs/privacy.md)."""

from __future__ import annotations

from fastapi import HTTPException, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from query_api.auth import BearerKey, UserIdPath, is_admin_key, user_router
from query_api.depends import AppDeps, Exports
from query_api.exports import SlotStream
from query_api.limits import key_identity
from query_api.ops.pause import send_pause
from query_api.routes.common import USER_ERRORS
from worldmm.privacy.export import export_user
from worldmm.store.admin_audit import record_admin_action
from worldmm.wire.schemas import ErrorOut, PauseRequest, PauseResponse

router = user_router(tags=["privacy"], responses=USER_ERRORS)
EXPORT_RETRY_AFTER_S = 30  # an export of a long memory takes a while


@router.get(
    "/export",
    response_class=StreamingResponse,
    summary="Everything held about the user: one gzipped tar (JSON Lines per table, media, "
    "a manifest with counts and checksums), streamed",
    responses={
        200: {"content": {"application/gzip": {}}, "description": "The archive"},
        429: {"model": ErrorOut, "description": "Too many exports streaming (see Retry-After)"},
    },
)
async def export(user_id: UserIdPath, deps: AppDeps, key: BearerKey, slots: Exports):
    identity = key_identity(key)
    busy = slots.take(identity)
    if busy is not None:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"{busy}; retry when one has finished",
            headers={"Retry-After": str(EXPORT_RETRY_AFTER_S)},
        )
    try:
        actor = "admin" if is_admin_key(deps, key) else "user"
        now = deps.clock()
        await run_in_threadpool(_audit, deps, user_id, actor)
        s = deps.settings
        chunks = export_user(
            deps.db,
            deps.blobs,
            user_id,
            now,
            statement_timeout_s=s.api_export_statement_timeout_s,
            idle_timeout_s=s.api_export_idle_timeout_s,
        )
    except BaseException:
        slots.give(identity)
        raise
    name = f"worldmm-export-{user_id}-{now:%Y%m%dT%H%M%SZ}.tar.gz"
    return StreamingResponse(
        SlotStream(chunks, lambda: slots.give(identity)),
        media_type="application/gzip",
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )


def _audit(deps: AppDeps, user_id: str, actor: str) -> None:
    with deps.db.transaction() as conn:
        record_admin_action(conn, "user.export", actor=actor, subject_user=user_id)


_PAUSE_ERRORS = {
    409: {"model": ErrorOut, "description": "No session given and none known"},
    422: {"model": ErrorOut, "description": "`at` outside the flow's time limits (named)"},
    503: {"model": ErrorOut, "description": "The control topic cannot be reached"},
}


@router.post(
    "/pause",
    summary="Privacy pause: the flow drops every capture of the session from now (or `at`) "
    "until a resume or the session's end, unstored",
    responses=_PAUSE_ERRORS,
)
async def pause(user_id: UserIdPath, deps: AppDeps, body: PauseRequest) -> PauseResponse:
    return await run_in_threadpool(
        send_pause, deps, user_id, resume=False, session_id=body.session_id, at=body.at
    )


@router.post("/resume", summary="End a privacy pause", responses=_PAUSE_ERRORS)
async def resume(user_id: UserIdPath, deps: AppDeps, body: PauseRequest) -> PauseResponse:
    return await run_in_threadpool(
        send_pause, deps, user_id, resume=True, session_id=body.session_id, at=body.at
    )
