"""Retry decisions (pure): 429/503 only, Retry-After honoured and capped, backoff otherwise."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from apps.client.retry import RetryPolicy, parse_retry_after

NOW = datetime(2026, 11, 24, 22, 0, tzinfo=UTC)


def test_retry_after_seconds_and_http_date():
    assert parse_retry_after("7") == 7.0
    later = format_datetime(NOW + timedelta(seconds=12), usegmt=True)
    assert parse_retry_after(later, now=NOW) == 12.0
    past = format_datetime(NOW - timedelta(seconds=5), usegmt=True)
    assert parse_retry_after(past, now=NOW) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_policy_retries_only_429_and_503_and_stops_after_max():
    policy = RetryPolicy(max_retries=2, backoff_s=0.5, max_delay_s=10)
    assert policy.delay(429, "3", 0) == 3.0
    assert policy.delay(503, None, 0) == 0.5
    assert policy.delay(503, None, 1) == 1.0
    assert policy.delay(503, None, 2) is None  # retries spent
    assert policy.delay(500, "1", 0) is None
    assert policy.delay(502, None, 0) is None
    assert policy.delay(200, None, 0) is None
    assert policy.delay(429, "3600", 0) == 10  # capped
