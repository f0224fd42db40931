"""Admin routes for API keys (several per user: create, list by prefix, rotate, revoke) and
the audit trail of admin actions. Every change is audited in its own transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated

import psycopg
from fastapi import APIRouter, HTTPException, Path, Query, status

from query_api.auth import AdminOnly, UserIdPath
from query_api.depends import AppDeps
from worldmm.store.admin_audit import list_admin_actions, record_admin_action
from worldmm.store.errors import NotFoundError
from worldmm.store.users import (
    ApiKeyRow,
    IssuedKey,
    issue_key,
    list_keys,
    revoke_key,
    rotate_key,
    user_exists,
)
from worldmm.wire.keys import AuditOut, AuditPage, KeyCreated, KeyList, KeyOut, KeyRequest
from worldmm.wire.schemas import USER_ID_PATTERN, ErrorOut

_ERRORS: dict[int | str, dict] = {
    401: {"model": ErrorOut, "description": "Missing or invalid API key"},
    403: {"model": ErrorOut, "description": "Not the admin key"},
    404: {"model": ErrorOut, "description": "Unknown user or key"},
    422: {"model": ErrorOut, "description": "Invalid input; the message says which"},
    429: {"model": ErrorOut, "description": "Rate limit reached; see Retry-After"},
}
router = APIRouter(tags=["keys (admin)"], dependencies=[AdminOnly], responses=_ERRORS)
KeyIdPath = Annotated[int, Path(ge=1, le=2**63 - 1, description="The key's id.")]
Prefix = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=32,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Only keys whose prefix starts with this.",
    ),
]


def _out(row: ApiKeyRow) -> KeyOut:
    return KeyOut.model_validate({**asdict(row), "key_id": row.id})


def _created(issued: IssuedKey) -> KeyCreated:
    return KeyCreated(**_out(issued.row).model_dump(), api_key=issued.key)


@contextmanager
def _admin_change(deps: AppDeps) -> Iterator[psycopg.Connection]:
    """The transaction of one audited change; an unknown user or key is a 404."""
    try:
        with deps.db.transaction() as conn:
            yield conn
    except NotFoundError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from None


@router.post(
    "/v1/users/{user_id}/keys",
    status_code=status.HTTP_201_CREATED,
    summary="Issue one more API key to a user (admin)",
)
def create_key(user_id: UserIdPath, deps: AppDeps, body: KeyRequest | None = None) -> KeyCreated:
    name = body.name if body else None
    with _admin_change(deps) as conn:
        issued = issue_key(conn, user_id, name)
        record_admin_action(
            conn, "key.create", subject_user=user_id, key_id=issued.row.id,
            detail={"prefix": issued.row.prefix, "name": name},
        )  # fmt: skip
    return _created(issued)


@router.get(
    "/v1/users/{user_id}/keys",
    summary="A user's API keys, without the keys themselves (admin)",
)
def user_keys(
    user_id: UserIdPath,
    deps: AppDeps,
    prefix: Prefix = None,
    include_revoked: Annotated[bool, Query(description="List revoked keys too.")] = False,
) -> KeyList:
    with deps.db.connection() as conn:
        if not user_exists(conn, user_id):
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown user {user_id!r}")
        rows = list_keys(conn, user_id, prefix=prefix, include_revoked=include_revoked)
    return KeyList(items=[_out(r) for r in rows])


@router.get("/v1/keys", summary="Find keys of any user by prefix, e.g. one seen in a log (admin)")
def find_keys(
    deps: AppDeps,
    prefix: Annotated[
        str,
        Query(
            min_length=4,
            max_length=32,
            pattern=r"^[A-Za-z0-9_-]+$",
            description="At least the first 4 characters of a key.",
        ),
    ],  # fmt: skip
    include_revoked: Annotated[bool, Query(description="List revoked keys too.")] = True,
) -> KeyList:
    with deps.db.connection() as conn:
        rows = list_keys(conn, prefix=prefix, include_revoked=include_revoked)
    return KeyList(items=[_out(r) for r in rows])


@router.post(
    "/v1/users/{user_id}/keys/{key_id}/rotate",
    status_code=status.HTTP_201_CREATED,
    summary="Replace a key by a new one; the old one is refused from now on (admin)",
)
def rotate(
    user_id: UserIdPath, key_id: KeyIdPath, deps: AppDeps, body: KeyRequest | None = None
) -> KeyCreated:
    with _admin_change(deps) as conn:
        issued = rotate_key(conn, user_id, key_id, body.name if body else None)
        record_admin_action(
            conn, "key.rotate", subject_user=user_id, key_id=key_id,
            detail={"new_key_id": issued.row.id, "prefix": issued.row.prefix},
        )  # fmt: skip
    return _created(issued)


@router.delete(
    "/v1/users/{user_id}/keys/{key_id}",
    summary="Revoke a key: every API process refuses it from the next request (admin)",
)
def revoke(user_id: UserIdPath, key_id: KeyIdPath, deps: AppDeps) -> KeyOut:
    with _admin_change(deps) as conn:
        row = revoke_key(conn, user_id, key_id)
        record_admin_action(
            conn, "key.revoke", subject_user=user_id, key_id=key_id, detail={"prefix": row.prefix}
        )
    return _out(row)


@router.get("/v1/admin/audit", summary="Admin actions, newest first (admin)")
def audit(
    deps: AppDeps,
    user_id: Annotated[
        str | None, Query(pattern=USER_ID_PATTERN, description="Only actions on this user.")
    ] = None,
    before: Annotated[
        int | None, Query(ge=1, le=2**63 - 1, description="Older than this id.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> AuditPage:
    with deps.db.connection() as conn:
        rows = list_admin_actions(conn, subject_user=user_id, before_id=before, limit=limit)
    items = [AuditOut.model_validate({**r.model_dump(), "user_id": r.subject_user}) for r in rows]
    return AuditPage(items=items, next_before=items[-1].id if len(items) == limit else None)
