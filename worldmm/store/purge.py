"""Purging a user and forgetting a time range (database rows; callers delete blobs/cache)."""

from __future__ import annotations

from datetime import datetime

import psycopg
from psycopg import sql

from worldmm.store._sql import fetch_column
from worldmm.store.models import ForgetResult


def user_tables(conn: psycopg.Connection) -> list[str]:
    """Every table of the current schema with a user_id column (plus users itself)."""
    return fetch_column(
        conn,
        "SELECT table_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND column_name = 'user_id'"
        " ORDER BY table_name",
    )


def count_user_rows(conn: psycopg.Connection, user_id: str) -> dict[str, int]:
    """Rows per table belonging to the user ('users' counts the user row itself)."""
    counts: dict[str, int] = {}
    for table in user_tables(conn):
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE user_id = %s").format(sql.Identifier(table)),
            (user_id,),
        ).fetchone()
        counts[table] = int(row[0]) if row else 0
    row = conn.execute("SELECT count(*) FROM users WHERE id = %s", (user_id,)).fetchone()
    counts["users"] = int(row[0]) if row else 0
    return counts


def purge_user(conn: psycopg.Connection, user_id: str) -> dict[str, int]:
    """Delete the user and every row of theirs (foreign keys cascade); return the counts
    deleted per table. Purging an unknown user deletes nothing."""
    counts = count_user_rows(conn, user_id)
    conn.execute("DELETE FROM users WHERE id = %s", (user_id,))
    return counts


def forget_range(
    conn: psycopg.Connection, user_id: str, start: datetime, end: datetime
) -> ForgetResult:
    """Forget [start, end): segments overlapping it at any scale and everything derived from
    them (triples, including semantic facts citing them as evidence, clip embeddings, audit
    records), entities no longer used by any triple, and frame / audio rows in the range.
    Returns counts and the blob keys the caller must delete."""
    if end <= start:
        raise ValueError("forget_range: end must be after start")
    seg_ids = fetch_column(
        conn,
        "SELECT id FROM segments WHERE user_id = %s AND window_start < %s AND window_end > %s",
        (user_id, end, start),
    )
    counts: dict[str, int] = {}
    counts["triples"] = conn.execute(
        "DELETE FROM triples WHERE user_id = %s"
        " AND (segment_id = ANY(%s) OR evidence_segment_ids && %s::bigint[])",
        (user_id, seg_ids, seg_ids),
    ).rowcount
    for table in ("visual_embeddings", "consolidation_audit"):
        counts[table] = conn.execute(
            sql.SQL("DELETE FROM {} WHERE user_id = %s AND segment_id = ANY(%s)").format(
                sql.Identifier(table)
            ),
            (user_id, seg_ids),
        ).rowcount
    counts["segments"] = conn.execute(
        "DELETE FROM segments WHERE user_id = %s AND id = ANY(%s)", (user_id, seg_ids)
    ).rowcount
    counts["entities"] = _delete_unused_entities(conn, user_id)
    frame_keys = fetch_column(
        conn,
        "DELETE FROM frames WHERE user_id = %s AND captured_at >= %s AND captured_at < %s"
        " RETURNING blob_key",
        (user_id, start, end),
    )
    audio_keys = fetch_column(
        conn,
        "DELETE FROM audio_chunks WHERE user_id = %s AND started_at < %s"
        " AND started_at + duration_ms * interval '1 millisecond' > %s RETURNING blob_key",
        (user_id, end, start),
    )
    counts["frames"] = len(frame_keys)
    counts["audio_chunks"] = len(audio_keys)
    return ForgetResult(counts=counts, frame_blob_keys=frame_keys, audio_blob_keys=audio_keys)


def _delete_unused_entities(conn: psycopg.Connection, user_id: str) -> int:
    # a name only forgotten memories mentioned must not survive them; aliases go with their
    # canonical entity
    unused = (
        "SELECT e.id FROM entities e WHERE e.user_id = %(u)s AND e.canonical_entity_id IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM triples t WHERE t.user_id = %(u)s"
        "  AND (t.subject_entity_id = e.id OR t.object_entity_id = e.id))"
    )
    aliases = conn.execute(
        f"DELETE FROM entities WHERE user_id = %(u)s AND canonical_entity_id IN ({unused})",
        {"u": user_id},
    ).rowcount
    canonical = conn.execute(
        f"DELETE FROM entities WHERE user_id = %(u)s AND id IN ({unused})", {"u": user_id}
    ).rowcount
    return aliases + canonical
