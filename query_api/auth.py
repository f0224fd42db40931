"""Bearer-key authentication: one key per user (stored hashed), plus an admin key.

- no key, or a key nobody holds → 401
- a user's key on another user's routes → 403 (whether or not that other user exists, so
  keys cannot probe which users exist)
- the admin key acts for any existing user; an unknown user → 404
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Path, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from query_api.deps import Deps, ServiceDeps
from query_api.schemas import USER_ID_PATTERN
from worldmm.store.users import user_exists, user_for_key, verify_api_key

_bearer = HTTPBearer(
    auto_error=False,
    description="A user's API key (from POST /v1/users) or the admin key.",
)

UserIdPath = Annotated[
    str,
    Path(pattern=USER_ID_PATTERN, description="The user whose memory this is.", examples=["alice"]),
]


def _unauthorized(message: str) -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED, message, headers={"WWW-Authenticate": "Bearer"}
    )


def bearer_key(
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    if creds is None or not creds.credentials:
        raise _unauthorized("missing bearer API key (Authorization: Bearer <key>)")
    return creds.credentials


BearerKey = Annotated[str, Depends(bearer_key)]


def is_admin_key(deps: ServiceDeps, key: str) -> bool:
    admin = deps.settings.admin_api_key
    if admin is None or not admin.get_secret_value():
        return False
    return hmac.compare_digest(key.encode(), admin.get_secret_value().encode())


def require_admin(deps: Deps, key: BearerKey) -> None:
    if is_admin_key(deps, key):
        return
    with deps.db.connection() as conn:
        known = user_for_key(conn, key) is not None
    if known:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this route needs the admin key")
    raise _unauthorized("invalid API key")


def authorized_user(user_id: UserIdPath, deps: Deps, key: BearerKey) -> str:
    """The path's user id, once the key may act for that user."""
    if user_id in (".", ".."):
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "invalid user id")
    with deps.db.connection() as conn:
        if is_admin_key(deps, key):
            if not user_exists(conn, user_id):
                raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown user {user_id!r}")
            return user_id
        if verify_api_key(conn, user_id, key):
            return user_id
        if user_for_key(conn, key) is not None:
            raise HTTPException(status.HTTP_403_FORBIDDEN, "this API key belongs to another user")
    raise _unauthorized("invalid API key")


AdminOnly = Depends(require_admin)
AuthorizedUser = Annotated[str, Depends(authorized_user)]
