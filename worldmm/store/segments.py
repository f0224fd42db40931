"""Segments: one row per (user, scale, window), at every scale."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import psycopg
from psycopg.types.json import Jsonb

from worldmm.models import ProcessingStatus
from worldmm.store._sql import fetch_models, user_filter
from worldmm.store.errors import NotFoundError
from worldmm.store.models import SegmentRow, SegmentWrite

SEGMENT_COLUMNS = (
    "id, user_id, session_id, scale_seconds, window_start, window_end, partial, caption,"
    " transcript, parent_segment_id, processing_status, visual_status, error, attempts,"
    " source_topic, source_partition, source_offset_first, source_offset_last,"
    " model_versions, prompt_versions, importance, importance_source, recall_count,"
    " last_recalled_at, created_at, updated_at"
)


def upsert_segment(conn: psycopg.Connection, seg: SegmentWrite) -> int:
    """Insert or overwrite the segment of (user, scale, window_start); return its id.

    A replay of the same window overwrites its text, status and provenance, keeps its id and
    parent link (unless a new parent is given), and counts one more attempt.
    """
    row = conn.execute(
        "INSERT INTO segments (user_id, session_id, scale_seconds, window_start, window_end,"
        " partial, caption, transcript, parent_segment_id, processing_status, visual_status,"
        " error, attempts, source_topic, source_partition, source_offset_first,"
        " source_offset_last, model_versions, prompt_versions, importance, importance_source)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 1, %s, %s, %s, %s, %s, %s,"
        " %s, %s)"
        " ON CONFLICT ON CONSTRAINT segments_window_key DO UPDATE SET"
        " session_id = COALESCE(EXCLUDED.session_id, segments.session_id),"
        " window_end = EXCLUDED.window_end, partial = EXCLUDED.partial,"
        " caption = EXCLUDED.caption, transcript = EXCLUDED.transcript,"
        " parent_segment_id = COALESCE(EXCLUDED.parent_segment_id, segments.parent_segment_id),"
        " processing_status = EXCLUDED.processing_status,"
        " visual_status = EXCLUDED.visual_status, error = EXCLUDED.error,"
        " attempts = segments.attempts + 1,"
        " source_topic = EXCLUDED.source_topic, source_partition = EXCLUDED.source_partition,"
        " source_offset_first = EXCLUDED.source_offset_first,"
        " source_offset_last = EXCLUDED.source_offset_last,"
        " model_versions = EXCLUDED.model_versions, prompt_versions = EXCLUDED.prompt_versions,"
        # a pending mark carries no importance: keep the last one until the rebuild sets it
        " importance = COALESCE(EXCLUDED.importance, segments.importance),"
        " importance_source = COALESCE(EXCLUDED.importance_source, segments.importance_source),"
        " updated_at = EXCLUDED.updated_at"
        " RETURNING id",
        (
            seg.user_id,
            seg.session_id,
            seg.scale_seconds,
            seg.window_start,
            seg.window_end,
            seg.partial,
            seg.caption,
            seg.transcript,
            seg.parent_segment_id,
            seg.processing_status,
            seg.visual_status,
            seg.error,
            seg.source_topic,
            seg.source_partition,
            seg.source_offset_first,
            seg.source_offset_last,
            Jsonb(seg.model_versions),
            Jsonb(seg.prompt_versions),
            seg.importance,
            seg.importance_source,
        ),
    ).fetchone()
    assert row is not None  # INSERT .. ON CONFLICT DO UPDATE always returns the row
    return int(row[0])


def set_segment_status(
    conn: psycopg.Connection,
    user_id: str,
    segment_id: int,
    status: ProcessingStatus,
    error: str | None = None,
) -> None:
    """Set processing status (and error text; cleared when None). NotFoundError unless the
    segment is this user's."""
    # the user is part of every write's key: an id alone never reaches another user's row
    cur = conn.execute(
        "UPDATE segments SET processing_status = %s, error = %s, updated_at = now()"
        " WHERE user_id = %s AND id = %s",
        (status, error, user_id, segment_id),
    )
    if cur.rowcount != 1:
        raise NotFoundError(f"no segment {segment_id} for this user")


def link_children(
    conn: psycopg.Connection, user_id: str, parent_id: int, child_ids: Sequence[int]
) -> int:
    """Point the user's child segments at their parent (both must be the user's); return how
    many changed."""
    if not child_ids:
        return 0
    cur = conn.execute(
        "UPDATE segments c SET parent_segment_id = p.id, updated_at = now()"
        " FROM segments p WHERE p.user_id = %s AND p.id = %s"
        " AND c.user_id = %s AND c.id = ANY(%s) AND c.scale_seconds < p.scale_seconds",
        (user_id, parent_id, user_id, list(child_ids)),
    )
    return cur.rowcount


