"""The browser's session: the user's API key in an HttpOnly cookie set by the login POST.

Why a cookie and not sessionStorage: frame thumbnails are ``<img>`` loads, which cannot carry
an Authorization header, and an HttpOnly cookie is out of reach of any script on the page
(sessionStorage is not). The cookie is a session cookie (gone when the browser closes),
``Path=/ui`` (never sent to the JSON API), ``SameSite=Strict``, and ``Secure`` behind HTTPS.
State-changing requests must also carry ``X-WorldMM-UI``: a header another site's form cannot
send. The key never appears in a URL, so neither access logs nor history hold it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request, Response, status

from query_api.auth import enforce_rate_limit, is_admin_key
from query_api.depends import AppDeps, Limiter
from worldmm.store.users import user_for_key

COOKIE = "worldmm_ui_key"
UI_HEADER = "X-WorldMM-UI"


class LoginRequired(Exception):
    """No valid session: full pages redirect to the login form, fragments answer 401."""


def set_session(response: Response, request: Request, key: str) -> None:
    response.set_cookie(
        COOKIE,
        key,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/ui",
    )


def clear_session(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/ui")


def user_of_key(deps: AppDeps, key: str) -> str:
    """The user a key belongs to; ValueError with a message a person can act on."""
    key = key.strip()
    if not key:
        raise ValueError("Enter your API key.")
    if is_admin_key(deps, key):
        raise ValueError("The browser shows one wearer's memory: log in with that user's key.")
    with deps.db.connection() as conn:
        user_id = user_for_key(conn, key)
    if user_id is None:
        raise ValueError("Invalid API key.")
    return user_id


def ui_user(request: Request, deps: AppDeps, limiter: Limiter) -> str:
    """The session's user; every browser request spends the key's rate limit, the same
    budget its API requests spend (429 with Retry-After when it is gone)."""
    key = request.cookies.get(COOKIE)
    if not key:
        raise LoginRequired
    try:
        user_id = user_of_key(deps, key)
    except ValueError:
        raise LoginRequired from None
    enforce_rate_limit(limiter, key.strip())
    return user_id


def require_ui_header(x_worldmm_ui: Annotated[str | None, Header()] = None) -> None:
    if x_worldmm_ui != "1":
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"missing {UI_HEADER} header")


UiUser = Annotated[str, Depends(ui_user)]
UiWrite = Depends(require_ui_header)
