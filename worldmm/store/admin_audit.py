"""The audit trail of admin actions (create and purge users, create, rotate, revoke keys)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel


class AdminAction(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    subject_user: str | None
    key_id: int | None
    detail: dict[str, Any]


def record_admin_action(
    conn: psycopg.Connection,
    action: str,
    *,
    actor: str = "admin",
    subject_user: str | None = None,
    key_id: int | None = None,
    detail: dict[str, Any] | None = None,
) -> int:
    """Append one record; call it in the transaction of the action so both commit or neither."""
    row = conn.execute(
        "INSERT INTO admin_audit (actor, action, subject_user, key_id, detail)"
        " VALUES (%s, %s, %s, %s, %s) RETURNING id",
        (actor, action, subject_user, key_id, Jsonb(detail or {})),
    ).fetchone()
    assert row is not None
    return int(row[0])


def list_admin_actions(
    conn: psycopg.Connection,
    *,
    subject_user: str | None = None,
    before_id: int | None = None,
    limit: int = 100,
) -> list[AdminAction]:
    """Newest first; ``before_id`` pages back from an earlier page's last id."""
    rows = conn.execute(
        "SELECT id, at, actor, action, subject_user, key_id, detail FROM admin_audit"
        " WHERE (%(u)s::text IS NULL OR subject_user = %(u)s)"
        " AND (%(b)s::bigint IS NULL OR id < %(b)s) ORDER BY id DESC LIMIT %(n)s",
        {"u": subject_user, "b": before_id, "n": limit},
    ).fetchall()
    cols = ("id", "at", "actor", "action", "subject_user", "key_id", "detail")
    return [AdminAction(**dict(zip(cols, r, strict=True))) for r in rows]
