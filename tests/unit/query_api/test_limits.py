"""The rate limiter's arithmetic (GCRA) and the database-outage helper, without servers."""

from __future__ import annotations

import psycopg
import pytest

from query_api.limits import AuthFailures, LocalBuckets, gcra
from worldmm.retry import RetryPolicy
from worldmm.store.outage import is_db_unavailable, retry_while_down


def test_gcra_allows_a_burst_of_limit_then_one_per_interval():
    interval, window = 60_000 / 3, 60_000.0  # 3 a minute
    tat, now, allowed = None, 0.0, []
    for _ in range(4):
        ok, retry, tat = gcra(tat, now, interval, window)
        allowed.append(ok)
    assert allowed == [True, True, True, False]
    assert retry == pytest.approx(interval)  # the 4th may come one interval later
    ok, _, tat = gcra(tat, now + interval, interval, window)
    assert ok
    ok, retry, _ = gcra(tat, now + interval, interval, window)
    assert not ok and retry == pytest.approx(interval)


def test_local_buckets_are_per_key():
    b = LocalBuckets()
    assert [b.take("a", 30_000, 60_000)[0] for _ in range(3)] == [True, True, False]
    assert b.take("b", 30_000, 60_000)[0]


def test_outage_errors_are_retried_other_errors_are_not():
    calls, slept = [], []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise psycopg.OperationalError("connection refused")
        return "ok"

    assert retry_while_down(flaky, what="t", sleep=slept.append) == "ok"
    assert slept == [0.25, 0.5]
    assert is_db_unavailable(psycopg.OperationalError()) and not is_db_unavailable(
        psycopg.errors.UniqueViolation()
    )
    with pytest.raises(psycopg.errors.UniqueViolation):
        retry_while_down(lambda: (_ for _ in ()).throw(psycopg.errors.UniqueViolation()), what="t")
    assert RetryPolicy(backoff_s=1, max_delay_s=4).delay(10) == 4


def test_failed_logins_are_counted_per_address_and_per_user_checked_before_spending():
    """Without Redis each process keeps the budgets itself: ``check`` only looks, ``failed``
    spends one from the address's and the user's budgets."""
    f = AuthFailures(per_address=2, per_user=3, client=None)
    assert f.check("198.51.100.1", "alice").allowed
    f.failed("198.51.100.1", "alice")
    f.failed("198.51.100.1", "alice")
    refused = f.check("198.51.100.1", "bob")  # the address is spent, whoever is tried
    assert not refused.allowed and 1 <= refused.retry_after_s <= 60
    assert f.check("198.51.100.2", "bob").allowed
    f.failed("198.51.100.2", "alice")  # alice's third failure, from another address
    assert not f.check("198.51.100.3", "alice").allowed  # alice is held from anywhere
    assert f.check("198.51.100.3", "carol").allowed
    assert AuthFailures(0, 0, None).check("198.51.100.1", "alice").allowed  # both off


def test_looking_at_a_bucket_spends_nothing():
    b = LocalBuckets()
    assert all(b.look("a", 30_000, 60_000)[0] for _ in range(5))
    assert [b.take("a", 30_000, 60_000)[0] for _ in range(3)] == [True, True, False]
    assert not b.look("a", 30_000, 60_000)[0]
