"""Pooled connections plan each search for its own parameters (no generic plans), and leave
PostgreSQL's own plan cache, the foreign-key checks' among it, to choose."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from tests.fixtures.store import T0
from worldmm.store import segment_search as ss
from worldmm.store.distribute import is_citus
from worldmm.store.users import ensure_user

pytestmark = pytest.mark.integration

INSERT_SEGMENT = (
    "INSERT INTO segments (user_id, scale_seconds, window_start, window_end, parent_segment_id)"
    " VALUES (%s, %s, %s, %s, %s) RETURNING id"
)


def test_searches_are_never_prepared_generically(db, user_id) -> None:
    with db.connection() as conn:
        for _ in range(8):  # past psycopg's default prepare threshold (5)
            ss.first_segment_start(conn, user_id)
        # a statement prepared on the server may be planned once, without the user: blind to
        # the wearer's partition (a 4-week clip search went from 11 ms to 210 p50)
        prepared = conn.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE cardinality(parameter_types) > 0"
        ).fetchone()[0]
        assert prepared == 0


def test_a_new_wearers_key_checks_use_the_key(db) -> None:
    with db.connection() as conn:
        if is_citus(conn):
            pytest.skip("the key checks run on the workers, where their plans are their own")
    """A new wearer is missing from the statistics, so a plan made for its user id finds any
    index on ``user_id`` as good as the key, and the check of each 30 s window's parent then
    scanned all of the wearer's windows (a 12-week bench load ran for hours, not 24 s). The
    checks keep PostgreSQL's choice: custom plans five times, then the generic one by key."""
    known, new = (f"user-{uuid.uuid4().hex[:12]}" for _ in range(2))
    with db.connection() as conn:
        ensure_user(conn, known)
        conn.execute(  # enough rows that a check by key beats reading the table
            "INSERT INTO segments (user_id, scale_seconds, window_start, window_end)"
            " SELECT %s, 30, t, t + interval '30 s'"
            " FROM generate_series(%s::timestamptz, %s, interval '30 s') AS t",
            (known, T0, T0 + timedelta(seconds=30 * 4999)),
        )
        conn.commit()
        conn.execute("ANALYZE segments")
        ensure_user(conn, new)
        parent = conn.execute(
            INSERT_SEGMENT, (new, 180, T0, T0 + timedelta(minutes=3), None)
        ).fetchone()[0]
        for i in range(40):
            start = T0 + timedelta(seconds=30 * i)
            conn.execute(INSERT_SEGMENT, (new, 30, start, start + timedelta(seconds=30), parent))
        scans = dict(
            conn.execute(
                "SELECT c.relname, pg_stat_get_xact_numscans(c.oid) FROM pg_index i"
                " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'segments'::regclass"
            ).fetchall()
        )
        conn.rollback()
    by_key = scans["segments_user_id_key"]  # the key every reference uses (schema/0019)
    assert by_key >= 30, scans  # 40 checks of the parent, at most the first few not by key
