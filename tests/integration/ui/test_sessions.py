"""The browser's session (issue #42): the cookie holds an opaque session id, not the key; the
session ends at its expiry, at logout (its id is dead on the server, not only in the browser)
and when its key is revoked; the cookie is Secure behind a trusted TLS proxy; login, logout
and every write need a CSRF token another site cannot read. This module's API trusts loopback
as its proxy (WORLDMM_API_TRUSTED_PROXIES)."""

from __future__ import annotations

import httpx
import pytest

from tests.fixtures.api import ADMIN
from tests.fixtures.browser_login import SESSION_COOKIE, csrf_of, login_token, ui_login
from tests.fixtures.wearers import seed_wearer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.served_settings(api_trusted_proxies="127.0.0.1", ui_session_minutes=90),
]


def _signed_in(http: httpx.Client) -> bool:
    r = http.get("/ui/facts")
    return r.status_code == 200 and 'id="who"' in r.text


def test_the_cookie_is_an_expiring_session_id_not_the_key(served):
    w = seed_wearer(served.deps, "ui-session")
    with httpx.Client(base_url=served.url) as http:
        assert ui_login(http, w.key).status_code == 303
        session_id = http.cookies[SESSION_COOKIE]
        assert session_id != w.key and w.key not in session_id
        assert w.key not in {c.value for c in http.cookies.jar}
        assert _signed_in(http)
        with served.deps.db.connection() as conn:
            minutes = conn.execute(
                "SELECT extract(epoch FROM expires_at - created_at) / 60 FROM ui_sessions"
                " WHERE user_id = %s",
                (w.user_id,),
            ).fetchone()[0]
        assert round(minutes) == 90  # WORLDMM_UI_SESSION_MINUTES
        with served.deps.db.transaction() as conn:  # the session's time is up
            conn.execute(
                "UPDATE ui_sessions SET expires_at = now() - interval '1 s' WHERE user_id = %s",
                (w.user_id,),
            )
        r = http.get("/ui/")
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"
        assert SESSION_COOKIE not in http.cookies  # the dead id is cleared


def test_revoking_the_key_ends_its_browser_sessions_at_once(served):
    w = seed_wearer(served.deps, "ui-revoked")
    with httpx.Client(base_url=served.url) as http:
        assert ui_login(http, w.key).status_code == 303
        assert _signed_in(http)
        keys = httpx.get(f"{served.url}/v1/users/{w.user_id}/keys", headers=ADMIN).json()
        key_id = keys["items"][0]["key_id"]
        revoked = httpx.delete(f"{served.url}/v1/users/{w.user_id}/keys/{key_id}", headers=ADMIN)
        assert revoked.status_code == 200, revoked.text
        assert not _signed_in(http)
        assert http.get(f"/ui/segments/{w.segments[0]}").status_code == 303


def test_logout_ends_the_session_on_the_server(served):
    w = seed_wearer(served.deps, "ui-logout")
    with httpx.Client(base_url=served.url) as http:
        assert ui_login(http, w.key).status_code == 303
        session_id = http.cookies[SESSION_COOKIE]
        csrf = csrf_of(http.get("/ui/").text)
        out = http.post("/ui/logout", data={"csrf_token": csrf})
        assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    # the old id, replayed from elsewhere, opens nothing
    with httpx.Client(base_url=served.url, cookies={SESSION_COOKIE: session_id}) as replay:
        assert replay.get("/ui/facts").status_code == 303


def test_login_logout_and_writes_need_the_csrf_token(served):
    w = seed_wearer(served.deps, "ui-csrf-token")
    with httpx.Client(base_url=served.url) as http:
        # a login posted from another site: no token, or a token without its cookie
        assert http.post("/ui/login", data={"key": w.key}).status_code == 403
        token = login_token(http)
        with httpx.Client(base_url=served.url) as other_site:
            r = other_site.post("/ui/login", data={"key": w.key, "csrf_token": token})
            assert r.status_code == 403 and SESSION_COOKIE not in other_site.cookies
        assert SESSION_COOKIE not in http.cookies

        assert ui_login(http, w.key).status_code == 303
        csrf = csrf_of(http.get("/ui/").text)
        # logout without the token (a cross-site form): refused, the session lives on
        assert http.post("/ui/logout").status_code == 403
        assert http.post("/ui/logout", data={"csrf_token": "forged"}).status_code == 403
        assert _signed_in(http)
        # a write with the script's header but not the token: refused, nothing forgotten
        form = {"start": "2026-11-20T10:00", "end": "2026-11-21T00:00", "confirm": "yes"}
        ui = {"X-WorldMM-UI": "1"}
        assert http.post("/ui/forget", data=form, headers=ui).status_code == 403
        assert http.get(f"/ui/segments/{w.segments[0]}").status_code == 200
        asked = http.post("/ui/forget/confirm", data=form, headers={**ui, "X-CSRF-Token": csrf})
        assert asked.status_code == 200 and 'id="forget-count"' in asked.text


def test_behind_a_trusted_tls_proxy_the_cookie_is_secure(served):
    w = seed_wearer(served.deps, "ui-https")
    with httpx.Client(base_url=served.url) as http:
        r = ui_login(http, w.key, **{"X-Forwarded-Proto": "https"})
        assert r.status_code == 303
        cookie = next(
            v for k, v in r.headers.multi_items() if k == "set-cookie" and SESSION_COOKIE in v
        )
        assert "secure" in cookie.lower() and "httponly" in cookie.lower()
