"""Questions asked live are read in the wearer's own time: the profile's zone, the injected
clock as "now" (no as_of), every memory reading time the same way, never a 500 on odd times."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from fastapi.testclient import TestClient
from PIL import Image
from typer.testing import CliRunner

from apps.cli import app
from query_api.app import create_app
from tests.fixtures.api import ADMIN, ApiUser, auth, stack_env
from tests.fixtures.wearers import seed_segment
from worldmm.blobs import frame_key
from worldmm.store import frames as frame_store
from worldmm.store.models import FrameRow

pytestmark = pytest.mark.integration

# The moment every live question below is asked: Thursday 2025-03-13, 21:00 UTC.
NOW = datetime(2025, 3, 13, 21, 0, tzinfo=UTC)


def new_user(client: TestClient, timezone: str | None = None) -> ApiUser:
    user_id = f"tz-{uuid.uuid4().hex[:12]}"
    body = {"user_id": user_id} | ({"timezone": timezone} if timezone else {})
    r = client.post("/v1/users", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    assert r.json()["timezone"] == (timezone or "UTC")
    return ApiUser(user_id, r.json()["api_key"])


@pytest.fixture
def stopped() -> dict[str, datetime]:
    """The API's clock: a question without as_of is asked at ``stopped["now"]`` (NOW)."""
    return {"now": NOW}


@pytest.fixture
def live(api_settings, api_deps, stopped) -> Iterator[TestClient]:
    with TestClient(
        create_app(api_settings, deps=api_deps.with_clock(lambda: stopped["now"]))
    ) as c:
        yield c


def test_profile_time_zone_create_read_change(client):
    bad = client.post(
        "/v1/users", json={"user_id": "tz-bad", "timezone": "Mars/Olympus"}, headers=ADMIN
    )
    assert bad.status_code == 422 and "timezone" in bad.text and "Mars/Olympus" in bad.text
    a, b = new_user(client, "Asia/Tokyo"), new_user(client)
    url = f"/v1/users/{a.user_id}"
    for headers in (a.headers, ADMIN):
        r = client.get(url, headers=headers)
        assert r.status_code == 200, r.text
        assert r.json()["user_id"] == a.user_id and r.json()["timezone"] == "Asia/Tokyo"
        assert datetime.fromisoformat(r.json()["created_at"]).tzinfo is not None
    assert client.get(url, headers=b.headers).status_code == 403  # another user's key
    assert client.get("/v1/users/tz-nobody-here", headers=ADMIN).status_code == 404
    assert client.get(url, headers=auth("not-a-key")).status_code == 401

    r = client.patch(url, json={"timezone": "America/Los_Angeles"}, headers=a.headers)
    assert r.status_code == 200 and r.json()["timezone"] == "America/Los_Angeles"
    assert client.get(url, headers=ADMIN).json()["timezone"] == "America/Los_Angeles"
    for body in ({"timezone": "Nowhere/Special"}, {}, {"timezone": "UTC", "colour": "red"}):
        r = client.patch(url, json=body, headers=a.headers)
        assert r.status_code == 422, (body, r.text)
    assert client.patch(url, json={"timezone": "UTC"}, headers=b.headers).status_code == 403
    assert client.get(url, headers=a.headers).json()["timezone"] == "America/Los_Angeles"


def place_keys(deps, user_id: str, tz: ZoneInfo, where: dict[str, datetime]) -> dict[str, int]:
    """One 30 s segment per place, each at a wall-clock time of ``tz``."""
    return {
        place: seed_segment(
            deps,
            user_id,
            at.replace(tzinfo=tz).astimezone(UTC),
            f"I put my keys {place}.",
            [("I", "put", "keys"), ("keys", "in", place)],
        )  # fmt: skip
        for place, at in where.items()
    }


# Wall-clock times, in the wearer's zone, of each place the keys were left; the questions are
# asked on Thursday 13 March at 21:00 on the wearer's clock.
def wall(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2025, 3, day, hour, minute)