def _select(conn: psycopg.Connection, clause: str, params: Sequence[object]) -> list[SegmentRow]:
    """Segments ``WHERE <clause>`` (which may go on with ORDER BY and LIMIT)."""
    query = f"SELECT {SEGMENT_COLUMNS} FROM segments WHERE {clause}"
    return fetch_models(conn, SegmentRow, query, params)


def get_segment(conn: psycopg.Connection, user_id: str, segment_id: int) -> SegmentRow | None:
    found = _select(conn, "user_id = %s AND id = %s", (user_id, segment_id))
    return found[0] if found else None


def get_segments(
    conn: psycopg.Connection, user_id: str, segment_ids: Sequence[int]
) -> list[SegmentRow]:
    """Segments by id (only this user's), in window order."""
    where = "user_id = %s AND id = ANY(%s) ORDER BY window_start, scale_seconds"
    return _select(conn, where, (user_id, list(segment_ids)))


def get_segment_by_window(
    conn: psycopg.Connection, user_id: str, scale_seconds: int, window_start: datetime
) -> SegmentRow | None:
    where = "user_id = %s AND scale_seconds = %s AND window_start = %s"
    found = _select(conn, where, (user_id, scale_seconds, window_start))
    return found[0] if found else None


def list_segments(
    conn: psycopg.Connection,
    user_id: str,
    start: datetime | None = None,
    end: datetime | None = None,
    scale: int | None = None,
    as_of: datetime | None = None,
    limit: int = 1000,
    *,
    statuses: Sequence[ProcessingStatus] | None = None,
    descending: bool = False,
    after: tuple[datetime, int] | None = None,
) -> list[SegmentRow]:
    """Segments overlapping [start, end), oldest first (or newest first if descending),
    ordered by (window_start, scale_seconds): a user's unique key for a segment.

    as_of: only segments that existed at that event time (window_end <= as_of).
    after: a keyset cursor (window_start, scale_seconds): only segments strictly after it
    (oldest-first order only), so pages of ``limit`` neither skip nor repeat a segment.
    """
    if after is not None and descending:
        raise ValueError("a keyset cursor pages oldest first only")
    where, args = user_filter(
        user_id,
        [
            ("window_end > %s", start),
            ("window_start < %s", end),
            ("scale_seconds = %s", scale),
            ("window_end <= %s", as_of),
            ("processing_status = ANY(%s)", None if statuses is None else list(statuses)),
            ("(window_start, scale_seconds) > (%s, %s)", after),
        ],
    )
    order = "DESC" if descending else "ASC"
    where += f" ORDER BY window_start {order}, scale_seconds ASC LIMIT %s"
    return _select(conn, where, (*args, limit))


def children_of(conn: psycopg.Connection, user_id: str, parent_id: int) -> list[SegmentRow]:
    where = "user_id = %s AND parent_segment_id = %s ORDER BY window_start"
    return _select(conn, where, (user_id, parent_id))


def last_window_end(conn: psycopg.Connection, user_id: str, scale_seconds: int) -> datetime | None:
    """End of the user's latest window of that scale (None: no window yet)."""
    row = conn.execute(
        "SELECT max(window_end) FROM segments WHERE user_id = %s AND scale_seconds = %s",
        (user_id, scale_seconds),
    ).fetchone()
    return row[0] if row else None


def segments_needing_work(
    conn: psycopg.Connection,
    user_id: str,
    session_id: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    statuses: Sequence[ProcessingStatus] = ("pending", "failed"),
    visual: bool = False,
    *,
    max_attempts: int | None = None,
    limit: int = 10000,
) -> list[SegmentRow]:
    """Segments to retry, oldest first: processing status in ``statuses``, or with
    ``visual=True`` those whose visual embedding is pending or failed."""
    where, args = user_filter(
        user_id,
        [
            ("visual_status = ANY(%s)", ["pending", "failed"])
            if visual
            else ("processing_status = ANY(%s)", list(statuses)),
            ("session_id = %s", session_id),
            ("window_end > %s", start),
            ("window_start < %s", end),
            ("attempts < %s", max_attempts),
        ],
    )
    where += " ORDER BY window_start, scale_seconds LIMIT %s"
    return _select(conn, where, (*args, limit))
