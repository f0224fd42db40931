"""What a memory weighs and how often it was recalled (schema 0015): reinforcement writes,
the ranking priors' reads, and the nearest recent note (duplicate notes merge into it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import NamedTuple

import numpy as np
import psycopg

from worldmm.store._sql import as_vector, segments_by_id, vec_cast


class SegmentPrior(NamedTuple):
    """What the ranking priors read of one segment (importance None: not estimated)."""

    importance: float | None
    recall_count: int


def reinforce(
    conn: psycopg.Connection,
    user_id: str,
    segments: Mapping[int, int],
    triples: Mapping[int, int],
    at: datetime,
) -> tuple[int, int]:
    """Add ``segments[id]`` / ``triples[id]`` recalls to those rows of the user and set their
    last-recalled time to ``at`` (never back in time); one statement per table. Rows deleted
    meanwhile are skipped. Returns how many segment and triple rows changed."""
    done = []
    for table, counts in (("segments", segments), ("triples", triples)):
        ids = [i for i, n in counts.items() if n > 0]
        if not ids:
            done.append(0)
            continue
        cur = conn.execute(
            f"UPDATE {table} t SET recall_count = t.recall_count + r.n,"  # noqa: S608 - fixed names
            " last_recalled_at = GREATEST(t.last_recalled_at, %s)"
            " FROM unnest(%s::bigint[], %s::int[]) AS r(id, n)"
            " WHERE t.user_id = %s AND t.id = r.id",
            (at, ids, [counts[i] for i in ids], user_id),
        )
        done.append(cur.rowcount)
    return done[0], done[1]


def segment_priors(
    conn: psycopg.Connection, user_id: str, segment_ids: Sequence[int]
) -> dict[int, SegmentPrior]:
    """Importance and recall count of the user's segments among ``segment_ids``."""
    rows = segments_by_id(conn, user_id, "importance, recall_count", segment_ids)
    return {
        i: SegmentPrior(None if importance is None else float(importance), int(count))
        for i, (importance, count) in rows.items()
    }


def recalled_segments(
    conn: psycopg.Connection, user_id: str, segment_ids: Sequence[int]
) -> dict[int, SegmentPrior]:
    """The recalled segments among ``segment_ids`` (recall count above 0), importance not
    read: all the priors need while importance weighs nothing. Probes into the small index
    of recalled segments (schema 0024), not a row per candidate."""
    rows = conn.execute(
        "SELECT id, recall_count FROM segments"
        " WHERE user_id = %s AND recall_count > 0 AND id = ANY(%s)",
        (user_id, list(segment_ids)),
    ).fetchall()
    return {int(i): SegmentPrior(None, int(n)) for i, n in rows}


def nearest_note(
    conn: psycopg.Connection,
    user_id: str,
    embedding: np.ndarray,
    since: datetime,
    until: datetime,
) -> tuple[int, float] | None:
    """The user's note ending in ``[since, until]`` whose text embedding is nearest
    ``embedding``: (segment id, cosine), or None when there is none."""
    q = as_vector(embedding)
    row = conn.execute(
        f"SELECT s.id, 1 - (e.embedding <=> %s{vec_cast(q)}) FROM segments s"  # noqa: S608
        " JOIN segment_embeddings e ON e.segment_id = s.id AND e.user_id = s.user_id"
        " WHERE s.user_id = %s AND s.source_topic = 'note'"
        " AND s.window_end BETWEEN %s AND %s ORDER BY 2 DESC, s.id LIMIT 1",
        (q, user_id, since, until),
    ).fetchone()
    return None if row is None else (int(row[0]), float(row[1]))


def recent_embeddings(
    conn: psycopg.Connection, user_id: str, scale: int, before: datetime, limit: int
) -> np.ndarray:
    """Text embeddings of the user's ``limit`` latest segments of ``scale`` that ended at or
    before ``before`` (newest first; an empty array when there are none). Read in binary:
    every window's importance reads 20 of them, and parsing a 384-d vector's text took
    ~170 µs of the ingest worker's CPU (the binary form ~2 µs)."""
    rows = conn.execute(
        "SELECT embedding FROM segment_embeddings WHERE user_id = %s AND scale_seconds = %s"
        " AND window_end <= %s ORDER BY window_end DESC LIMIT %s",
        (user_id, scale, before, limit),
        binary=True,
    ).fetchall()
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack(
        [as_vector(r[0].to_numpy() if hasattr(r[0], "to_numpy") else r[0]) for r in rows]
    )


class FineWindow(NamedTuple):
    """What the importance estimate reads of a stored 30 s segment."""

    segment_id: int
    window_start: datetime
    caption: str
    transcript: str
    entities: list[str]
    embedding: np.ndarray | None
    rated: bool  # importance from a model or a note: kept


def fine_windows(conn: psycopg.Connection, user_id: str) -> list[FineWindow]:
    """The user's complete 30 s segments in window order, with the names in their episodic
    triples and their text embeddings."""
    rows = conn.execute(
        "SELECT s.id, s.window_start, coalesce(s.caption, ''), coalesce(s.transcript, ''),"
        " array(SELECT DISTINCT e.surface_form FROM triples t JOIN entities e"
        "   ON e.user_id = t.user_id AND e.id IN (t.subject_entity_id, t.object_entity_id)"
        "   WHERE t.user_id = %(u)s AND t.segment_id = s.id AND t.memory_type = 'episodic'),"
        " g.embedding, s.importance_source IN ('model', 'note')"
        " FROM segments s LEFT JOIN segment_embeddings g"
        " ON g.user_id = s.user_id AND g.segment_id = s.id"
        " WHERE s.user_id = %(u)s AND s.scale_seconds = 30 AND s.processing_status = 'complete'"
        " ORDER BY s.window_start, s.id",
        {"u": user_id},
    ).fetchall()
    return [
        FineWindow(
            int(r[0]),
            r[1],
            r[2],
            r[3],
            list(r[4]),
            None
            if r[5] is None
            else as_vector(r[5].to_numpy() if hasattr(r[5], "to_numpy") else r[5]),
            bool(r[6]),
        )
        for r in rows
    ]


def set_estimates(conn: psycopg.Connection, user_id: str, values: Mapping[int, float]) -> int:
    """Store estimated importances of the user's segments (one statement)."""
    if not values:
        return 0
    ids = list(values)
    return conn.execute(
        "UPDATE segments s SET importance = v.x, importance_source = 'estimate'"
        " FROM unnest(%s::bigint[], %s::real[]) AS v(id, x)"
        " WHERE s.user_id = %s AND s.id = v.id",
        (ids, [values[i] for i in ids], user_id),
    ).rowcount


def summaries_from_windows(conn: psycopg.Connection, user_id: str) -> int:
    """Every coarse segment not rated by a model takes the highest importance of the 30 s
    windows it covers (what construction gives it, level by level)."""
    return conn.execute(
        "UPDATE segments p SET importance = m.x, importance_source = 'estimate'"
        " FROM (SELECT p2.id, max(c.importance) AS x FROM segments p2 JOIN segments c"
        "   ON c.user_id = p2.user_id AND c.scale_seconds = 30"
        "   AND c.window_start >= p2.window_start AND c.window_end <= p2.window_end"
        "   WHERE p2.user_id = %s AND p2.scale_seconds > 30 GROUP BY p2.id) m"
        " WHERE p.user_id = %s AND p.id = m.id AND m.x IS NOT NULL"
        " AND p.importance_source IS DISTINCT FROM 'model'",
        (user_id, user_id),
    ).rowcount
