"""Keys and limits (#17): several keys per user, create / list by prefix / rotate / revoke by
the admin, refused at once by every API process, audited; a per-key rate limit shared across
processes through Redis (per process while Redis is down); a body-size limit."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from query_api.app import create_app
from tests.fixtures.api import ADMIN, auth
from tests.fixtures.browser_login import ui_login
from worldmm.deps import Deps
from worldmm.store.db import Database

pytestmark = pytest.mark.integration


@contextmanager
def _second_process(deps: Deps, redis: Any = None, **settings: Any) -> Iterator[TestClient]:
    """A client of another API process: its own pool and graph memo, and (create_app) its
    own limiter (models are shared only to save loading them again; they hold no key state);
    ``redis`` replaces its Redis client. Its pool is closed on exit."""
    second = dataclasses.replace(
        deps,
        settings=deps.settings.model_copy(update=settings),
        db=Database(deps.db.database_url, max_size=2, name="worldmm-test-second"),
        graphs=None,
        redis=redis or deps.redis,
    )
    try:
        yield TestClient(create_app(second.settings, deps=second))
    finally:
        second.db.close()


@pytest.fixture
def other_process(api_settings, api_deps) -> Iterator[TestClient]:
    with _second_process(api_deps) as c, c:
        yield c


def _segments(client: TestClient, user_id: str, key: str) -> int:
    return client.get(f"/v1/users/{user_id}/segments", headers=auth(key)).status_code


def test_keys_create_list_rotate_revoke_across_processes(client, other_process, make_user):
    u = make_user()
    base = f"/v1/users/{u.user_id}/keys"
    r = client.post(base, json={"name": "phone"}, headers=ADMIN)
    assert r.status_code == 201, r.text
    phone = r.json()
    assert phone["api_key"].startswith(phone["prefix"]) and phone["name"] == "phone"
    for c in (client, other_process):  # both keys work in both processes
        assert _segments(c, u.user_id, u.key) == 200
        assert _segments(c, u.user_id, phone["api_key"]) == 200

    listed = client.get(base, headers=ADMIN).json()["items"]
    assert [k["name"] for k in listed] == [None, "phone"]
    assert "api_key" not in listed[0]  # never shown again
    by_prefix = client.get(base, params={"prefix": phone["prefix"]}, headers=ADMIN).json()
    assert [k["key_id"] for k in by_prefix["items"]] == [phone["key_id"]]
    found = client.get("/v1/keys", params={"prefix": phone["prefix"]}, headers=ADMIN).json()
    assert [(k["user_id"], k["key_id"]) for k in found["items"]] == [(u.user_id, phone["key_id"])]

    # rotate in one process: the old key is refused by the other at once
    r = client.post(f"{base}/{phone['key_id']}/rotate", headers=ADMIN)
    assert r.status_code == 201, r.text
    new = r.json()
    assert new["name"] == "phone" and new["key_id"] != phone["key_id"]
    assert _segments(other_process, u.user_id, phone["api_key"]) == 401
    assert _segments(other_process, u.user_id, new["api_key"]) == 200

    # revoke in the other process: refused by the first at once
    r = other_process.delete(f"{base}/{new['key_id']}", headers=ADMIN)
    assert r.status_code == 200 and r.json()["revoked_at"]
    assert _segments(client, u.user_id, new["api_key"]) == 401
    assert _segments(client, u.user_id, u.key) == 200  # the first key is untouched
    everything = client.get(base, params={"include_revoked": True}, headers=ADMIN).json()
    old = next(k for k in everything["items"] if k["key_id"] == phone["key_id"])
    assert old["replaced_by"] == new["key_id"] and old["revoked_at"]


def test_key_routes_are_admin_only_and_check_their_targets(client, make_user):
    a, b = make_user(), make_user()
    base = f"/v1/users/{a.user_id}/keys"
    assert client.get(base, headers=a.headers).status_code == 403  # not even one's own
    assert client.post(base, headers=a.headers).status_code == 403
    assert client.get(base).status_code == 401
    assert client.get("/v1/users/nobody-here/keys", headers=ADMIN).status_code == 404
    assert client.post("/v1/users/nobody-here/keys", headers=ADMIN).status_code == 404
    b_key = client.get(f"/v1/users/{b.user_id}/keys", headers=ADMIN).json()["items"][0]
    # a key id of another user is not found under this user
    r = client.delete(f"{base}/{b_key['key_id']}", headers=ADMIN)
    assert r.status_code == 404 and r.json()["detail"]
    assert _segments(client, b.user_id, b.key) == 200
    r = client.post(f"{base}/{b_key['key_id']}/rotate", headers=ADMIN)
    assert r.status_code == 404
    r = client.get("/v1/keys", params={"prefix": "wm"}, headers=ADMIN)
    assert r.status_code == 422  # a 2-character prefix would list everyone's keys
    r = client.post(base, json={"name": "a\u0000b"}, headers=ADMIN)
    assert r.status_code == 422


def test_admin_actions_are_audited(client, make_user):
    u = make_user()
    base = f"/v1/users/{u.user_id}/keys"
    made = client.post(base, json={"name": "mcp"}, headers=ADMIN).json()
    rotated = client.post(f"{base}/{made['key_id']}/rotate", headers=ADMIN).json()
    client.delete(f"{base}/{rotated['key_id']}", headers=ADMIN)
    assert client.delete(f"/v1/users/{u.user_id}", headers=ADMIN).status_code == 200
    r = client.get("/v1/admin/audit", params={"user_id": u.user_id}, headers=ADMIN)
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert [i["action"] for i in items] == [
        "user.purge", "key.revoke", "key.rotate", "key.create", "user.create",
    ]  # fmt: skip
    assert items[2]["key_id"] == made["key_id"]
    assert items[2]["detail"]["new_key_id"] == rotated["key_id"]
    assert all(made["api_key"] not in str(i) for i in items)  # prefixes only, never keys
    page = client.get(
        "/v1/admin/audit", params={"user_id": u.user_id, "limit": 2}, headers=ADMIN
    ).json()
    older = client.get(
        "/v1/admin/audit",
        params={"user_id": u.user_id, "before": page["next_before"]},
        headers=ADMIN,
    ).json()
    assert [i["id"] for i in page["items"] + older["items"]] == [i["id"] for i in items]
    assert client.get("/v1/admin/audit", headers=auth(made["api_key"])).status_code == 401


def test_rate_limit_is_shared_by_processes_and_per_key(api_deps, make_user):
    import uuid

    u = make_user()
    limit = 3
    # the limit is per key: a fresh key so other tests' requests do not count
    with (
        _second_process(api_deps, api_rate_limit=limit) as first,
        _second_process(api_deps, api_rate_limit=limit) as second,
    ):
        clients = [first, second]
        key = clients[0].post(f"/v1/users/{u.user_id}/keys", headers=ADMIN).json()["api_key"]
        statuses = [_segments(clients[i % 2], u.user_id, key) for i in range(limit)]
        assert statuses == [200] * limit
        r = clients[1].get(f"/v1/users/{u.user_id}/segments", headers=auth(key))
        assert r.status_code == 429, r.text
        assert 1 <= int(r.headers["retry-after"]) <= 60 and "rate limit" in r.json()["detail"]
        assert _segments(clients[0], u.user_id, key) == 429  # the other process agrees
        assert _segments(clients[0], u.user_id, u.key) == 200  # another key has its own

    # Redis down: each process keeps its own budget instead of failing or letting all in
    from worldmm.graph.cache import redis_client

    dead = redis_client("redis://127.0.0.1:1/0", timeout_s=0.2)
    with _second_process(api_deps, redis=dead, api_rate_limit=limit) as c:
        fresh = c.post(f"/v1/users/{u.user_id}/keys", headers=ADMIN).json()["api_key"]
        got = [_segments(c, u.user_id, fresh) for _ in range(limit + 1)]
        assert got == [200] * limit + [429], (got, uuid.uuid4())


def test_the_browser_spends_the_same_rate_limit_as_the_api(api_deps, make_user):
    u = make_user()
    with _second_process(api_deps, api_rate_limit=3) as c:
        c.base_url = "http://127.0.0.1"  # plain http on loopback: the cookie is not Secure
        key = c.post(f"/v1/users/{u.user_id}/keys", headers=ADMIN).json()["api_key"]
        login = ui_login(c, key)  # the form's GET spends nothing
        assert login.status_code == 303  # 1 of 3
        assert c.get("/ui/").status_code == 200  # 2
        assert _segments(c, u.user_id, key) == 200  # 3, through the JSON API
        page = c.get("/ui/")
        assert page.status_code == 429 and int(page.headers["retry-after"]) >= 1
        assert _segments(c, u.user_id, key) == 429  # one budget for both


def test_oversized_bodies_get_413_before_being_read(api_deps, make_user):
    u = make_user()
    with _second_process(api_deps, api_max_body_bytes=1024) as c:
        path = f"/v1/users/{u.user_id}/memories"
        big = b'{"text": "' + b"x" * 2000 + b'"}'
        r = c.post(path, content=big, headers={**u.headers, "Content-Type": "application/json"})
        assert r.status_code == 413 and "1024" in r.json()["detail"]

        def chunks():  # no Content-Length: counted as it streams
            yield b'{"text": "'
            for _ in range(10):
                yield b"y" * 200
            yield b'"}'

        r = c.post(
            path, content=chunks(), headers={**u.headers, "Content-Type": "application/json"}
        )
        assert r.status_code == 413, r.text
        segs = c.get(f"/v1/users/{u.user_id}/segments", headers=u.headers).json()["items"]
        assert segs == []  # nothing of either body was stored
        r = c.post(path, json={"text": "small enough"}, headers=u.headers)
        assert r.status_code == 201, r.text
