"""The two bugs found by hand (#17): a NUL in a note answered 500, a mangled cursor 200."""

from __future__ import annotations

import base64
import json

import pytest

from tests.fixtures.wearers import seed_segment

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("text", ["a\u0000b", "\u0000", "ok \ud800 not"])
def test_note_with_unstorable_text_is_422(client, make_user, text):
    u = make_user()
    r = client.post(
        f"/v1/users/{u.user_id}/memories",
        content=json.dumps({"text": text}),  # json.dumps keeps the lone surrogate escaped
        headers={**u.headers, "Content-Type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert "text" in r.json()["detail"]
    segs = client.get(f"/v1/users/{u.user_id}/segments", headers=u.headers).json()["items"]
    assert segs == []  # nothing half-written


def test_question_with_nul_is_422(client, make_user):
    u = make_user()
    r = client.post(
        f"/v1/users/{u.user_id}/query", json={"question": "where\u0000?"}, headers=u.headers
    )
    assert r.status_code == 422 and "question" in r.json()["detail"]


def _b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


def test_malformed_cursor_is_422_and_a_good_one_pages(client, api_deps, make_user):
    from datetime import UTC, datetime, timedelta

    u = make_user()
    t0 = datetime(2025, 4, 1, 9, 0, tzinfo=UTC)
    for i in range(3):
        start = t0 + timedelta(seconds=30 * i)
        seed_segment(api_deps, u.user_id, start, f"seg {i}")
    base = f"/v1/users/{u.user_id}/segments"
    first = client.get(base, params={"limit": 1}, headers=u.headers).json()
    good = first["next_cursor"]
    assert good
    page2 = client.get(base, params={"limit": 1, "cursor": good}, headers=u.headers)
    assert page2.status_code == 200 and page2.json()["items"][0]["caption"] == "seg 1"
    bad = [
        "abc",
        good + "!!",  # stray characters that lenient base64 used to skip
        good + "A",
        _b64(["2025-04-01T09:00:00+00:00", True]),  # a bool is not a key
        _b64(["2025-04-01T09:00:00+00:00", 2**70]),  # beyond bigint (was a 500)
        _b64(["2025-04-01T09:00:00", 30]),  # no zone
        _b64({"ts": 1}),
    ]
    for path in (base, f"/v1/users/{u.user_id}/frames"):
        for cursor in bad:
            r = client.get(path, params={"cursor": cursor}, headers=u.headers)
            assert r.status_code == 422, (path, cursor, r.text)
            assert "cursor" in r.json()["detail"]
