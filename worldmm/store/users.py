"""Users, their profiles (time zone), their API keys (several per user; only a hash of each
is stored) and sessions."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime

import psycopg
from psycopg import sql

from worldmm.store._sql import fetch_found
from worldmm.store.errors import AlreadyExistsError, NotFoundError

_KEY_PREFIX = "wmm_"
_HASH_SCHEME = "sha256"


def new_api_key() -> str:
    """A random API key (256 bits). Shown once; only its hash is kept."""
    return _KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    """'sha256:<hex>'. Keys are long random tokens, so a fast hash is enough (no guessing)."""
    return f"{_HASH_SCHEME}:{hashlib.sha256(key.encode()).hexdigest()}"


@dataclass(frozen=True)
class ApiKeyRow:
    """A key as admins see it: never the key itself, only its first characters."""

    id: int
    user_id: str
    prefix: str
    name: str | None
    created_at: datetime
    revoked_at: datetime | None
    replaced_by: int | None


@dataclass(frozen=True)
class IssuedKey:
    """A new key: ``key`` is shown once and never stored."""

    row: ApiKeyRow
    key: str


_KEY_COLUMNS = "id, user_id, prefix, name, created_at, revoked_at, replaced_by"


def key_prefix(key: str) -> str:
    """The key's first 12 characters ('wmm_' + 8 of its 43 random ones, 48 bits): enough to
    tell keys apart in a list or a log, far too few to use."""
    return key[:12]


def _insert_key(conn: psycopg.Connection, user_id: str, name: str | None) -> IssuedKey:
    key = new_api_key()
    row = conn.execute(
        f"INSERT INTO api_keys (user_id, key_hash, prefix, name) VALUES (%s, %s, %s, %s)"
        f" RETURNING {_KEY_COLUMNS}",
        (user_id, hash_api_key(key), key_prefix(key), name),
    ).fetchone()
    assert row is not None
    return IssuedKey(ApiKeyRow(*row), key)


def _lock_user(conn: psycopg.Connection, user_id: str) -> bool:
    """Lock the user row (key changes of one user never interleave); False if missing."""
    row = conn.execute("SELECT 1 FROM users WHERE id = %s FOR UPDATE", (user_id,)).fetchone()
    return row is not None


def create_user(
    conn: psycopg.Connection, user_id: str, profile: Mapping[str, object] | None = None
) -> str:
    """Create a user with a first API key and return the key; AlreadyExistsError if the user
    was ever issued a key (more keys: :func:`issue_key`). A user that ingest created without
    a key gets one here. ``profile``: fields of :class:`UserProfile` to set (validated by
    the caller)."""
    conn.execute("INSERT INTO users (id) VALUES (%s) ON CONFLICT (id) DO NOTHING", (user_id,))
    _lock_user(conn, user_id)
    if conn.execute("SELECT 1 FROM api_keys WHERE user_id = %s LIMIT 1", (user_id,)).fetchone():
        raise AlreadyExistsError(f"user {user_id!r} already exists")
    if profile:
        update_profile(conn, user_id, profile)
    return _insert_key(conn, user_id, None).key


@dataclass(frozen=True)
class UserProfile:
    """What a user may read and change about themselves. A new profile field is a column of
    ``users`` and a field here (after ``created_at``, which is read-only)."""

    user_id: str
    created_at: datetime
    timezone: str
    # privacy (docs/privacy.md): media retention in days (None: the deployment's default)
    # and whether bystanders' faces are blurred in this wearer's frames
    retention_days: int | None = None
    face_blur: bool = True


_PROFILE_FIELDS = tuple(f.name for f in fields(UserProfile))
EDITABLE_PROFILE = _PROFILE_FIELDS[2:]  # every field after user_id and created_at
_PROFILE_COLUMNS = sql.SQL(", ").join(
    sql.Identifier("id" if name == "user_id" else name) for name in _PROFILE_FIELDS
)


def get_profile(conn: psycopg.Connection, user_id: str) -> UserProfile | None:
    row = conn.execute(
        sql.SQL("SELECT {} FROM users WHERE id = %s").format(_PROFILE_COLUMNS), (user_id,)
    ).fetchone()
    return UserProfile(*row) if row else None


def update_profile(
    conn: psycopg.Connection, user_id: str, changes: Mapping[str, object]
) -> UserProfile:
    """Set the given editable fields (none: unchanged); NotFoundError if there is no such
    user, ValueError for a field that is not editable."""
    unknown = set(changes) - set(EDITABLE_PROFILE)
    if unknown:
        raise ValueError(f"not editable profile fields: {sorted(unknown)}")
    if changes:
        assignments = sql.SQL(", ").join(
            sql.SQL("{} = %s").format(sql.Identifier(name)) for name in changes
        )
        conn.execute(
            sql.SQL("UPDATE users SET {} WHERE id = %s").format(assignments),
            (*changes.values(), user_id),
        )
    profile = get_profile(conn, user_id)
    if profile is None:
        raise NotFoundError(f"no user {user_id!r}")
    return profile


def user_timezone(conn: psycopg.Connection, user_id: str) -> str | None:
    """The user's IANA zone name; None for an unknown user."""
    row = conn.execute("SELECT timezone FROM users WHERE id = %s", (user_id,)).fetchone()
    return str(row[0]) if row else None


def issue_key(conn: psycopg.Connection, user_id: str, name: str | None = None) -> IssuedKey:
    """One more key for an existing user; NotFoundError if there is no such user."""
    if not _lock_user(conn, user_id):
        raise NotFoundError(f"no user {user_id!r}")
    return _insert_key(conn, user_id, name)


