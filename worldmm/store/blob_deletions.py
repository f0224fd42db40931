"""The queue of blobs the store must lose (schema/0022), and the capture rows a container's
rewrite re-points.

A forget or a purge deletes rows and queues the blobs they pointed at in one transaction;
the blobs are deleted after the commit and their queue rows removed once the blob store
confirms, so an outage of the store delays a deletion, never loses it
(:mod:`worldmm.privacy.forget_media` works the queue).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import psycopg

from worldmm.store.distribute import spans_wearers

Kind = Literal["object", "container", "prefix"]


@dataclass(frozen=True)
class Deletion:
    user_id: str
    key: str
    kind: Kind
    attempts: int = 0


def enqueue(conn: psycopg.Connection, user_id: str, keys: Iterable[tuple[str, Kind]]) -> int:
    """Queue ``(key, kind)`` pairs of the user (a key queued already stays once)."""
    rows = [(user_id, key, kind) for key, kind in keys]
    if not rows:
        return 0
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO blob_deletions (user_id, blob_key, kind) VALUES (%s, %s, %s)"
            " ON CONFLICT (user_id, blob_key) DO NOTHING",
            rows,
        )
    return len(rows)


def pending(conn: psycopg.Connection, user_id: str, limit: int = 1000) -> list[Deletion]:
    rows = conn.execute(
        "SELECT user_id, blob_key, kind, attempts FROM blob_deletions WHERE user_id = %s"
        " ORDER BY enqueued_at, blob_key LIMIT %s",
        (user_id, limit),
    ).fetchall()
    return [Deletion(*r) for r in rows]


def waiting_users(conn: psycopg.Connection, limit: int = 100) -> list[str]:
    """Users with deletions queued (a sweep over every wearer's rows, on purpose)."""
    spans_wearers(conn)
    rows = conn.execute(
        "SELECT DISTINCT user_id FROM blob_deletions ORDER BY user_id LIMIT %s", (limit,)
    ).fetchall()
    return [r[0] for r in rows]


def done(conn: psycopg.Connection, user_id: str, key: str) -> None:
    conn.execute("DELETE FROM blob_deletions WHERE user_id = %s AND blob_key = %s", (user_id, key))


def failed(conn: psycopg.Connection, user_id: str, key: str, error: str) -> None:
    conn.execute(
        "UPDATE blob_deletions SET attempts = attempts + 1, last_error = %s"
        " WHERE user_id = %s AND blob_key = %s",
        (error[:2000], user_id, key),
    )


# --- the rows a container's captures have ---------------------------------------------------


def container_rows(
    conn: psycopg.Connection, user_id: str, media_key: str, lo: datetime, hi: datetime
) -> set[str]:
    """Blob keys of the user's frame and audio rows that point into ``media_key`` (rows of
    its window's span [lo, hi) only: the time indexes bound the look-up)."""
    rows = conn.execute(
        "SELECT blob_key FROM frames WHERE user_id = %s AND captured_at >= %s"
        " AND captured_at < %s AND media_key = %s"
        " UNION SELECT blob_key FROM audio_chunks WHERE user_id = %s AND started_at >= %s"
        " AND started_at < %s AND media_key = %s",
        (user_id, lo, hi, media_key, user_id, lo, hi, media_key),
    ).fetchall()
    return {r[0] for r in rows}


def capture_rows_exist(conn: psycopg.Connection, user_id: str, blob_key: str) -> bool:
    """A frame or audio row of the user still names this capture (stored alone)."""
    row = conn.execute(
        "SELECT 1 FROM frames WHERE user_id = %s AND blob_key = %s AND media_key IS NULL"
        " UNION ALL SELECT 1 FROM audio_chunks WHERE user_id = %s AND blob_key = %s"
        " AND media_key IS NULL LIMIT 1",
        (user_id, blob_key, user_id, blob_key),
    ).fetchone()
    return row is not None


def repoint(
    conn: psycopg.Connection,
    user_id: str,
    old_key: str,
    refs: dict[str, tuple[str, int, int]],
) -> int:
    """Point the rows of ``refs`` (blob key → new container key, offset, length) that still
    point into ``old_key`` at the new container; returns the rows changed."""
    changed = 0
    for table in ("frames", "audio_chunks"):
        with conn.cursor() as cur:
            cur.executemany(
                f"UPDATE {table} SET media_key = %s, media_offset = %s, media_length = %s"
                " WHERE user_id = %s AND blob_key = %s AND media_key = %s",
                [(k, off, n, user_id, blob, old_key) for blob, (k, off, n) in refs.items()],
            )
            changed += max(cur.rowcount, 0)
    return changed
