"""A privacy pause sent through the API lands on the control topic as the record the
glasses would send (the flow's handling of it: tests/unit/memory/test_pause.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from connectors import codec
from connectors.kafka_io import consume_all
from connectors.topics import create_topics, topic_names
from worldmm.store import users as user_store

pytestmark = pytest.mark.integration

# a few minutes ago: inside the flow's time limits, which the API holds pauses to
AT = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=20)
LIMITS = codec.CodecLimits(max_future_skew_s=3600)


def control_records(settings, user_id: str) -> list[codec.ControlMessage]:
    topic = topic_names(settings)["control"]
    out = []
    for rec in consume_all(settings.kafka_brokers, topic):
        if rec.key == user_id.encode():
            msg = codec.decode("control", rec.key, rec.value, rec.headers, now=AT, limits=LIMITS)
            out.append(msg)
    return out


def test_pause_and_resume_go_to_the_control_topic(client, api_deps, api_settings, make_user):
    create_topics(api_settings.kafka_brokers, api_settings)
    a, b = make_user(), make_user()
    url = f"/v1/users/{a.user_id}"
    r = client.post(f"{url}/pause", json={}, headers=a.headers)
    assert r.status_code == 409 and "session_id" in r.json()["detail"]  # no session known

    with api_deps.db.transaction() as conn:
        user_store.upsert_session(conn, a.user_id, "glasses-1", started_at=AT)
    r = client.post(f"{url}/pause", json={"at": AT.isoformat()}, headers=a.headers)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "user_id": a.user_id, "session_id": "glasses-1", "event": "pause",
        "at": AT.isoformat().replace("+00:00", "Z"),
    }  # fmt: skip
    later = AT + timedelta(minutes=10)
    body = {"session_id": "glasses-1", "at": later.isoformat()}
    r = client.post(f"{url}/resume", json=body, headers=a.headers)
    assert r.status_code == 200 and r.json()["event"] == "resume"

    got = control_records(api_settings, a.user_id)
    assert [(m.event, m.session_id, m.ts) for m in got] == [
        ("pause", "glasses-1", AT),
        ("resume", "glasses-1", later),
    ]
    assert json.loads(codec.encode(got[0])[1]) == {"event": "pause"}

    # another user's key cannot pause a; bad input is a 422
    assert client.post(f"{url}/pause", json={}, headers=b.headers).status_code == 403
    bad = client.post(f"{url}/pause", json={"at": "2026-03-20T09:30"}, headers=a.headers)
    assert bad.status_code == 422
    bad = client.post(f"{url}/pause", json={"session": "x"}, headers=a.headers)
    assert bad.status_code == 422


def test_a_pause_the_flow_would_drop_is_422_with_the_limit(
    client, api_deps, api_settings, make_user
):
    """20 minutes ahead (the flow takes 5), or older than the flow's past limit: refused with
    the limit named, and nothing is sent (the flow would drop it while recording went on)."""
    create_topics(api_settings.kafka_brokers, api_settings)
    a = make_user()
    with api_deps.db.transaction() as conn:
        user_store.upsert_session(conn, a.user_id, "glasses-1", started_at=AT)
    now = datetime.now(UTC)
    skew, past = api_settings.max_future_skew_s, api_settings.max_past_age_s
    for route, at, limit in (
        ("pause", now + timedelta(minutes=20), f"at most {skew:.0f} s ahead"),
        ("resume", now + timedelta(minutes=20), f"at most {skew:.0f} s ahead"),
        ("pause", now - timedelta(seconds=past + 3600), f"at most {past:.0f} s old"),
    ):
        body = {"session_id": "glasses-1", "at": at.isoformat()}
        r = client.post(f"/v1/users/{a.user_id}/{route}", json=body, headers=a.headers)
        assert r.status_code == 422, (route, at, r.text)
        assert limit in r.json()["detail"]
    # just inside the future limit still goes
    at = now + timedelta(seconds=skew - 60)
    body = {"session_id": "glasses-1", "at": at.isoformat()}
    r = client.post(f"/v1/users/{a.user_id}/pause", json=body, headers=a.headers)
    assert r.status_code == 200, r.text
    assert [m.event for m in control_records(api_settings, a.user_id)] == ["pause"]
