"""Failed authentications are rate limited per client address and per user id tried: over
the budget every attempt is a 429 with Retry-After, a valid key's included, so guessing stops
and the answer says nothing of the key (issue #42). The served API trusts loopback as its
proxy here, so X-Forwarded-For gives each test client an address of its own."""

from __future__ import annotations

import random
import re

import httpx
import pytest

from tests.fixtures.api import ADMIN_KEY, auth
from worldmm.store.users import create_user

pytestmark = [
    pytest.mark.integration,
    pytest.mark.served_settings(
        api_auth_failures_per_address=3,
        api_auth_failures_per_user=5,
        api_trusted_proxies="127.0.0.1",
    ),
]


def _address() -> str:
    """An address of this run's own (the buckets live in the shared Redis for a minute)."""
    return f"198.51.{random.randrange(256)}.{random.randrange(1, 255)}"


def _from(address: str, key: str) -> dict[str, str]:
    return {**auth(key), "X-Forwarded-For": address}


def _user(served) -> tuple[str, str]:
    user_id = f"guess-{random.randrange(10**9)}"
    with served.deps.db.transaction() as conn:
        return user_id, create_user(conn, user_id)


def test_one_address_is_stopped_after_its_failures_even_with_a_valid_key(served):
    user_id, key = _user(served)
    me = _address()
    with httpx.Client(base_url=served.url) as http:
        profile = f"/v1/users/{user_id}"
        for i in range(3):
            r = http.get(profile, headers=_from(me, f"wmm_wrong-{i}"))
            assert r.status_code == 401, r.text
        right = http.get(profile, headers=_from(me, key))
        wrong = http.get(profile, headers=_from(me, "wmm_wrong-3"))
        for r in (right, wrong):
            assert r.status_code == 429
            assert 1 <= int(r.headers["Retry-After"]) <= 60
        assert right.json() == wrong.json()  # the same answer: nothing learnt of the key
        # the other routes that take a key are held by the same budget
        assert http.get("/v1/whoami", headers=_from(me, key)).status_code == 429
        assert http.get("/v1/users/x/keys", headers=_from(me, ADMIN_KEY)).status_code == 429
        # another address is not held, and the user's own key still works from there
        assert http.get(profile, headers=_from(_address(), key)).status_code == 200


def test_one_user_id_is_stopped_after_its_failures_from_any_address(served):
    user_id, key = _user(served)
    other_id, other_key = _user(served)
    with httpx.Client(base_url=served.url) as http:
        for i in range(5):  # five addresses, one guess each: no address reaches its limit
            r = http.get(f"/v1/users/{user_id}", headers=_from(_address(), f"wmm_wrong-{i}"))
            assert r.status_code == 401
        late = http.get(f"/v1/users/{user_id}", headers=_from(_address(), key))
        assert late.status_code == 429 and int(late.headers["Retry-After"]) >= 1
        fine = http.get(f"/v1/users/{other_id}", headers=_from(_address(), other_key))
        assert fine.status_code == 200  # another user is not held


def test_a_missing_user_and_an_existing_one_fail_alike(served):
    """Failures count by the user id tried, whether or not that user exists: the answers
    (and when the 429 comes) are the same."""
    user_id, _ = _user(served)
    missing = f"nobody-{random.randrange(10**9)}"
    with httpx.Client(base_url=served.url) as http:
        answers = {}
        for who in (user_id, missing):
            me = _address()
            answers[who] = [
                (r.status_code, r.json()["detail"])
                for r in (
                    http.get(f"/v1/users/{who}", headers=_from(me, f"wmm_wrong-{i}"))
                    for i in range(4)
                )
            ]
        assert answers[user_id] == answers[missing]
        assert [code for code, _ in answers[missing]] == [401, 401, 401, 429]


def test_failed_browser_logins_are_limited_by_address(served):
    user_id, key = _user(served)
    me = _address()
    with httpx.Client(base_url=served.url, headers={"X-Forwarded-For": me}) as http:
        token = re.search(r'name="csrf_token" value="([^"]+)"', http.get("/ui/login").text)
        assert token
        for i in range(3):
            r = http.post("/ui/login", data={"key": f"wmm_wrong-{i}", "csrf_token": token[1]})
            assert r.status_code == 401 and "Invalid API key" in r.text
        r = http.post("/ui/login", data={"key": key, "csrf_token": token[1]})
        assert r.status_code == 429 and "Too many failed logins" in r.text
        assert int(r.headers["Retry-After"]) >= 1
        assert not http.cookies.get("worldmm_ui_session")
