"""GET /v1/whoami: which user a key belongs to, so a client given only a key (the MCP
server, the browser's login) knows whose routes to call."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, status

from query_api.auth import BearerKey, check_failures, is_admin_key
from query_api.depends import AppDeps, Failures
from query_api.proxies import client_address
from worldmm.store.users import user_for_key
from worldmm.wire.schemas import ErrorOut, WhoAmI

router = APIRouter(tags=["users (admin)"])


@router.get(
    "/v1/whoami",
    summary="The user of this API key",
    responses={
        401: {"model": ErrorOut, "description": "Missing or invalid API key"},
        429: {"model": ErrorOut, "description": "Too many failed keys (see Retry-After)"},
    },
)
def whoami(request: Request, deps: AppDeps, failures: Failures, key: BearerKey) -> WhoAmI:
    address = client_address(request)
    check_failures(failures, address)
    if is_admin_key(deps, key):
        return WhoAmI(user_id=None, admin=True)
    with deps.db.connection() as conn:
        user_id = user_for_key(conn, key)
    if user_id is None:
        failures.failed(address)
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "invalid API key", headers={"WWW-Authenticate": "Bearer"}
        )
    return WhoAmI(user_id=user_id, admin=False)