PLACES = {
    "in the blue bowl by the door": wall(11, 10),  # Tuesday morning: two days ago
    "on the kitchen counter": wall(12, 15),  # Wednesday afternoon: yesterday afternoon
    "on the nightstand": wall(12, 22),  # Wednesday 22:00: last night
    "in the coat pocket": wall(13, 8),  # Thursday morning: this morning
}
QUESTIONS = {
    "Where did I put my keys yesterday afternoon?": "on the kitchen counter",
    "Where did I put my keys last night?": "on the nightstand",
    "Where did I put my keys this morning?": "in the coat pocket",
    "Where did I put my keys two days ago?": "in the blue bowl by the door",
    "Where did I put my keys on Tuesday?": "in the blue bowl by the door",
    "Where did I put my keys yesterday at 3 pm?": "on the kitchen counter",
}


def first_evidence(live: TestClient, user: ApiUser, question: str) -> tuple[int, dict]:
    r = live.post(
        f"/v1/users/{user.user_id}/query", json={"question": question}, headers=user.headers
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["evidence"], body
    return body["evidence"][0]["segment_id"], body


@pytest.mark.parametrize("zone_name", ["UTC", "Asia/Tokyo"])
def test_live_questions_name_their_session(live, api_deps, stopped, zone_name):
    user = new_user(live, zone_name)
    tz = ZoneInfo(zone_name)
    stopped["now"] = wall(13, 21).replace(tzinfo=tz).astimezone(UTC)
    ids = place_keys(api_deps, user.user_id, tz, PLACES)
    for question, place in QUESTIONS.items():
        got, body = first_evidence(live, user, question)
        assert got == ids[place], (question, body["evidence"][:3])
        # the reply speaks the wearer's clock: asked_at and evidence carry the zone's offset
        assert body["timezone"] == zone_name and body["as_of"] is None
        asked = datetime.fromisoformat(body["asked_at"])
        assert asked == stopped["now"] and asked.replace(tzinfo=None) == wall(13, 21)
        first = body["evidence"][0]
        assert datetime.fromisoformat(first["start"]).utcoffset() == asked.utcoffset()
    _, body = first_evidence(live, user, "Where did I put my keys this morning?")
    assert body["evidence"][0]["when"] == "today at 08:00"
    _, body = first_evidence(live, user, "Where did I put my keys yesterday afternoon?")
    assert body["evidence"][0]["when"] == "yesterday at 15:00"


def test_the_wearers_reading_wins_over_utcs(live, client, api_deps):
    """A wearer in Tokyo (UTC+9): its 'yesterday afternoon' and UTC's are different sessions."""
    user = new_user(live, "Asia/Tokyo")
    # NOW is Friday 06:00 in Tokyo. Tokyo's yesterday afternoon: Thursday 15:00 JST
    # (06:00 UTC); UTC's yesterday afternoon: Wednesday 15:00 UTC (Thursday 00:00 JST).
    tokyo_pm = datetime(2025, 3, 13, 15, 0, tzinfo=ZoneInfo("Asia/Tokyo"))
    utc_pm = datetime(2025, 3, 12, 15, 0, tzinfo=UTC)
    mine = seed_segment(
        api_deps, user.user_id, tokyo_pm.astimezone(UTC), "I put my keys in the umbrella stand.",
        [("I", "put", "keys"), ("keys", "in", "umbrella stand")],
    )  # fmt: skip
    utcs = seed_segment(
        api_deps, user.user_id, utc_pm, "I put my keys in the laundry basket.",
        [("I", "put", "keys"), ("keys", "in", "laundry basket")],
    )  # fmt: skip
    question = "Where did I put my keys yesterday afternoon?"
    assert first_evidence(live, user, question)[0] == mine
    # the same wearer moved to UTC reads the phrase the other way: the zone decides
    r = client.patch(f"/v1/users/{user.user_id}", json={"timezone": "UTC"}, headers=user.headers)
    assert r.status_code == 200
    assert first_evidence(live, user, question)[0] == utcs
    # with as_of, nothing changes but the zone the day parts are read in
    client.patch(f"/v1/users/{user.user_id}", json={"timezone": "Asia/Tokyo"}, headers=ADMIN)
    r = client.post(
        f"/v1/users/{user.user_id}/query",
        json={"question": question, "as_of": NOW.isoformat()},
        headers=user.headers,
    )
    assert r.status_code == 200 and r.json()["evidence"][0]["segment_id"] == mine


def store_frame(deps, user_id: str, ts: datetime) -> str:
    """One stored JPEG frame captured at ``ts``; its key."""
    key = frame_key(user_id, "s1", ts, 0)
    out = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 40, 40)).save(out, format="JPEG")
    deps.blobs.put(key, out.getvalue())
    with deps.db.transaction() as conn:
        frame_store.insert_frame(
            conn, FrameRow(user_id=user_id, session_id="s1", captured_at=ts, seq=0, blob_key=key)
        )
    return key


