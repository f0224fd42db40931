"""A user's model usage: tokens per role and day, priced, and the daily budget."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Query, status
from fastapi.concurrency import run_in_threadpool

from query_api.auth import UserIdPath, user_router
from query_api.depends import AppDeps
from query_api.ops.usage import BadRange, usage_report
from query_api.routes.common import USER_ERRORS
from worldmm.wire.schemas import Instant, UsageReport

router = user_router(tags=["usage"], responses=USER_ERRORS)


@router.get(
    "/usage",
    summary="Model calls and tokens of this user, per role and per day, with estimated cost",
    description="Usage as the model provider reported it (prompt, completion and cached "
    "tokens), in whole minutes of [start, end) (default: today, UTC), at most 366 days. "
    "Calls appear within a few seconds (each process writes its usage every "
    "WORLDMM_USAGE_FLUSH_S). Costs come from the dated price table named in `prices`.",
)
async def usage(
    user_id: UserIdPath,
    deps: AppDeps,
    start: Annotated[
        Instant | None,
        Query(description="Start (ISO 8601 with zone), inclusive; default midnight UTC today."),
    ] = None,
    end: Annotated[
        Instant | None, Query(description="End (ISO 8601 with zone), exclusive; default now.")
    ] = None,
) -> UsageReport:
    try:
        return await run_in_threadpool(usage_report, deps, user_id, start, end)
    except BadRange as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
