"""Users, their API keys (only a hash is stored) and sessions."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

import psycopg

from worldmm.store.errors import AlreadyExistsError, NotFoundError

_KEY_PREFIX = "wmm_"
_HASH_SCHEME = "sha256"


def new_api_key() -> str:
    """A random API key (256 bits). Shown once; only its hash is kept."""
    return _KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    """'sha256:<hex>'. Keys are long random tokens, so a fast hash is enough (no guessing)."""
    return f"{_HASH_SCHEME}:{hashlib.sha256(key.encode()).hexdigest()}"


def create_user(conn: psycopg.Connection, user_id: str) -> str:
    """Create a user with a fresh API key and return the key; AlreadyExistsError if the user
    has one. A user that ingest created without a key gets one here."""
    key = new_api_key()
    row = conn.execute(
        "INSERT INTO users (id, api_key_hash, api_key_rotated_at) VALUES (%s, %s, now())"
        " ON CONFLICT (id) DO UPDATE"
        " SET api_key_hash = EXCLUDED.api_key_hash, api_key_rotated_at = now()"
        " WHERE users.api_key_hash IS NULL"
        " RETURNING id",
        (user_id, hash_api_key(key)),
    ).fetchone()
    if row is None:
        raise AlreadyExistsError(f"user {user_id!r} already exists")
    return key


def ensure_user(conn: psycopg.Connection, user_id: str) -> None:
    """Create the user without a key if missing (ingest sees users before any admin does)."""
    conn.execute("INSERT INTO users (id) VALUES (%s) ON CONFLICT (id) DO NOTHING", (user_id,))


def user_exists(conn: psycopg.Connection, user_id: str) -> bool:
    return conn.execute("SELECT 1 FROM users WHERE id = %s", (user_id,)).fetchone() is not None


def user_for_key(conn: psycopg.Connection, key: str) -> str | None:
    """The user whose key this is, or None. Looked up by hash: the key itself is never stored
    and a 256-bit random key cannot be probed through lookup timing."""
    row = conn.execute(
        "SELECT id FROM users WHERE api_key_hash = %s LIMIT 1", (hash_api_key(key),)
    ).fetchone()
    return str(row[0]) if row else None


def verify_api_key(conn: psycopg.Connection, user_id: str, key: str) -> bool:
    """True when ``key`` is this user's key. Compares hashes in constant time."""
    row = conn.execute("SELECT api_key_hash FROM users WHERE id = %s", (user_id,)).fetchone()
    stored = row[0] if row and row[0] else None
    # hash even when there is nothing to compare with, so timing does not reveal which users
    # exist or have keys
    candidate = hash_api_key(key)
    if stored is None:
        hmac.compare_digest(candidate, candidate)
        return False
    return hmac.compare_digest(candidate.encode(), stored.encode())


def rotate_api_key(conn: psycopg.Connection, user_id: str) -> str:
    """Replace the user's key with a new one and return it; the old key stops working."""
    key = new_api_key()
    row = conn.execute(
        "UPDATE users SET api_key_hash = %s, api_key_rotated_at = now() WHERE id = %s RETURNING id",
        (hash_api_key(key), user_id),
    ).fetchone()
    if row is None:
        raise NotFoundError(f"no user {user_id!r}")
    return key


def upsert_session(
    conn: psycopg.Connection,
    user_id: str,
    session_id: str,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
) -> None:
    """Record a session; later calls fill in times (a known time is never erased by None)."""
    conn.execute(
        "INSERT INTO sessions (user_id, session_id, started_at, ended_at) VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (user_id, session_id) DO UPDATE SET"
        " started_at = LEAST(sessions.started_at, EXCLUDED.started_at),"  # LEAST skips NULL
        " ended_at = COALESCE(EXCLUDED.ended_at, sessions.ended_at),"
        " updated_at = now()",
        (user_id, session_id, started_at, ended_at),
    )
