"""What a caller without a key learns from the health routes: nothing about users or
internals. /metrics needs the metrics or admin key (or, served publicly, leaves out every
series labelled with a user id); /readyz answers reason codes, never an exception's text."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from types import SimpleNamespace

import psycopg
import pytest
import redis
from fastapi.testclient import TestClient
from pydantic import SecretStr

from query_api.app import create_app
from tests.fixtures.api import ADMIN, auth
from worldmm.llm.usage_ledger import UsageRecord, count

pytestmark = pytest.mark.integration

METRICS_KEY = "metrics-key-for-the-scraper"


def _count_tokens_of(user_id: str) -> None:
    count(
        UsageRecord(
            at=datetime.now(UTC), user_id=user_id, role="agent", model="m",
            provider="offline", dispatch="direct", prompt_tokens=5, completion_tokens=2,
        )
    )  # fmt: skip


def _app(api_deps, **settings) -> TestClient:
    deps = api_deps.with_settings(**settings)
    return TestClient(create_app(deps.settings, deps=deps))


def test_metrics_need_a_key_and_anonymous_scrapes_see_no_user(api_deps, make_user):
    user = make_user()
    _count_tokens_of(user.user_id)
    c = _app(api_deps, api_metrics_key=SecretStr(METRICS_KEY))
    anonymous = c.get("/metrics")
    assert anonymous.status_code == 401 and user.user_id not in anonymous.text
    assert c.get("/metrics", headers=auth("wrong")).status_code == 401
    assert c.get("/metrics", headers=user.headers).status_code == 401  # a user's key: no
    for headers in (auth(METRICS_KEY), ADMIN):
        full = c.get("/metrics", headers=headers)
        assert full.status_code == 200
        assert f'user_id="{user.user_id}"' in full.text  # the scraper sees every series

    public = _app(api_deps, api_metrics_public=True).get("/metrics")
    assert public.status_code == 200
    assert "worldmm_api_requests_total" in public.text  # the rest is there
    assert user.user_id not in public.text and 'user_id="' not in public.text


class _DownPool:
    """A pool whose every connection attempt fails with what a server would say."""

    def connection(self, timeout: float):
        raise psycopg.OperationalError(
            'connection to server at "10.9.8.7", port 5432 failed: password authentication'
            ' failed for user "worldmm"'
        )


def test_readiness_gives_reason_codes_not_errors(api_settings, api_deps):
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5, socket_timeout=0.5)
    with TestClient(create_app(api_settings, deps=dataclasses.replace(api_deps, redis=dead))) as c:
        r = c.get("/readyz")
    assert r.status_code == 503
    assert r.json()["checks"] == {"database": "ok", "schema": "ok", "redis": "unavailable"}
    assert "Error" not in r.text and "port" not in r.text

    db = SimpleNamespace(pool=_DownPool())
    r = TestClient(create_app(api_settings, deps=dataclasses.replace(api_deps, db=db))).get(
        "/readyz"
    )
    assert r.status_code == 503
    assert r.json()["checks"]["database"] == "unavailable"
    assert r.json()["checks"]["schema"] == "not_checked"
    assert "10.9.8.7" not in r.text and "worldmm" not in r.text  # host and role name stay
    dead.close()
