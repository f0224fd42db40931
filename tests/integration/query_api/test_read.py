"""Reading memory: segment pages, single segments, frames (list + JPEG bytes), semantic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.fixtures.api import ADMIN
from tests.fixtures.wearers import seed_segment
from worldmm.blobs import frame_key
from worldmm.store import frames as frame_store
from worldmm.store.models import FrameRow

pytestmark = pytest.mark.integration

BASE = datetime(2025, 5, 6, 14, 0, tzinfo=UTC)


def _ranged(client, url: str, headers: dict, from_s: int, to_s: int) -> list[dict]:
    """The items ``url`` lists from BASE + from_s to BASE + to_s."""
    params = {
        "from": (BASE + timedelta(seconds=from_s)).isoformat(),
        "to": (BASE + timedelta(seconds=to_s)).isoformat(),
    }
    return client.get(url, params=params, headers=headers).json()["items"]


def test_segments_page_by_cursor_and_filter_by_range_and_scale(client, api_deps, make_user):
    a = make_user()
    ids = [
        seed_segment(api_deps, a.user_id, BASE + timedelta(seconds=30 * i), f"moment {i}")
        for i in range(7)
    ]
    hour = seed_segment(api_deps, a.user_id, BASE, "the hour", scale=3600)
    url = f"/v1/users/{a.user_id}/segments"
    seen, cursor = [], None
    while True:
        params = {"limit": 3, "scale": 30} | ({"cursor": cursor} if cursor else {})
        page = client.get(url, params=params, headers=a.headers).json()
        seen += [s["id"] for s in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    window = _ranged(client, url, a.headers, 60, 120)
    assert [s["id"] for s in window] == [hour, ids[2], ids[3]]  # overlap, oldest first
    one = client.get(f"{url}/{ids[4]}", headers=a.headers)
    assert one.status_code == 200
    assert one.json()["caption"] == "moment 4" and one.json()["note"] is False

    b = make_user()  # another user's segment id is simply not there
    assert (
        client.get(f"/v1/users/{b.user_id}/segments/{ids[4]}", headers=b.headers).status_code == 404
    )


def test_frames_list_and_bytes_only_for_their_owner(client, api_deps, make_user):
    a, b = make_user(), make_user()
    keys = []
    with api_deps.db.transaction() as conn:
        for i in range(3):
            ts = BASE + timedelta(seconds=i)
            key = frame_key(a.user_id, "glasses-1", ts, i)
            api_deps.blobs.put(key, b"\xff\xd8" + bytes([i]) * 10 + b"\xff\xd9")
            frame_store.insert_frame(
                conn,
                FrameRow(
                    user_id=a.user_id, session_id="glasses-1", captured_at=ts, seq=i, blob_key=key
                ),
            )
            keys.append(key)
    url = f"/v1/users/{a.user_id}/frames"
    page1 = client.get(url, params={"limit": 2}, headers=a.headers).json()
    page2 = client.get(
        url, params={"limit": 2, "cursor": page1["next_cursor"]}, headers=a.headers
    ).json()
    assert [f["key"] for f in page1["items"] + page2["items"]] == keys
    assert page2["next_cursor"] is None
    ranged = _ranged(client, url, a.headers, 1, 2)
    assert [f["key"] for f in ranged] == [keys[1]]

    jpeg = client.get(ranged[0]["url"], headers=a.headers)
    assert jpeg.status_code == 200
    assert jpeg.headers["content-type"] == "image/jpeg"
    assert jpeg.content == b"\xff\xd8" + b"\x01" * 10 + b"\xff\xd9"
    # B may not read A's frame, not even through B's own routes
    assert client.get(ranged[0]["url"], headers=b.headers).status_code == 403
    stolen = ranged[0]["url"].replace(f"/v1/users/{a.user_id}/", f"/v1/users/{b.user_id}/")
    assert client.get(stolen, headers=b.headers).status_code == 404
    for bad in (
        "frames/../../etc/passwd",
        f"frames/{a.user_id}/glasses-1/nope.jpg",
        f"audio/{a.user_id}/glasses-1/1.wav",
    ):
        assert client.get(f"{url}/{bad}", headers=a.headers).status_code == 404, bad


def test_frames_in_a_window_container_and_old_single_blobs_are_both_served(
    client, api_deps, make_user
):
    """A frame inside its window's container is one ranged read of it; a frame stored alone
    (before containers, or late) is the blob under its own key."""
    from worldmm.blobs import window_media_key
    from worldmm.media.container import Capture, build
    from worldmm.memory.windows import dt_to_ms

    a = make_user()
    caps, rows = [], []
    for i in range(3):
        ts = BASE + timedelta(seconds=i)
        key = frame_key(a.user_id, "glasses-1", ts, i)
        caps.append(Capture(key, "frames", dt_to_ms(ts), dt_to_ms(ts), b"jpeg-%d" % i, seq=i))
        rows.append(frame_store.FrameBatchRow("glasses-1", ts, i, key))
    container = build(caps)
    media_key = window_media_key(a.user_id, dt_to_ms(BASE), container.digest)
    api_deps.blobs.put(media_key, container.data)
    refs = {e.key: frame_store.MediaRef(media_key, e.offset, e.length) for e in container.entries}
    rows = [r._replace(media=refs[r.blob_key]) for r in rows[:2]] + rows[2:]
    api_deps.blobs.put(rows[2].blob_key, b"jpeg-2")  # the old layout: one object per frame
    with api_deps.db.transaction() as conn:
        frame_store.insert_frames(conn, a.user_id, rows)
    url = f"/v1/users/{a.user_id}/frames"
    for i, row in enumerate(rows):
        got = client.get(f"{url}/{row.blob_key}", headers=a.headers)
        assert got.status_code == 200 and got.content == b"jpeg-%d" % i, (i, got.text)
    # the container gone (forgotten window): its frames are not found, never a 5xx
    api_deps.blobs.delete_prefix(media_key)
    assert client.get(f"{url}/{rows[0].blob_key}", headers=a.headers).status_code == 404


def test_health_readiness_and_metrics(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "schema": "ok", "redis": "ok"}
    client.get("/v1/users/someone/segments", headers=ADMIN)  # a 404 to count
    text = client.get("/metrics", headers=ADMIN).text
    assert 'route="/v1/users/{user_id}/segments",status="404"' in text
    assert "worldmm_api_request_seconds_bucket" in text
    assert "/v1/users/someone" not in text  # labels carry route templates, never user ids


def test_openapi_documents_every_route_with_models(client):
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    query = paths["/v1/users/{user_id}/query"]["post"]
    assert query["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "QueryResponse"
    )
    assert {"401", "403", "404", "422", "502"} <= set(query["responses"])
    for path in (
        "/v1/users",
        "/v1/users/{user_id}",
        "/v1/users/{user_id}/segments",
        "/v1/users/{user_id}/segments/{segment_id}",
        "/v1/users/{user_id}/frames",
        "/v1/users/{user_id}/frames/{key}",
        "/v1/users/{user_id}/semantic",
        "/v1/users/{user_id}/memories",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert path in paths, path
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


def test_readiness_names_the_failed_dependency(api_settings, api_deps):
    import dataclasses

    import redis
    from fastapi.testclient import TestClient

    from query_api.app import create_app

    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.5, socket_timeout=0.5)
    deps = dataclasses.replace(api_deps, redis=dead)
    with TestClient(create_app(api_settings, deps=deps)) as c:
        r = c.get("/readyz")
        assert r.status_code == 503
        checks = r.json()["checks"]
        assert checks["database"] == "ok" and checks["schema"] == "ok"
        assert checks["redis"] == "unavailable"  # a reason code: the error is in the log
        assert c.get("/healthz").status_code == 200  # alive, just not ready
    dead.close()
