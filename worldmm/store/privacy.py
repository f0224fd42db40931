"""Privacy rows: which users' media expire, the raw media (frame and audio rows) that
retention expires, and privacy pauses. A user's own retention and face-blur choice are
fields of their profile (worldmm.store.users)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import psycopg

from worldmm.store._sql import fetch_count
from worldmm.store.distribute import spans_wearers

MediaTable = Literal["frames", "audio_chunks"]
# when a capture ends: retention expires a capture once all of it is older than the cutoff
_MEDIA_END = {
    "frames": "captured_at",
    "audio_chunks": "started_at + duration_ms * interval '1 millisecond'",
}


def retention_days_of(conn: psycopg.Connection, default_days: int | None) -> dict[str, int]:
    """Every user whose media expire, with their retention in days (a user's own value wins
    over ``default_days``; users with neither keep their media)."""
    spans_wearers(conn)  # the retention sweep reads every wearer's setting
    rows = conn.execute(
        "SELECT id, coalesce(retention_days, %s) FROM users"
        " WHERE coalesce(retention_days, %s) IS NOT NULL ORDER BY id",
        (default_days, default_days),
    ).fetchall()
    return {user: int(days) for user, days in rows}


@dataclass(frozen=True)
class MediaRow:
    table: MediaTable
    id: int
    blob_key: str
    media_key: str | None  # the window container holding it; None: the blob under blob_key


def expired_media(
    conn: psycopg.Connection, table: MediaTable, user_id: str, cutoff: datetime, limit: int
) -> list[MediaRow]:
    """The user's oldest ``limit`` captures of ``table`` that ended before ``cutoff``."""
    end = _MEDIA_END[table]
    rows = conn.execute(
        f"SELECT id, blob_key, media_key FROM {table} WHERE user_id = %s AND {end} < %s"
        " ORDER BY id LIMIT %s",
        (user_id, cutoff, limit),
    ).fetchall()
    return [MediaRow(table, int(i), k, m) for i, k, m in rows]


def count_expired_media(
    conn: psycopg.Connection, table: MediaTable, user_id: str, cutoff: datetime
) -> int:
    return fetch_count(
        conn,
        f"SELECT count(*) FROM {table} WHERE user_id = %s AND {_MEDIA_END[table]} < %s",
        (user_id, cutoff),
    )


def delete_media_rows(
    conn: psycopg.Connection, table: MediaTable, user_id: str, ids: list[int]
) -> int:
    if table not in _MEDIA_END:
        raise ValueError(f"not a media table: {table!r}")
    return conn.execute(
        f"DELETE FROM {table} WHERE user_id = %s AND id = ANY(%s)", (user_id, ids)
    ).rowcount


# --- pauses ------------------------------------------------------------------------------


def record_pause(
    conn: psycopg.Connection, user_id: str, session_id: str, started_at: datetime
) -> None:
    """A pause began (idempotent: the same record read twice is one pause)."""
    conn.execute("INSERT INTO users (id) VALUES (%s) ON CONFLICT (id) DO NOTHING", (user_id,))
    conn.execute(
        "INSERT INTO privacy_pauses (user_id, session_id, started_at) VALUES (%s, %s, %s)"
        " ON CONFLICT (user_id, started_at) DO NOTHING",
        (user_id, session_id, started_at),
    )


def end_pauses(conn: psycopg.Connection, user_id: str, session_id: str, at: datetime) -> int:
    """Close the session's open pauses that began at or before ``at`` (a resume, or the
    session's end); returns how many were open."""
    return conn.execute(
        "UPDATE privacy_pauses SET ended_at = %s WHERE user_id = %s AND session_id = %s"
        " AND ended_at IS NULL AND started_at <= %s",
        (at, user_id, session_id, at),
    ).rowcount


def latest_session(conn: psycopg.Connection, user_id: str) -> str | None:
    """The user's most recent capture session (what a pause without a session applies to)."""
    row = conn.execute(
        "SELECT session_id FROM sessions WHERE user_id = %s"
        " ORDER BY coalesce(started_at, created_at) DESC, created_at DESC LIMIT 1",
        (user_id,),
    ).fetchone()
    return None if row is None else str(row[0])