def test_search_routes_share_the_reading_and_never_500(live, api_deps):
    user = new_user(live, "America/New_York")
    ny = ZoneInfo("America/New_York")
    ids = place_keys(api_deps, user.user_id, ny, PLACES)
    url = f"/v1/users/{user.user_id}/search"
    r = live.post(
        url, json={"memory_type": "episodic", "query": "where did I put my keys last night"},
        headers=user.headers,
    )  # fmt: skip
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["results"][0]["segment_id"] == ids["on the nightstand"]
    assert body["timezone"] == "America/New_York"
    assert datetime.fromisoformat(body["asked_at"]) == NOW
    # visual search reads words as the others do: yesterday's 3 pm frame, not today's
    frames = {
        d: store_frame(api_deps, user.user_id, datetime(2025, 3, d, 15, 5, tzinfo=ny))
        for d in (12, 13)
    }
    r = live.post(
        url, json={"memory_type": "visual", "query": "what did I see yesterday at 3 pm"},
        headers=user.headers,
    )  # fmt: skip
    assert r.status_code == 200, r.text
    assert [h["key"] for h in r.json()["results"]] == [frames[12]]
    for query in (
        "0001-01-01T00:00Z",
        "9999-12-31T23:59:59Z",
        "0001-01-01T00:00",
        "from 0001-01-01T00:00Z to 9999-12-31T23:59Z",
        "what did I see 99999999 days ago",
        "what did I see yesterday at 3 pm",
    ):
        for memory_type in ("visual", "episodic", "semantic"):
            r = live.post(
                url, json={"memory_type": memory_type, "query": query}, headers=user.headers
            )
            assert r.status_code < 500, (memory_type, query, r.text)
            assert r.status_code == 200 or r.json()["detail"], r.text


def test_users_command_shows_and_sets_the_zone(client, api_settings, monkeypatch):
    """`worldmm users show|set-timezone` against the configured database; a bad zone or user
    is a clear error, not a traceback."""
    user = new_user(client)
    stack_env(monkeypatch, api_settings)
    runner = CliRunner()
    r = runner.invoke(app, ["users", "set-timezone", user.user_id, "America/Sao_Paulo"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["timezone"] == "America/Sao_Paulo"
    r = runner.invoke(app, ["users", "show", user.user_id])
    assert r.exit_code == 0 and json.loads(r.stdout)["user_id"] == user.user_id
    assert client.get(f"/v1/users/{user.user_id}", headers=user.headers).json()["timezone"] == (
        "America/Sao_Paulo"
    )
    r = runner.invoke(app, ["users", "set-timezone", user.user_id, "Atlantis/Capital"])
    assert r.exit_code == 1 and "unknown time zone" in r.stderr
    r = runner.invoke(app, ["users", "show", "tz-nobody-at-all"])
    assert r.exit_code == 1 and "unknown user" in r.stderr
