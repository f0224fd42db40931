"""Exports cannot hold the service: each reads on a connection of its own (never the request
pool's) with statement and idle timeouts, and only so many stream at once, per key and in all;
one more is a 429 with Retry-After, at once (issue #42)."""

from __future__ import annotations

import time

import httpx
import psycopg
import pytest

from tests.fixtures.api import auth
from worldmm.store.users import create_user

STATEMENT_TIMEOUT_S = 6.0
pytestmark = [
    pytest.mark.integration,
    pytest.mark.served_settings(
        api_export_concurrency=2,
        api_export_per_key=1,
        api_export_statement_timeout_s=STATEMENT_TIMEOUT_S,
    ),
]


def _user(served, name: str) -> tuple[str, dict[str, str]]:
    user_id = f"{name}-{time.monotonic_ns() % 10**9}"
    with served.deps.db.transaction() as conn:
        key = create_user(conn, user_id)
    return user_id, auth(key)


def _exports_waiting(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'worldmm-export'"
            " AND wait_event_type = 'Lock'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_exports_are_limited_per_key_and_in_all_on_their_own_connections(served):
    url = served.settings.database_url
    (a, a_key), (b, b_key), (c, c_key) = (_user(served, n) for n in ("exp-a", "exp-b", "exp-c"))
    pool = served.deps.db.pool
    with (
        psycopg.connect(url) as blocker,
        httpx.Client(base_url=served.url, timeout=15) as http,
    ):
        # every export now waits at its read of segments: a slow export, held open
        blocker.execute("LOCK TABLE segments IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        with http.stream("GET", f"/v1/users/{a}/export", headers=a_key) as first:
            assert first.status_code == 200
            again = http.get(f"/v1/users/{a}/export", headers=a_key)
            assert again.status_code == 429, again.text
            assert "of this key" in again.json()["detail"] and int(again.headers["Retry-After"])
            with http.stream("GET", f"/v1/users/{b}/export", headers=b_key) as second:
                assert second.status_code == 200
                third = http.get(f"/v1/users/{c}/export", headers=c_key)
                assert third.status_code == 429 and "2 exports" in third.json()["detail"]
                # both wait on connections of their own; the request pool is untouched
                deadline = time.monotonic() + 3
                while _exports_waiting(url) < 2 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert _exports_waiting(url) == 2
                assert (
                    pool.get_stats().get("pool_size", 0) - pool.get_stats().get("pool_available", 0)
                    <= 1
                )  # at most this very check's neighbour in use
                assert http.get(f"/v1/users/{c}", headers=c_key).status_code == 200
                assert time.monotonic() - started < STATEMENT_TIMEOUT_S  # all that, at once
                # the statement timeout ends each held read: the archive is cut off
                with pytest.raises(httpx.HTTPError):
                    second.read()
            with pytest.raises(httpx.HTTPError):
                first.read()
        blocker.rollback()
        # both slots are free again, and an export runs to its end
        done = http.get(f"/v1/users/{a}/export", headers=a_key)
        assert done.status_code == 200 and done.content[:2] == b"\x1f\x8b"
        assert http.get(f"/v1/users/{c}/export", headers=c_key).status_code == 200


def test_an_export_connection_gives_up_a_reader_that_stalls(served):
    """The idle timeout: a transaction left waiting on its caller is ended by the server."""
    connection = served.deps.db.dedicated(statement_timeout_s=1.5, idle_timeout_s=1)
    with pytest.raises(psycopg.Error, match="idle-in-transaction"), connection as conn:
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "1500ms"
        assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "1s"
        time.sleep(1.5)
        conn.execute("SELECT 1")
