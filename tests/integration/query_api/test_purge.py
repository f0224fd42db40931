"""Purging a user leaves nothing of them in PostgreSQL, the blob store or Redis."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis

from query_api.ops.forget import user_cache_pattern
from tests.fixtures.api import ADMIN
from tests.fixtures.wearers import BASE, fill_memory
from worldmm.blobs import user_prefixes
from worldmm.graph.cache import TOMBSTONE, cache_key
from worldmm.store.purge import count_user_rows

pytestmark = pytest.mark.integration


def snapshot(deps, rds, user_id):
    with deps.db.connection() as conn:
        rows = count_user_rows(conn, user_id)
    blobs = [k for p in user_prefixes(user_id) for k in deps.blobs.list(p)]
    keys = sorted(rds.scan_iter(match=user_cache_pattern(user_id)))
    return rows, blobs, keys


def test_purge_removes_everything_of_one_user_only(client, api_deps, api_settings, make_user):
    a, b = make_user(), make_user()
    fill_memory(client, api_deps, a)
    fill_memory(client, api_deps, b)
    rds = redis.Redis.from_url(api_settings.redis_url)
    a_rows, a_blobs, a_keys = snapshot(api_deps, rds, a.user_id)
    b_before = snapshot(api_deps, rds, b.user_id)
    # the purge has something to remove everywhere
    assert all(n > 0 for n in a_rows.values()), sorted(a_rows.items())
    assert len(a_blobs) == 2 and a_keys

    memo_key_a = cache_key(a.user_id, "semantic")
    assert api_deps.graphs.latest(memo_key_a) is not None
    r = client.delete(f"/v1/users/{a.user_id}", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert api_deps.graphs.latest(memo_key_a) is None  # the query process's memo too
    assert api_deps.graphs.latest(cache_key(b.user_id, "semantic")) is not None
    assert r.json()["blobs_deleted"] == 2
    assert r.json()["rows_deleted"]["segments"] == a_rows["segments"]

    rows, blobs, keys = snapshot(api_deps, rds, a.user_id)
    assert set(rows) == set(a_rows)  # every table with a user_id column was counted
    assert all(n == 0 for n in rows.values()), rows
    assert blobs == [] and keys == []
    assert snapshot(api_deps, rds, b.user_id) == b_before
    assert client.get(f"/v1/users/{b.user_id}/segments", headers=b.headers).json()["items"]

    # the user is gone: their key no longer works, the admin sees an unknown user
    assert client.get(f"/v1/users/{a.user_id}/segments", headers=a.headers).status_code == 401
    assert client.get(f"/v1/users/{a.user_id}/segments", headers=ADMIN).status_code == 404
    assert client.delete(f"/v1/users/{a.user_id}", headers=ADMIN).status_code == 404
    rds.close()


def test_forget_leaves_no_cached_graph_of_the_user(client, api_deps, api_settings, make_user):
    """A forget clears the user's graphs from Redis and from the memo at once: they hold the
    forgotten names until the next rebuild otherwise. Another user's stay."""
    a, b = make_user(), make_user()
    fill_memory(client, api_deps, a)
    fill_memory(client, api_deps, b)
    rds = redis.Redis.from_url(api_settings.redis_url)
    key_a, key_b = cache_key(a.user_id, "semantic"), cache_key(b.user_id, "semantic")
    assert b"Jonas" in rds.get(key_a) and api_deps.graphs.latest(key_a) is not None
    b_graph = rds.get(key_b)

    r = client.delete(
        f"/v1/users/{a.user_id}/memories",
        params={
            "from": (BASE - timedelta(days=1)).isoformat(),
            "to": datetime.now(UTC).isoformat(),
        },
        headers=a.headers,
    )
    assert r.status_code == 200, r.text
    assert r.json()["rows_deleted"]["segments"] >= 1
    held = [rds.get(k) for k in rds.scan_iter(match=user_cache_pattern(a.user_id))]
    assert held and all(v.startswith(TOMBSTONE) for v in held)  # no graph bytes left
    assert api_deps.graphs.latest(key_a) is None
    assert rds.get(key_b) == b_graph and api_deps.graphs.latest(key_b) is not None
    rds.close()
