"""The ``llm_usage`` table: model usage per user and minute (written by
worldmm.llm.usage_ledger)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

import psycopg
from pydantic import BaseModel

from worldmm.store._sql import fetch_count

if TYPE_CHECKING:
    from worldmm.llm.usage_ledger import UsageKey

_ADD = """
INSERT INTO llm_usage AS u (user_id, minute, role, model, provider, dispatch, calls,
                            prompt_tokens, completion_tokens, cached_tokens)
SELECT r.* FROM unnest(%s::text[], %s::timestamptz[], %s::text[], %s::text[], %s::text[],
                       %s::text[], %s::int[], %s::bigint[], %s::bigint[], %s::bigint[])
    AS r(user_id, minute, role, model, provider, dispatch, calls, prompt_tokens,
         completion_tokens, cached_tokens)
-- a user purged while their calls were buffered: their usage went with them
WHERE r.user_id IS NULL OR EXISTS (SELECT 1 FROM users WHERE id = r.user_id)
ON CONFLICT ON CONSTRAINT llm_usage_key DO UPDATE SET
    calls = u.calls + EXCLUDED.calls,
    prompt_tokens = u.prompt_tokens + EXCLUDED.prompt_tokens,
    completion_tokens = u.completion_tokens + EXCLUDED.completion_tokens,
    cached_tokens = u.cached_tokens + EXCLUDED.cached_tokens
"""


def add_usage(conn: psycopg.Connection, rows: dict[UsageKey, Counter[str]]) -> None:
    """Add the counts of ``rows`` to their (user, minute, role, model) rows, in one
    statement."""
    if not rows:
        return
    keys = list(rows)
    columns = [
        [k.user_id for k in keys],
        [k.minute for k in keys],
        [k.role for k in keys],
        [k.model for k in keys],
        [k.provider for k in keys],
        [k.dispatch for k in keys],
        *([rows[k][name] for k in keys] for name in ("calls", "prompt", "completion", "cached")),
    ]
    conn.execute(_ADD, columns)


_TOKENS = (
    "SELECT coalesce(sum(prompt_tokens + completion_tokens), 0) FROM llm_usage"
    " WHERE user_id = %s AND minute >= %s AND minute < %s"
)
_DEGRADED = (
    "SELECT count(*) FROM segments WHERE user_id = %s AND scale_seconds = 30"
    " AND window_start >= %s AND window_start < %s AND model_versions ? 'degraded'"
)


def tokens_since(conn: psycopg.Connection, user_id: str, start: datetime, end: datetime) -> int:
    """Prompt + completion tokens of ``user_id`` in [start, end) (whole minutes)."""
    return fetch_count(conn, _TOKENS, (user_id, start, end))


class UsageRow(BaseModel):
    """One user's usage of one role, model and dispatch mode on one UTC day."""

    day: datetime  # midnight UTC
    role: str
    model: str
    dispatch: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


def usage_rows(
    conn: psycopg.Connection, user_id: str, start: datetime, end: datetime
) -> list[UsageRow]:
    """The user's usage in [start, end) (whole minutes) per UTC day, role, model and
    dispatch mode, oldest day first."""
    rows = conn.execute(
        "SELECT date_trunc('day', minute, 'UTC'), role, model, dispatch, sum(calls)::bigint,"
        " sum(prompt_tokens)::bigint, sum(completion_tokens)::bigint, sum(cached_tokens)::bigint"
        " FROM llm_usage WHERE user_id = %s AND minute >= %s AND minute < %s"
        " GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        (user_id, start, end),
    ).fetchall()
    names = list(UsageRow.model_fields)
    return [UsageRow(**dict(zip(names, r, strict=True))) for r in rows]


def degraded_windows(conn: psycopg.Connection, user_id: str, start: datetime, end: datetime) -> int:
    """30 s windows in [start, end) built without the vision call (daily token budget)."""
    return fetch_count(conn, _DEGRADED, (user_id, start, end))
