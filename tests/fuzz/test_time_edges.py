"""Time values at the edges (#24 part 6), in every route that takes a time (found in the
OpenAPI schema, so a new one is covered when it appears): years 1 and 9999, offsets of
±23:59 that carry them past what a datetime holds, naive times, times in a DST gap or fold,
and malformed ones. No answer may be a 5xx, and every 4xx says why."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.api import ADMIN_KEY

pytestmark = pytest.mark.integration

EDGES = [
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:00+23:59",  # in UTC this is year 0: no datetime holds it
    "0001-01-01T00:00:00-23:59",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31T23:59:59.999999-23:59",  # in UTC this is year 10000
    "9999-12-31T00:00:00+23:59",
    "2026-03-08T02:30:00",  # naive, and in the US spring-forward gap
    "2026-03-29T02:30:00+01:00",  # the EU gap, written with the offset before it
    "2026-10-25T02:30:00+02:00",  # the EU fold, first pass
    "2026-10-25T02:30:00+01:00",  # the EU fold, second pass
    "1970-01-01T00:00:00Z",
    "2026-05-04T09:50:00+24:00",  # offset out of range
    "2026-02-30T00:00:00Z",  # no such day
    "0000-01-01T00:00:00Z",
    "10000-01-01T00:00:00Z",
    "2026-05-04T09:50:00.0000000001Z",
]
BASE_BODIES: dict[str, dict[str, Any]] = {
    "query": {"question": "Where did I put the mug?"},
    "search": {"memory_type": "episodic", "query": "mug"},
    "memories": {"text": "I like tea."},
}


def _time_fields(spec: dict) -> list[tuple[str, str, str, str]]:
    """(method, path, 'query' or 'body', name) of every time input of the schema."""
    comps = spec["components"]["schemas"]

    def is_time(s: Any) -> bool:
        if isinstance(s, dict):
            if s.get("format") == "date-time":
                return True
            if "$ref" in s:
                return is_time(comps[s["$ref"].rsplit("/", 1)[-1]])
            return any(is_time(v) for v in s.values())
        return isinstance(s, list) and any(is_time(v) for v in s)

    out = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            for p in op.get("parameters", []):
                if p["in"] == "query" and is_time(p.get("schema", {})):
                    out.append((method.upper(), path, "query", p["name"]))
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
            schema = body.get("schema", {})
            if "$ref" in schema:
                schema = comps[schema["$ref"].rsplit("/", 1)[-1]]
            for name, prop in schema.get("properties", {}).items():
                if is_time(prop):
                    out.append((method.upper(), path, "body", name))
    return out


def _fields() -> list[tuple[str, str, str, str]]:
    from query_api.app import create_app
    from worldmm.settings import load_settings

    return _time_fields(create_app(load_settings()).openapi())


@pytest.fixture(scope="module")
def time_user(client) -> Iterator[tuple[str, str]]:
    user_id = f"fuzz-time-{uuid.uuid4().hex[:10]}"
    r = client.post(
        "/v1/users", json={"user_id": user_id}, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
    )
    assert r.status_code == 201, r.text
    yield user_id, r.json()["api_key"]


def test_the_schema_has_the_time_routes_we_expect() -> None:
    found = {(m, p.rsplit("/", 1)[-1], name) for m, p, _, name in _fields()}
    assert {("GET", "segments", "as_of"), ("POST", "memories", "at")} <= found
    assert {("DELETE", "memories", "from"), ("POST", "query", "as_of")} <= found


@pytest.mark.parametrize(("method", "path", "where", "name"), _fields())
def test_time_edges_never_5xx(client, time_user, method, path, where, name) -> None:
    user_id, key = time_user
    url = path.replace("{user_id}", user_id)
    body = BASE_BODIES.get(path.rsplit("/", 1)[-1]) if method in ("POST", "PATCH") else None
    other = {"from": "to", "to": "from"}.get(name)
    for value in EDGES:
        params: dict[str, str] = {}
        sent = dict(body or {})
        if where == "query":
            params[name] = value
            if other:  # a range: the other end at the opposite edge, and at a plain time
                params[other] = "9999-12-31T23:59:59Z" if name == "from" else "0001-01-01T00:00:00Z"
        else:
            sent[name] = value
        r = client.request(
            method,
            url,
            params=params,
            json=sent if body is not None else None,
            headers={"Authorization": f"Bearer {key}"},
        )
        where_ = f"{method} {path} {name}={value!r} -> {r.status_code}"
        assert r.status_code < 500, f"{where_}: {r.text[:500]}"
        if r.status_code >= 400:
            detail = r.json().get("detail")
            assert isinstance(detail, str) and detail.strip(), f"{where_}: no message"
