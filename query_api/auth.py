"""Bearer-key authentication: any of a user's active keys (stored hashed), or the admin key.

- no key, a key nobody holds, or a revoked key → 401 (keys are looked up in PostgreSQL on
  every request, so a revoke holds at once in every API process)
- a user's key on another user's routes → 403 (whether or not that other user exists, so
  keys cannot probe which users exist)
- the admin key acts for any existing user; an unknown user → 404
- over ``WORLDMM_API_RATE_LIMIT`` requests a minute with one key → 429 with Retry-After
- over ``WORLDMM_API_AUTH_FAILURES_PER_ADDRESS`` failed keys a minute from one client address,
  or ``..._PER_USER`` on one user id's routes → 429 with Retry-After for every attempt, a
  valid key's too, until the budget refills (checked before the key: no oracle)

Per-user routes are authorised by their router (:func:`user_router`), not by each handler
remembering an argument: a route added to it cannot skip the check, and a test walks the
app's routes for any ``/v1/users/{user_id}/...`` route without a router-level check.
"""

from __future__ import annotations

import hmac
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from query_api.depends import AppDeps, Failures, Limiter
from query_api.limits import AuthFailures, RateLimiter, key_identity
from query_api.proxies import client_address
from worldmm.deps import Deps as Bundle
from worldmm.store.users import user_exists, user_for_key, verify_api_key
from worldmm.wire.schemas import USER_ID_PATTERN

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


def is_admin_key(deps: Bundle, key: str) -> bool:
    admin = deps.settings.admin_api_key
    if admin is None or not admin.get_secret_value():
        return False
    return hmac.compare_digest(key.encode(), admin.get_secret_value().encode())


def enforce_rate_limit(limiter: RateLimiter, key: str) -> None:
    """Take one request from this key's budget; 429 with Retry-After when it is spent."""
    enforce_identity_rate_limit(limiter, key_identity(key))


def enforce_identity_rate_limit(limiter: RateLimiter, identity: str) -> None:
    decision = limiter.check(identity)
    if not decision.allowed:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"rate limit of {limiter.per_minute} requests per minute for this key"
            f" reached; retry in {decision.retry_after_s} s",
            headers={"Retry-After": str(decision.retry_after_s)},
        )


def check_failures(failures: AuthFailures, address: str, user_id: str | None = None) -> None:
    """429 with Retry-After while this address (or user id) has spent its failed
    authentications: asked before any key is looked at."""
    decision = failures.check(address, user_id)
    if not decision.allowed:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"too many failed authentications; retry in {decision.retry_after_s} s",
            headers={"Retry-After": str(decision.retry_after_s)},
        )


def require_admin(
    request: Request, deps: AppDeps, limiter: Limiter, failures: Failures, key: BearerKey
) -> None:
    address = client_address(request)
    check_failures(failures, address)
    if is_admin_key(deps, key):
        enforce_rate_limit(limiter, key)
        return
    with deps.db.connection() as conn:
        known = user_for_key(conn, key) is not None
    if known:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "this route needs the admin key")
    failures.failed(address)
    raise _unauthorized("invalid API key")


def authorized_user(
    user_id: UserIdPath,
    request: Request,
    deps: AppDeps,
    limiter: Limiter,
    failures: Failures,
    key: BearerKey,
) -> str:
    """The path's user id, once the key may act for that user."""
    if user_id in (".", ".."):
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "invalid user id")
    address = client_address(request)
    check_failures(failures, address, user_id)
    with deps.db.connection() as conn:
        if is_admin_key(deps, key):
            if not user_exists(conn, user_id):
                raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown user {user_id!r}")
            allowed = True
        else:
            allowed = verify_api_key(conn, user_id, key)
            if not allowed and user_for_key(conn, key) is not None:
                raise HTTPException(
                    status.HTTP_403_FORBIDDEN, "this API key belongs to another user"
                )
    if not allowed:
        failures.failed(address, user_id)
        raise _unauthorized("invalid API key")
    enforce_rate_limit(limiter, key)  # outside the DB connection: no pooled conn held for Redis
    return user_id


AdminOnly = Depends(require_admin)
USER_PREFIX = "/v1/users/{user_id}"


def user_router(**kwargs: Any) -> APIRouter:
    """A router for one user's routes (``/v1/users/{user_id}/...``): every route on it runs
    :func:`authorized_user` first, so a handler reads the path's ``user_id`` (declare it as
    :data:`UserIdPath`) only once the key may act for that user."""
    return APIRouter(prefix=USER_PREFIX, dependencies=[Depends(authorized_user)], **kwargs)


# What may authorise a route under USER_PREFIX: the user's own check, or the admin-only one
# (the admin's key routes). tests/unit/query_api/test_route_auth.py holds every route to it.
USER_ROUTE_CHECKS = (authorized_user, require_admin)
