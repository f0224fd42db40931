"""The ``llm_usage`` table: model usage per user and minute (written by
worldmm.llm.usage_ledger)."""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

import psycopg
from pydantic import BaseModel

from worldmm.store._sql import fetch_count
from worldmm.store.distribute import spans_wearers

if TYPE_CHECKING:
    from worldmm.llm.usage_ledger import UsageKey

_COUNTS = ("calls", "prompt", "completion", "cached", "reasoning")
_ADD = """
INSERT INTO {table} AS u ({key}, calls, prompt_tokens, completion_tokens, cached_tokens,
                          reasoning_tokens)
SELECT r.* FROM unnest({arrays}, %s::int[], %s::bigint[], %s::bigint[], %s::bigint[],
                       %s::bigint[])
    AS r({key}, calls, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens)
ON CONFLICT ON CONSTRAINT {table}_key DO UPDATE SET
    calls = u.calls + EXCLUDED.calls,
    prompt_tokens = u.prompt_tokens + EXCLUDED.prompt_tokens,
    completion_tokens = u.completion_tokens + EXCLUDED.completion_tokens,
    cached_tokens = u.cached_tokens + EXCLUDED.cached_tokens,
    reasoning_tokens = u.reasoning_tokens + EXCLUDED.reasoning_tokens
"""
_KEY = ("minute", "role", "model", "provider", "dispatch")
_TYPES = ("timestamptz", "text", "text", "text", "text")


def _add(conn: psycopg.Connection, rows: dict[UsageKey, Counter[str]], *, attributed: bool) -> None:
    keys = list(rows)
    key = ("user_id", *_KEY) if attributed else _KEY
    types = ("text", *_TYPES) if attributed else _TYPES
    statement = _ADD.format(
        table="llm_usage" if attributed else "llm_usage_unattributed",
        key=", ".join(key),
        arrays=", ".join(f"%s::{t}[]" for t in types),
    )
    columns = [[getattr(k, name) for k in keys] for name in key]
    conn.execute(statement, [*columns, *([rows[k][n] for k in keys] for n in _COUNTS)])


def add_usage(conn: psycopg.Connection, rows: dict[UsageKey, Counter[str]]) -> None:
    """Add the counts of ``rows`` to their (user, minute, role, model) rows: one statement
    for the wearers' usage, one for usage made for no wearer (a model check)."""
    users: dict[str | None, dict[UsageKey, Counter[str]]] = {}
    for k, counts in rows.items():
        users.setdefault(k.user_id, {})[k] = counts
    if None in users:
        _add(conn, users.pop(None), attributed=False)
    if not users:
        return
    try:
        with conn.transaction():
            spans_wearers(conn)  # one statement for every wearer's usage of the batch
            _add(conn, {k: c for part in users.values() for k, c in part.items()}, attributed=True)
    except psycopg.errors.ForeignKeyViolation:
        # a wearer purged while their calls were buffered: their usage went with them
        for part in users.values():
            with contextlib.suppress(psycopg.errors.ForeignKeyViolation), conn.transaction():
                _add(conn, part, attributed=True)


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
    cached_tokens: int  # of prompt_tokens, from the provider's prompt cache
    reasoning_tokens: int  # of completion_tokens, spent reasoning


def usage_rows(
    conn: psycopg.Connection, user_id: str, start: datetime, end: datetime
) -> list[UsageRow]:
    """The user's usage in [start, end) (whole minutes) per UTC day, role, model and
    dispatch mode, oldest day first."""
    rows = conn.execute(
        "SELECT date_trunc('day', minute, 'UTC'), role, model, dispatch, sum(calls)::bigint,"
        " sum(prompt_tokens)::bigint, sum(completion_tokens)::bigint, sum(cached_tokens)::bigint,"
        " sum(reasoning_tokens)::bigint"
        " FROM llm_usage WHERE user_id = %s AND minute >= %s AND minute < %s"
        " GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
        (user_id, start, end),
    ).fetchall()
    names = list(UsageRow.model_fields)
    return [UsageRow(**dict(zip(names, r, strict=True))) for r in rows]


def degraded_windows(conn: psycopg.Connection, user_id: str, start: datetime, end: datetime) -> int:
    """30 s windows in [start, end) built without the vision call (daily token budget)."""
    return fetch_count(conn, _DEGRADED, (user_id, start, end))
