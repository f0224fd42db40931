"""A wearer's forgotten ranges (schema/0022), and the lock that keeps a forget and the writes
of that wearer's memory apart.

A forget holds the user's forget lock exclusively while it records its range and deletes
the rows; every write that could bring forgotten captures back (a window's captures and
segment, a summary, a late capture) holds it shared in its transaction and first checks
the ranges recorded since it read them. So either the write commits first (and the forget
deletes what it wrote) or the forget does (and the write sees the range): nothing written
during a forget survives it. Transaction-scoped, like every advisory lock here
(worldmm/store/locks.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import psycopg

FORGET = 0x574D0002  # "WM" + 2: a wearer's forget against writes of their memory


@dataclass(frozen=True)
class ForgottenRange:
    id: int
    start: datetime
    end: datetime

    def overlaps(self, start: datetime, end: datetime) -> bool:
        return self.start < end and start < self.end


def lock_forget(conn: psycopg.Connection, user_id: str, *, exclusive: bool) -> None:
    """Hold the user's forget lock until the transaction ends: exclusive for a forget,
    shared for a write that checks the ranges."""
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        raise RuntimeError("an advisory transaction lock needs an open transaction")
    fn = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    conn.execute(f"SELECT {fn}(%s, hashtext(%s))", (FORGET, user_id))


def record_forgotten(
    conn: psycopg.Connection, user_id: str, start: datetime, end: datetime
) -> ForgottenRange:
    row = conn.execute(
        "INSERT INTO forgotten_ranges (user_id, range_start, range_end) VALUES (%s, %s, %s)"
        " RETURNING id, range_start, range_end",
        (user_id, start, end),
    ).fetchone()
    assert row is not None
    return ForgottenRange(*row)


def forgotten_within(
    conn: psycopg.Connection, user_id: str, start: datetime, end: datetime, *, after_id: int = 0
) -> list[ForgottenRange]:
    """The user's ranges overlapping [start, end), those recorded after ``after_id`` only."""
    rows = conn.execute(
        "SELECT id, range_start, range_end FROM forgotten_ranges WHERE user_id = %s"
        " AND range_start < %s AND range_end > %s AND id > %s ORDER BY id",
        (user_id, end, start, after_id),
    ).fetchall()
    return [ForgottenRange(*r) for r in rows]


def last_forgotten_id(conn: psycopg.Connection, user_id: str) -> int:
    """The newest range's id (0: the user forgot nothing yet)."""
    row = conn.execute(
        "SELECT coalesce(max(id), 0) FROM forgotten_ranges WHERE user_id = %s", (user_id,)
    ).fetchone()
    return int(row[0]) if row else 0
