"""Retry decisions, without a server: 429/503 only, Retry-After honoured and capped, backoff
otherwise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx

from apps.client.retry import RetryPolicy, send_with_retry
from worldmm.retry import parse_retry_after

NOW = datetime(2026, 11, 24, 22, 0, tzinfo=UTC)


def test_retry_after_seconds_and_http_date():
    assert parse_retry_after("7") == 7.0
    later = format_datetime(NOW + timedelta(seconds=12), usegmt=True)
    assert parse_retry_after(later, now=NOW) == 12.0
    past = format_datetime(NOW - timedelta(seconds=5), usegmt=True)
    assert parse_retry_after(past, now=NOW) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def waits(policy: RetryPolicy, replies: list[tuple[int, str | None]]) -> tuple[list[float], int]:
    """The waits before each retry, and the status the client ends on, for scripted replies
    of (status, Retry-After)."""
    answers = iter(replies)
    slept: list[float] = []

    def send() -> httpx.Response:
        status, retry_after = next(answers)
        return httpx.Response(status, headers={"retry-after": retry_after} if retry_after else {})

    return slept, send_with_retry(send, policy, slept.append).status_code


def test_policy_retries_only_429_and_503_and_stops_after_max():
    policy = RetryPolicy(max_retries=2, backoff_s=0.5, max_delay_s=10)
    assert waits(policy, [(429, "3"), (200, None)]) == ([3.0], 200)
    assert waits(policy, [(503, None)] * 3) == ([0.5, 1.0], 503)  # then retries are spent
    assert waits(policy, [(500, "1")]) == ([], 500)
    assert waits(policy, [(502, None)]) == ([], 502)
    assert waits(policy, [(200, None)]) == ([], 200)
    assert waits(policy, [(429, "3600"), (200, None)]) == ([10], 200)  # capped
