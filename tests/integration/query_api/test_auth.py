"""Keys: a user's key reads only that user's memory; the admin key acts for any user."""

from __future__ import annotations

import pytest

from tests.fixtures.api import ADMIN, auth

pytestmark = pytest.mark.integration

T0, T1 = "2025-03-01T10:00:00Z", "2025-03-01T11:00:00Z"


def user_routes(user_id: str) -> list[tuple[str, str, dict]]:
    """(method, path, request kwargs) for every route acting on one user's memory."""
    base = f"/v1/users/{user_id}"
    return [
        ("POST", f"{base}/query", {"json": {"question": "What did I eat?"}}),
        ("GET", f"{base}/segments", {}),
        ("GET", f"{base}/segments/1", {}),
        ("GET", f"{base}/frames", {}),
        ("GET", f"{base}/frames/frames/{user_id}/s1/1740823200000-0.jpg", {}),
        ("GET", f"{base}/semantic", {}),
        ("POST", f"{base}/memories", {"json": {"text": "My locker code is 4711."}}),
        ("DELETE", f"{base}/memories", {"params": {"from": T0, "to": T1}}),
        ("DELETE", base, {}),
    ]


def test_another_users_key_is_forbidden_on_every_route(client, make_user):
    a, b = make_user(), make_user()
    for method, path, kwargs in user_routes(a.user_id):
        r = client.request(method, path, headers=b.headers, **kwargs)
        assert r.status_code == 403, (method, path, r.text)
        assert isinstance(r.json()["detail"], str) and r.json()["detail"]
    # nothing B tried reached A's memory
    r = client.get(f"/v1/users/{a.user_id}/segments", headers=a.headers)
    assert r.status_code == 200 and r.json()["items"] == []


def test_unknown_user_is_404_with_the_admin_key(client):
    for method, path, kwargs in user_routes("nobody-here"):
        r = client.request(method, path, headers=ADMIN, **kwargs)
        assert r.status_code == 404, (method, path, r.text)
        assert "nobody-here" in r.json()["detail"] or "not" in r.json()["detail"]


def test_missing_or_invalid_key_is_401(client, make_user):
    a = make_user()
    for method, path, kwargs in user_routes(a.user_id):
        r = client.request(method, path, **kwargs)
        assert r.status_code == 401, (method, path, r.text)
        assert r.headers["www-authenticate"] == "Bearer"
        r = client.request(method, path, headers=auth("wmm_not-a-real-key"), **kwargs)
        assert r.status_code == 401, (method, path, r.text)
        r = client.request(method, path, headers={"Authorization": a.key}, **kwargs)  # no scheme
        assert r.status_code == 401, (method, path, r.text)


def test_admin_routes_need_the_admin_key(client, make_user):
    a = make_user()
    r = client.post("/v1/users", json={"user_id": "someone-new"}, headers=a.headers)
    assert r.status_code == 403
    r = client.post("/v1/users", json={"user_id": "someone-new"})
    assert r.status_code == 401
    r = client.post("/v1/users", json={"user_id": a.user_id}, headers=ADMIN)
    assert r.status_code == 409 and a.user_id in r.json()["detail"]


def test_own_key_and_admin_key_both_work(client, make_user):
    a = make_user()
    for headers in (a.headers, ADMIN):
        r = client.get(f"/v1/users/{a.user_id}/semantic", headers=headers)
        assert r.status_code == 200, r.text
        assert r.json() == {"items": []}


@pytest.mark.parametrize(
    ("method", "suffix", "kwargs", "needle"),
    [
        ("POST", "/query", {"json": {"question": ""}}, "question"),
        ("POST", "/query", {"json": {"question": "x" * 2001}}, "question"),
        ("POST", "/query", {"json": {"question": "q", "choices": ["a"] * 11}}, "choices"),
        ("POST", "/query", {"json": {"question": "q", "max_rounds": 0}}, "max_rounds"),
        ("POST", "/query", {"json": {"question": "q", "max_rounds": 99}}, "max_rounds"),
        ("POST", "/query", {"json": {"question": "q", "as_of": "2025-03-01T10:00:00"}}, "as_of"),
        ("POST", "/query", {"json": {"question": "q", "extra": 1}}, "extra"),
        ("GET", "/segments", {"params": {"scale": 45}}, "scale"),
        ("GET", "/segments", {"params": {"limit": 100000}}, "limit"),
        ("GET", "/segments", {"params": {"from": T1, "to": T0}}, "from"),
        ("GET", "/segments", {"params": {"cursor": "garbage!"}}, "cursor"),
        ("GET", "/segments/abc", {}, "segment_id"),
        ("GET", "/frames", {"params": {"from": "yesterday"}}, "from"),
        ("POST", "/memories", {"json": {"text": "   "}}, "text"),
        ("DELETE", "/memories", {"params": {"from": T1, "to": T0}}, "from"),
        ("DELETE", "/memories", {"params": {"from": T0}}, "to"),
    ],
)
def test_invalid_input_is_422_with_a_message(client, make_user, method, suffix, kwargs, needle):
    a = make_user()
    r = client.request(method, f"/v1/users/{a.user_id}{suffix}", headers=a.headers, **kwargs)
    assert r.status_code == 422, r.text
    assert needle in r.json()["detail"]


def test_invalid_user_id_is_422(client):
    r = client.get("/v1/users/bad%20id!/segments", headers=ADMIN)
    assert r.status_code == 422
    r = client.post("/v1/users", json={"user_id": "a/b"}, headers=ADMIN)
    assert r.status_code == 422 and "user_id" in r.json()["detail"]
