"""The browser's session: an opaque, expiring session id in an HttpOnly cookie, set by the
login POST (worldmm.store.ui_sessions keeps its hash, the key it was opened with and its CSRF
token). The API key itself is sent once, to log in, and never stored in the browser.

Why a cookie and not sessionStorage: frame thumbnails are ``<img>`` loads, which cannot carry
an Authorization header, and an HttpOnly cookie is out of reach of any script on the page.
The cookie is a session cookie (gone when the browser closes), ``Path=/ui`` (never sent to the
JSON API), ``SameSite=Strict``, and ``Secure`` unless the page is plain http to a loopback
address (query_api.proxies; behind a TLS proxy, trust it with WORLDMM_API_TRUSTED_PROXIES).

Every state-changing request carries a CSRF token another site cannot read: the session's own
(a meta tag the script sends as ``X-CSRF-Token``, a hidden field in the logout form), and for
the login form one held in a short cookie and repeated in the form (double submit). The
script's writes also carry ``X-WorldMM-UI``. The key never appears in a URL.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated

from fastapi import Depends, Form, Header, HTTPException, Request, Response, status

from query_api.auth import enforce_identity_rate_limit, is_admin_key
from query_api.depends import AppDeps, Limiter
from query_api.limits import hash_identity
from query_api.proxies import served_on_loopback
from worldmm.store.ui_sessions import UiSession, find_session
from worldmm.store.users import KeyOwner, key_owner

COOKIE = "worldmm_ui_session"
LOGIN_COOKIE = "worldmm_ui_login"  # the login form's CSRF token (double submit)
LOGIN_FORM_S = 3600  # how long a login form stays usable
UI_HEADER = "X-WorldMM-UI"


class LoginRequired(Exception):
    """No valid session: full pages redirect to the login form, fragments answer 401."""


def _cookie(response: Response, request: Request, name: str, value: str, **kw: object) -> None:
    response.set_cookie(
        name,
        value,
        httponly=True,
        samesite="strict",
        secure=not served_on_loopback(request),
        path="/ui",
        **kw,  # type: ignore[arg-type]
    )


def set_session(response: Response, request: Request, session_id: str) -> None:
    _cookie(response, request, COOKIE, session_id)
    response.delete_cookie(LOGIN_COOKIE, path="/ui")


def clear_session(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/ui")


def login_token(request: Request) -> str:
    """The login form's CSRF token: the one its cookie already holds, or a new one."""
    return request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(32)


def set_login_cookie(response: Response, request: Request, token: str) -> None:
    _cookie(response, request, LOGIN_COOKIE, token, max_age=LOGIN_FORM_S)


def login_token_matches(request: Request, sent: str) -> bool:
    held = request.cookies.get(LOGIN_COOKIE) or ""
    return bool(held and sent) and hmac.compare_digest(held.encode(), sent.encode())


def owner_of_key(deps: AppDeps, key: str) -> KeyOwner:
    """Who holds this key (and which of their keys it is); ValueError with a message a
    person can act on."""
    key = key.strip()
    if not key:
        raise ValueError("Enter your API key.")
    if is_admin_key(deps, key):
        raise ValueError("The browser shows one wearer's memory: log in with that user's key.")
    with deps.db.connection() as conn:
        owner = key_owner(conn, key)
    if owner is None:
        raise ValueError("Invalid API key.")
    return owner


def ui_session(request: Request, deps: AppDeps, limiter: Limiter) -> UiSession:
    """The live session of this request; every browser request spends its key's rate limit,
    the same budget the key's API requests spend (429 with Retry-After when it is gone)."""
    session_id = request.cookies.get(COOKIE)
    if not session_id:
        raise LoginRequired
    with deps.db.connection() as conn:
        session = find_session(conn, session_id)
    if session is None:  # unknown, expired, logged out, or its key revoked
        raise LoginRequired
    enforce_identity_rate_limit(limiter, hash_identity(session.key_hash))
    return session


Session = Annotated[UiSession, Depends(ui_session)]


def ui_user(session: Session) -> str:
    return session.user_id


def require_csrf(
    session: Session,
    x_csrf_token: Annotated[str | None, Header()] = None,
    csrf_token: Annotated[str | None, Form()] = None,
) -> None:
    """A state-changing request must carry the session's CSRF token (header or form field)."""
    sent = x_csrf_token or csrf_token or ""
    if not sent or not hmac.compare_digest(sent.encode(), session.csrf_token.encode()):
        raise HTTPException(status.HTTP_403_FORBIDDEN, "missing or wrong CSRF token")


def require_ui_header(x_worldmm_ui: Annotated[str | None, Header()] = None) -> None:
    if x_worldmm_ui != "1":
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"missing {UI_HEADER} header")


UiUser = Annotated[str, Depends(ui_user)]
UiWrite = Depends(require_ui_header)
Csrf = Depends(require_csrf)
