"""The client against a fake API on a real socket: typed replies, the request it sends,
retries on 429/503 with Retry-After (waits recorded, not slept), typed errors."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime

import pytest

from apps.client import (
    ApiConnectionError,
    AsyncWorldMMClient,
    AuthError,
    InvalidRequestError,
    RetryPolicy,
    UnavailableError,
    WorldMMClient,
)
from tests.fixtures.fake_query_api import fake_api
from worldmm.wire.schemas import QueryResponse, SegmentOut

KEY = "wmm_test-key-123"
REPLY = {
    "answer": "In the drawer.",
    "provider": "offline",
    "as_of": None,
    "stopped": "answer",
    "rounds": [],
    "evidence": [
        {
            "segment_id": 3,
            "scale": 30,
            "start": "2026-11-24T10:00:00Z",
            "end": "2026-11-24T10:00:30Z",
            "text": "keys in the drawer",
        }
    ],
    "triples": [],
    "frames": [],
}


def _segment(i: int) -> dict:
    return {
        "id": i,
        "scale": 30,
        "start": f"2026-11-24T10:0{i}:00Z",
        "end": f"2026-11-24T10:0{i}:30Z",
        "partial": False,
        "processing_status": "complete",
        "visual_status": "done",
        "note": False,
    }


def test_query_is_typed_and_sends_choices_as_of_and_the_key_in_a_header():
    with fake_api([(200, {}, REPLY)]) as (url, script), WorldMMClient(url, KEY, "alice") as mm:
        when = datetime(2026, 11, 24, 12, tzinfo=UTC)
        reply = mm.query("Where are my keys?", choices=["drawer", "car"], as_of=when)
    assert isinstance(reply, QueryResponse)
    assert reply.evidence[0].segment_id == 3
    (seen,) = script.seen
    assert (seen.method, seen.path) == ("POST", "/v1/users/alice/query")
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.body == {
        "question": "Where are my keys?",
        "choices": ["drawer", "car"],
        "as_of": "2026-11-24T12:00:00Z",
    }
    assert KEY not in seen.path


def test_429_and_503_are_retried_after_retry_after():
    waits: list[float] = []
    replies = [
        (429, {"retry-after": "2"}, {"detail": "slow down"}),
        (503, {}, {"detail": "busy"}),
        (200, {}, REPLY),
    ]
    with fake_api(replies) as (url, script):
        policy = RetryPolicy(max_retries=3, backoff_s=0.25)
        with WorldMMClient(url, KEY, "alice", retry=policy, sleep=waits.append) as mm:
            assert mm.query("Where are my keys?").answer == "In the drawer."
    assert waits == [2.0, 0.5]  # the second wait is backoff: 0.25 s doubled once
    assert len(script.seen) == 3


def test_retries_run_out_into_a_typed_error_with_the_api_message():
    waits: list[float] = []
    replies = [(503, {"retry-after": "1"}, {"detail": "database not ready"})] * 3
    with fake_api(replies) as (url, _):
        policy = RetryPolicy(max_retries=2)
        mm = WorldMMClient(url, KEY, "alice", retry=policy, sleep=waits.append)
        with mm, pytest.raises(UnavailableError) as err:
            mm.segments()
    assert err.value.status == 503 and err.value.detail == "database not ready"
    assert waits == [1.0, 1.0]


def test_errors_are_typed_and_not_retried():
    replies = [
        (401, {}, {"detail": "invalid API key"}),
        (422, {}, {"detail": "scale: must be one of 30, 180"}),
    ]
    with fake_api(replies) as (url, script), WorldMMClient(url, KEY, "alice") as mm:
        with pytest.raises(AuthError, match="invalid API key"):
            mm.segment(1)
        with pytest.raises(InvalidRequestError, match="scale"):
            mm.segments(scale=31)
    assert [s.path for s in script.seen] == [
        "/v1/users/alice/segments/1",
        "/v1/users/alice/segments?scale=31",
    ]


def test_bad_input_is_refused_before_sending():
    with WorldMMClient("http://127.0.0.1:9", KEY, "alice") as mm:
        with pytest.raises(ValueError, match="question"):
            mm.query("   ")
        with pytest.raises(ValueError, match="before"):
            t = datetime(2026, 1, 1, tzinfo=UTC)
            mm.forget(t, t)


def test_unreachable_api_is_a_connection_error():
    mm = WorldMMClient("http://127.0.0.1:9", KEY, "alice", timeout_s=2)
    with mm, pytest.raises(ApiConnectionError, match="cannot reach"):
        mm.health()


def test_user_comes_from_whoami_and_repr_hides_the_key():
    replies = [(200, {}, {"user_id": "bob", "admin": False}), (200, {}, {"status": "ok"})]
    with fake_api(replies) as (url, script), WorldMMClient(url, KEY) as mm:
        assert mm.user_id == "bob"
        assert mm.user_id == "bob"  # asked once
        assert KEY not in repr(mm)
    assert [s.path for s in script.seen] == ["/v1/whoami"]


async def test_async_client_pages_through_segments_and_retries():
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    replies = [
        (200, {}, {"user_id": "carol", "admin": False}),
        (200, {}, {"items": [_segment(1), _segment(2)], "next_cursor": "abc"}),
        (429, {"retry-after": "5"}, {"detail": "rate limited"}),
        (200, {}, {"items": [_segment(3)], "next_cursor": None}),
    ]
    with fake_api(replies) as (url, script):
        async with AsyncWorldMMClient(url, KEY, sleep=sleep) as mm:
            got = [s async for s in mm.iter_segments(scale=30, limit=2)]
    assert all(isinstance(s, SegmentOut) for s in got)
    assert [s.id for s in got] == [1, 2, 3]
    assert waits == [5.0]
    assert script.seen[-1].path == "/v1/users/carol/segments?scale=30&limit=2&cursor=abc"


def test_both_clients_offer_every_call_with_one_signature():
    sync = WorldMMClient("http://127.0.0.1:9", KEY, "alice")
    aio = AsyncWorldMMClient("http://127.0.0.1:9", KEY, "alice")
    shared = {n for n in dir(WorldMMClient) if not n.startswith("_")} & set(dir(aio))
    calls = shared - {"send"}
    assert {"query", "iter_segments", "forget", "purge_user"} <= calls
    for name in calls:
        blocking, awaited = getattr(sync, name), getattr(aio, name)
        assert inspect.signature(blocking) == inspect.signature(awaited), name
        assert awaited.__doc__ and awaited.__doc__ == blocking.__doc__, name
        if name == "iter_segments":
            assert inspect.isgeneratorfunction(blocking) and inspect.isasyncgenfunction(awaited)
        else:
            assert inspect.iscoroutinefunction(awaited), name
            assert not inspect.iscoroutinefunction(blocking), name
    query = inspect.signature(sync.query)
    assert list(query.parameters) == ["question", "choices", "as_of", "max_rounds"]
    assert query.return_annotation is QueryResponse


def test_iter_segments_can_start_from_a_cursor():
    page = {"items": [_segment(4)], "next_cursor": None}
    with fake_api([(200, {}, page)]) as (url, script), WorldMMClient(url, KEY, "alice") as mm:
        assert [s.id for s in mm.iter_segments(scale=30, cursor="abc")] == [4]
    assert [s.path for s in script.seen] == ["/v1/users/alice/segments?scale=30&cursor=abc"]
