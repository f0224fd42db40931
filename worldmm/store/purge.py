"""Purging a user and forgetting a time range (database rows; callers delete blobs/cache)."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
from psycopg import sql

from worldmm.store._sql import fetch_column, fetch_count
from worldmm.store.models import ForgetResult

WINDOW_MS = 30_000  # one container per 30 s window


def ms_to_dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def user_tables(conn: psycopg.Connection) -> list[str]:
    """Every table of the current schema with a user_id column. A partitioned table counts
    once: its partitions (0009) hold the same rows, and are not listed."""
    return fetch_column(
        conn,
        "SELECT c.relname FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " JOIN pg_attribute a ON a.attrelid = c.oid"
        " WHERE n.nspname = current_schema() AND a.attname = 'user_id' AND NOT a.attisdropped"
        " AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY c.relname",
    )


def count_user_rows(conn: psycopg.Connection, user_id: str) -> dict[str, int]:
    """Rows per table belonging to the user ('users' counts the user row itself)."""
    counts: dict[str, int] = {}
    for table in user_tables(conn):
        counts[table] = fetch_count(
            conn,
            sql.SQL("SELECT count(*) FROM {} WHERE user_id = %s").format(sql.Identifier(table)),
            (user_id,),
        )
    counts["users"] = fetch_count(conn, "SELECT count(*) FROM users WHERE id = %s", (user_id,))
    return counts


def purge_user(conn: psycopg.Connection, user_id: str) -> dict[str, int]:
    """Delete the user and every row of theirs (foreign keys cascade); return the counts
    deleted per table. Purging an unknown user deletes nothing."""
    counts = count_user_rows(conn, user_id)
    # keys and browser sessions are global rows (the index from a key to its wearer), not
    # cascaded: schema/0019, 0023
    conn.execute("DELETE FROM ui_sessions WHERE user_id = %s", (user_id,))
    conn.execute("DELETE FROM api_keys WHERE user_id = %s", (user_id,))
    conn.execute("DELETE FROM users WHERE id = %s", (user_id,))
    return counts


def forget_range(
    conn: psycopg.Connection,
    user_id: str,
    start: datetime,
    end: datetime,
    *,
    keep_summaries: bool = False,
) -> ForgetResult:
    """Forget [start, end): segments overlapping it at any scale and everything derived from
    them (triples, including semantic facts citing them as evidence, clip embeddings, audit
    records), entities no longer used by any triple, and frame / audio rows in the range.
    With ``keep_summaries`` a 3 min / 10 min / 1 h segment some of whose 30 s windows remain
    is kept for a rebuild from them instead (its text and everything derived from it go
    now; it waits as ``pending``, listed in ``rebuild``). Returns counts and the blob keys
    the caller must delete (or, for containers, rewrite)."""
    if end <= start:
        raise ValueError("forget_range: end must be after start")
    seg_ids = fetch_column(
        conn,
        "SELECT id FROM segments WHERE user_id = %s AND window_start < %s AND window_end > %s",
        (user_id, end, start),
    )
    kept = _summaries_with_windows_left(conn, user_id, seg_ids) if keep_summaries else []
    going_ids = sorted(set(seg_ids) - set(kept))
    counts: dict[str, int] = {}
    # an episodic triple's evidence is its own segment: only facts cite others
    going = (
        "(segment_id = ANY(%s)"
        " OR (memory_type = 'semantic' AND evidence_segment_ids && %s::bigint[]))"
    )
    # what points at rows about to go lets go first (no ON DELETE SET NULL: schema/0019)
    conn.execute(
        "UPDATE triples SET replaced_by = NULL WHERE user_id = %s"
        f" AND replaced_by IN (SELECT id FROM triples WHERE user_id = %s AND {going})",
        (user_id, user_id, seg_ids, seg_ids),
    )
    conn.execute(
        "UPDATE segments SET parent_segment_id = NULL WHERE user_id = %s"
        " AND parent_segment_id = ANY(%s)",
        (user_id, going_ids),
    )
    counts["triples"] = conn.execute(
        f"DELETE FROM triples WHERE user_id = %s AND {going}", (user_id, seg_ids, seg_ids)
    ).rowcount
    for table in ("visual_embeddings", "consolidation_audit"):
        counts[table] = conn.execute(
            sql.SQL("DELETE FROM {} WHERE user_id = %s AND segment_id = ANY(%s)").format(
                sql.Identifier(table)
            ),
            (user_id, seg_ids),
        ).rowcount
    counts["segments"] = conn.execute(
        "DELETE FROM segments WHERE user_id = %s AND id = ANY(%s)", (user_id, going_ids)
    ).rowcount
    rebuild: list[tuple[int, datetime]] = []
    if kept:
        conn.execute(
            "DELETE FROM segment_embeddings WHERE user_id = %s AND segment_id = ANY(%s)",
            (user_id, kept),
        )
        rebuild = conn.execute(
            "UPDATE segments SET caption = NULL, transcript = NULL,"
            " processing_status = 'pending', error = %s"
            " WHERE user_id = %s AND id = ANY(%s) RETURNING scale_seconds, window_start",
            (FORGOTTEN_PENDING, user_id, kept),
        ).fetchall()
        counts["summaries_to_rebuild"] = len(rebuild)
    counts["entities"] = _delete_unused_entities(conn, user_id)
    frames = conn.execute(
        "DELETE FROM frames WHERE user_id = %s AND captured_at >= %s AND captured_at < %s"
        " RETURNING blob_key, media_key",
        (user_id, start, end),
    ).fetchall()
    # found first: Citus evaluates no time arithmetic on a column inside a write
    running_in = fetch_column(
        conn,
        "SELECT id FROM audio_chunks WHERE user_id = %s AND started_at < %s"
        " AND started_at + duration_ms * interval '1 millisecond' > %s",
        (user_id, end, start),
    )
    audio = conn.execute(
        "DELETE FROM audio_chunks WHERE user_id = %s AND id = ANY(%s)"
        " RETURNING blob_key, media_key",
        (user_id, running_in),
    ).fetchall()
    counts["frames"] = len(frames)
    counts["audio_chunks"] = len(audio)
    touched = {m for _, m in [*frames, *audio] if m}
    return ForgetResult(
        counts=counts,
        # a capture stored alone goes with its row; one inside a container goes with the
        # container, once no row of a capture outside the range points into it
        frame_blob_keys=[k for k, m in frames if m is None],
        audio_blob_keys=[k for k, m in audio if m is None],
        media_keys=unreferenced_media(conn, user_id, touched),
        touched_media=sorted(touched),
        rebuild=sorted(rebuild),
    )


# What a summary kept for a rebuild says until it is rebuilt (worldmm retrigger redoes it too).
FORGOTTEN_PENDING = "forgotten: to be rebuilt from the windows that remain"


def _summaries_with_windows_left(
    conn: psycopg.Connection, user_id: str, seg_ids: list[int]
) -> list[int]:
    """The coarse segments among ``seg_ids`` with a 30 s window outside ``seg_ids`` in
    their span (what a rebuild merges; the others go whole)."""
    return fetch_column(
        conn,
        "SELECT c.id FROM segments c WHERE c.user_id = %s AND c.id = ANY(%s)"
        " AND c.scale_seconds > 30 AND EXISTS (SELECT 1 FROM segments b"
        "  WHERE b.user_id = %s AND b.scale_seconds = 30 AND b.window_start >= c.window_start"
        "  AND b.window_start < c.window_end AND NOT b.id = ANY(%s))"
        " ORDER BY c.id",
        (user_id, seg_ids, user_id, seg_ids),
    )


def unreferenced_media(conn: psycopg.Connection, user_id: str, media_keys: set[str]) -> list[str]:
    """The containers of ``media_keys`` that no frame or audio row of the user points into."""
    if not media_keys:
        return []
    keys = sorted(media_keys)
    # A container holds one 30 s window (its start is in its key: media/<user>/<ms>-...), so
    # only rows of that span can point into it: the time indexes bound the look-up.
    starts = [int(k.rsplit("/", 1)[1].split("-", 1)[0]) for k in keys]
    lo, hi = ms_to_dt(min(starts) - WINDOW_MS), ms_to_dt(max(starts) + 2 * WINDOW_MS)
    still = fetch_column(
        conn,
        "SELECT media_key FROM frames WHERE user_id = %s AND captured_at >= %s"
        " AND captured_at < %s AND media_key = ANY(%s)"
        " UNION SELECT media_key FROM audio_chunks WHERE user_id = %s AND started_at >= %s"
        " AND started_at < %s AND media_key = ANY(%s)",
        (user_id, lo, hi, keys, user_id, lo, hi, keys),
    )
    return sorted(media_keys - set(still))


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
