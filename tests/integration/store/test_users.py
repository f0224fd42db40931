"""Users and API keys: only a hash is stored; verify, rotate, create-once."""

from __future__ import annotations

import pytest

from worldmm.store.errors import AlreadyExistsError, NotFoundError
from worldmm.store.users import (
    create_user,
    ensure_user,
    rotate_api_key,
    upsert_session,
    user_exists,
    verify_api_key,
)

from .conftest import T0

pytestmark = pytest.mark.integration


def test_api_key_lifecycle(conn, user_id) -> None:
    new = f"{user_id}-k"
    key = create_user(conn, new)
    (stored,) = conn.execute("SELECT api_key_hash FROM users WHERE id = %s", (new,)).fetchone()
    assert key not in stored and stored.startswith("sha256:") and len(key) >= 40
    assert verify_api_key(conn, new, key)
    assert not verify_api_key(conn, new, key + "x")
    assert not verify_api_key(conn, user_id, key)  # another user's key
    assert not verify_api_key(conn, "nobody-" + user_id, key)
    with pytest.raises(AlreadyExistsError):
        create_user(conn, new)
    rotated = rotate_api_key(conn, new)
    assert rotated != key
    assert verify_api_key(conn, new, rotated) and not verify_api_key(conn, new, key)
    with pytest.raises(NotFoundError):
        rotate_api_key(conn, "nobody-" + user_id)


def test_ingest_created_user_gets_a_key_later(conn, user_id) -> None:
    # the conn fixture created user_id without a key, as ingest does
    assert user_exists(conn, user_id)
    assert not verify_api_key(conn, user_id, "")
    ensure_user(conn, user_id)  # idempotent
    key = create_user(conn, user_id)
    assert verify_api_key(conn, user_id, key)


def test_sessions_fill_in_times(conn, user_id) -> None:
    upsert_session(conn, user_id, "s1")
    upsert_session(conn, user_id, "s1", started_at=T0)
    upsert_session(conn, user_id, "s1", ended_at=T0.replace(hour=10))
    upsert_session(conn, user_id, "s1")
    row = conn.execute(
        "SELECT started_at, ended_at FROM sessions WHERE user_id = %s", (user_id,)
    ).fetchall()
    assert row == [(T0, T0.replace(hour=10))]
