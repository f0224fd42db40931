"""The memory browser's sessions: an opaque random id per login (only its hash is stored),
tied to the API key it was opened with, with its own CSRF token and an expiry. A session is
valid only while its key is active (the lookup joins the key's row): revoking the key ends
every session opened with it. Table: schema/0023.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

import psycopg


@dataclass(frozen=True)
class UiSession:
    user_id: str
    key_id: int
    key_hash: str  # the key's stored hash: its rate-limit budget is the key's own
    csrf_token: str


def _hash(session_id: str) -> str:
    return "sha256:" + hashlib.sha256(session_id.encode()).hexdigest()


def open_session(
    conn: psycopg.Connection, user_id: str, key_id: int, lifetime: timedelta
) -> tuple[str, str]:
    """A new session for ``user_id`` logged in with key ``key_id``: (session id for the
    cookie, its CSRF token). The user's expired sessions are dropped on the way."""
    conn.execute("DELETE FROM ui_sessions WHERE user_id = %s AND expires_at <= now()", (user_id,))
    session_id, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    conn.execute(
        "INSERT INTO ui_sessions (user_id, id_hash, key_id, csrf_token, expires_at)"
        " VALUES (%s, %s, %s, %s, now() + %s)",
        (user_id, _hash(session_id), key_id, csrf, lifetime),
    )
    return session_id, csrf


def find_session(conn: psycopg.Connection, session_id: str) -> UiSession | None:
    """The live session behind a cookie: known, not expired, its key not revoked."""
    row = conn.execute(
        "SELECT s.user_id, s.key_id, k.key_hash, s.csrf_token FROM ui_sessions s"
        " JOIN api_keys k ON k.user_id = s.user_id AND k.id = s.key_id"
        " WHERE s.id_hash = %s AND s.expires_at > now() AND k.revoked_at IS NULL",
        (_hash(session_id),),
    ).fetchone()
    return UiSession(str(row[0]), int(row[1]), str(row[2]), str(row[3])) if row else None


def close_session(conn: psycopg.Connection, user_id: str, session_id: str) -> None:
    conn.execute(
        "DELETE FROM ui_sessions WHERE user_id = %s AND id_hash = %s",
        (user_id, _hash(session_id)),
    )
