"""PostgreSQL advisory locks: what several processes (dataflow workers, API processes) must
not do at once, serialised by the database they share instead of by any one process.

Transaction-scoped (``pg_advisory_xact_lock``): released by the commit or rollback, so no path
(an exception, a killed process, a dropped connection) can leave one held. Two ``int4`` keys:
a space per purpose (below) and the hash of the user id. Two users whose ids share a hash
only queue behind each other; nothing is wrong, just slower for that pair.
"""

from __future__ import annotations

import psycopg

CONSOLIDATION = 0x574D0001  # "WM" + 1: semantic consolidation of one user


def lock_consolidation(conn: psycopg.Connection, user_id: str) -> None:
    """Hold the user's consolidation lock until this transaction ends (waiting for it while
    another transaction holds it). Must be called inside a transaction."""
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        raise RuntimeError("an advisory transaction lock needs an open transaction")
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (CONSOLIDATION, user_id))
