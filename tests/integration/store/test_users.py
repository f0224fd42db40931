"""Users and API keys: only a hash is stored; verify, rotate, create-once, several keys."""

from __future__ import annotations

import pytest

from tests.fixtures.store import T0, rotate_api_key
from worldmm.store.errors import AlreadyExistsError, NotFoundError
from worldmm.store.users import (
    create_user,
    ensure_user,
    upsert_session,
    user_exists,
    verify_api_key,
)

pytestmark = pytest.mark.integration


def test_api_key_lifecycle(conn, user_id) -> None:
    new = f"{user_id}-k"
    key = create_user(conn, new)
    (stored,) = conn.execute("SELECT key_hash FROM api_keys WHERE user_id = %s", (new,)).fetchone()
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


def test_several_keys_rotate_and_revoke(conn, user_id) -> None:
    from worldmm.store.users import issue_key, key_owner, list_keys, revoke_key, rotate_key

    first = create_user(conn, f"{user_id}-m")
    user = f"{user_id}-m"
    second = issue_key(conn, user, "phone")
    assert verify_api_key(conn, user, first) and verify_api_key(conn, user, second.key)
    assert second.row.prefix == second.key[:12] and second.key.startswith("wmm_")
    assert [k.name for k in list_keys(conn, user)] == [None, "phone"]
    assert [k.id for k in list_keys(conn, user, prefix=second.row.prefix)] == [second.row.id]
    assert list_keys(conn, user, prefix="wmm_%") == []  # wildcards are literal
    third = rotate_key(conn, user, second.row.id)
    assert third.row.name == "phone" and not verify_api_key(conn, user, second.key)
    (old,) = list_keys(conn, user, prefix=second.row.prefix, include_revoked=True)
    assert old.revoked_at is not None and old.replaced_by == third.row.id
    with pytest.raises(NotFoundError):
        rotate_key(conn, user, second.row.id)  # revoked keys do not rotate
    revoked = revoke_key(conn, user, third.row.id)
    assert revoked.revoked_at is not None and key_owner(conn, third.key) is None
    assert revoke_key(conn, user, third.row.id).revoked_at == revoked.revoked_at  # idempotent
    with pytest.raises(NotFoundError):
        revoke_key(conn, user_id, third.row.id)  # another user's key id
    with pytest.raises(NotFoundError):
        issue_key(conn, "nobody-" + user_id)
    assert verify_api_key(conn, user, first)  # untouched by the others' changes