def list_keys(
    conn: psycopg.Connection,
    user_id: str | None = None,
    *,
    prefix: str | None = None,
    include_revoked: bool = False,
    limit: int = 100,
) -> list[ApiKeyRow]:
    """Keys of one user (or of everyone), oldest first; ``prefix`` keeps those whose prefix
    starts with it (finding the key behind a leaked fragment)."""
    where, args = ["TRUE"], []
    if user_id is not None:
        where.append("user_id = %s")
        args.append(user_id)
    if prefix:
        # LIKE with the pattern's own wildcards escaped: a prefix is literal text
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where.append("prefix LIKE %s")
        args.append(escaped + "%")
    if not include_revoked:
        where.append("revoked_at IS NULL")
    rows = conn.execute(
        f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE {' AND '.join(where)} ORDER BY id LIMIT %s",
        (*args, limit),
    ).fetchall()
    return [ApiKeyRow(*r) for r in rows]


def revoke_key(conn: psycopg.Connection, user_id: str, key_id: int) -> ApiKeyRow:
    """Revoke one of the user's keys (already revoked: unchanged); NotFoundError if the user
    has no such key. Every API process refuses it from the next request on."""
    row = fetch_found(
        conn,
        "UPDATE api_keys SET revoked_at = LEAST(revoked_at, now())"  # LEAST skips NULL
        f" WHERE user_id = %s AND id = %s RETURNING {_KEY_COLUMNS}",
        (user_id, key_id),
        f"user {user_id!r} has no key {key_id}",
    )
    return ApiKeyRow(*row)


def rotate_key(
    conn: psycopg.Connection, user_id: str, key_id: int, name: str | None = None
) -> IssuedKey:
    """Replace an active key by a new one (same name unless given): the old one is revoked
    in the same transaction and points at its successor. NotFoundError if the user has no
    such active key."""
    if not _lock_user(conn, user_id):
        raise NotFoundError(f"no user {user_id!r}")
    old = fetch_found(
        conn,
        "SELECT name FROM api_keys WHERE user_id = %s AND id = %s AND revoked_at IS NULL",
        (user_id, key_id),
        f"user {user_id!r} has no active key {key_id}",
    )
    issued = _insert_key(conn, user_id, name if name is not None else old[0])
    conn.execute(
        "UPDATE api_keys SET revoked_at = now(), replaced_by = %s WHERE user_id = %s AND id = %s",
        (issued.row.id, user_id, key_id),
    )
    return issued


def ensure_user(conn: psycopg.Connection, user_id: str) -> None:
    """Create the user without a key if missing (ingest sees users before any admin does)."""
    conn.execute("INSERT INTO users (id) VALUES (%s) ON CONFLICT (id) DO NOTHING", (user_id,))


def lock_user(conn: psycopg.Connection, user_id: str) -> bool:
    """Whether the user is there, their row held against a delete until the commit."""
    row = conn.execute("SELECT 1 FROM users WHERE id = %s FOR KEY SHARE", (user_id,))
    return row.fetchone() is not None


def user_exists(conn: psycopg.Connection, user_id: str) -> bool:
    return conn.execute("SELECT 1 FROM users WHERE id = %s", (user_id,)).fetchone() is not None


def existing_users(conn: psycopg.Connection, user_ids: list[str]) -> set[str]:
    """Which of ``user_ids`` are users: one look-up each, so that every statement stays one
    wearer's (a router query on Citus)."""
    return {u for u in user_ids if user_exists(conn, u)}


@dataclass(frozen=True)
class KeyOwner:
    user_id: str
    key_id: int


def key_owner(conn: psycopg.Connection, key: str) -> KeyOwner | None:
    """Whose active key this is, or None (unknown or revoked). Looked up by hash on every
    call: no process keeps a copy that could outlive a revoke."""
    row = conn.execute(
        "SELECT user_id, id FROM api_keys WHERE key_hash = %s AND revoked_at IS NULL",
        (hash_api_key(key),),
    ).fetchone()
    return KeyOwner(str(row[0]), int(row[1])) if row else None


def user_for_key(conn: psycopg.Connection, key: str) -> str | None:
    """The user whose active key this is, or None. Looked up by hash: the key itself is
    never stored and a 256-bit random key cannot be probed through lookup timing."""
    owner = key_owner(conn, key)
    return owner.user_id if owner else None


def verify_api_key(conn: psycopg.Connection, user_id: str, key: str) -> bool:
    """True when ``key`` is one of this user's active keys. The hash is looked up by an
    index, so timing tells nothing about which users exist or hold keys."""
    owner = key_owner(conn, key)
    return owner is not None and hmac.compare_digest(owner.user_id.encode(), user_id.encode())


def upsert_session(
    conn: psycopg.Connection,
    user_id: str,
    session_id: str,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
) -> None:
    """Record a session; later calls fill in times (a known time is never erased by None).
    Without a time (every window names its session) an existing row is left as it is: no
    new row version per window."""
    fill = (
        "DO NOTHING"
        if started_at is None and ended_at is None
        else "DO UPDATE SET"
        " started_at = LEAST(sessions.started_at, EXCLUDED.started_at),"  # LEAST skips NULL
        " ended_at = COALESCE(EXCLUDED.ended_at, sessions.ended_at),"
        # the proposed row's default: Citus evaluates no volatile function in DO UPDATE
        " updated_at = EXCLUDED.updated_at"
    )
    conn.execute(
        "INSERT INTO sessions (user_id, session_id, started_at, ended_at) VALUES (%s, %s, %s, %s)"
        f" ON CONFLICT (user_id, session_id) {fill}",
        (user_id, session_id, started_at, ended_at),
    )
