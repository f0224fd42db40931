"""Admin routes: create a user (returns its first API key once) and purge a user; both are
recorded in the admin audit trail (more keys: routes/keys.py)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status
from fastapi.concurrency import run_in_threadpool

from query_api.auth import AdminOnly, UserIdPath
from query_api.depends import AppDeps
from query_api.ops.forget import purge
from worldmm.store.admin_audit import record_admin_action
from worldmm.store.errors import AlreadyExistsError
from worldmm.store.users import create_user, get_profile, key_prefix
from worldmm.wire.schemas import CreateUserRequest, CreateUserResponse, ErrorOut, PurgeResponse

router = APIRouter(prefix="/v1/users", tags=["users (admin)"], dependencies=[AdminOnly])

_AUTH_ERRORS = {
    401: {"model": ErrorOut, "description": "Missing or invalid API key"},
    403: {"model": ErrorOut, "description": "Not the admin key"},
    422: {"model": ErrorOut, "description": "Invalid input; the message says which"},
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a user and issue its API key (admin)",
    description="The optional `timezone` (an IANA name, default UTC) is the zone the "
    "user's questions are read in; it can be changed later with PATCH /v1/users/{user_id}.",
    responses={**_AUTH_ERRORS, 409: {"model": ErrorOut, "description": "User exists"}},
)
def create(body: CreateUserRequest, deps: AppDeps) -> CreateUserResponse:
    try:
        with deps.db.transaction() as conn:
            key = create_user(conn, body.user_id, body.profile())
            record_admin_action(
                conn, "user.create", subject_user=body.user_id, detail={"prefix": key_prefix(key)}
            )
            profile = get_profile(conn, body.user_id)
    except AlreadyExistsError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    assert profile is not None  # created in this transaction
    return CreateUserResponse(user_id=body.user_id, api_key=key, timezone=profile.timezone)


@router.delete(
    "/{user_id}",
    summary="Purge a user: database rows, blobs and cached graphs (admin)",
    responses={**_AUTH_ERRORS, 404: {"model": ErrorOut, "description": "Unknown user"}},
)
async def purge_route(user_id: UserIdPath, deps: AppDeps) -> PurgeResponse:
    outcome = await run_in_threadpool(purge, deps, user_id)
    if outcome is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown user {user_id!r}")
    await run_in_threadpool(_audit_purge, deps, user_id, outcome.rows)
    return PurgeResponse(
        user_id=user_id,
        rows_deleted=outcome.rows,
        blobs_deleted=outcome.blobs,
        cache_keys_deleted=outcome.cache_keys,
    )


def _audit_purge(deps: AppDeps, user_id: str, rows: dict[str, int]) -> None:
    # after the purge's own commit: the purge spans the database, blobs and cache, so it has
    # no single transaction to join; a purge that failed midway raised before this
    with deps.db.transaction() as conn:
        record_admin_action(conn, "user.purge", subject_user=user_id, detail={"rows": rows})
