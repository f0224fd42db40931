"""The consolidation audit trail: what the LLM saw, decided and what was written."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.types.json import Jsonb


def insert_consolidation_audit(
    conn: psycopg.Connection,
    user_id: str,
    inputs: dict[str, Any],
    decision: str,
    outputs: dict[str, Any],
    *,
    segment_id: int | None = None,
) -> int:
    row = conn.execute(
        "INSERT INTO consolidation_audit (user_id, segment_id, inputs, decision, outputs)"
        " VALUES (%s, %s, %s, %s, %s) RETURNING id",
        (user_id, segment_id, Jsonb(inputs), decision, Jsonb(outputs)),
    ).fetchone()
    assert row is not None
    return int(row[0])
