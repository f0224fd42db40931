"""GET /v1/whoami: which user a key belongs to, so a client given only a key (the MCP
server, the browser's login) knows whose routes to call."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, status

from query_api.auth import BearerKey, is_admin_key
from query_api.depends import AppDeps
from worldmm.store.users import user_for_key
from worldmm.wire.schemas import ErrorOut, WhoAmI

router = APIRouter(tags=["users (admin)"])


@router.get(
    "/v1/whoami",
    summary="The user of this API key",
    responses={401: {"model": ErrorOut, "description": "Missing or invalid API key"}},
)
def whoami(deps: AppDeps, key: BearerKey) -> WhoAmI:
    if is_admin_key(deps, key):
        return WhoAmI(user_id=None, admin=True)
    with deps.db.connection() as conn:
        user_id = user_for_key(conn, key)
    if user_id is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "invalid API key", headers={"WWW-Authenticate": "Bearer"}
        )
    return WhoAmI(user_id=user_id, admin=False)
