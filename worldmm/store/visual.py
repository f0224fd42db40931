"""Visual memory: one clip embedding per segment, searched by cosine within one user."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
import psycopg

from worldmm.store import knn
from worldmm.store._sql import as_vector, fetch_found, vec_cast
from worldmm.store.models import SegmentRow
from worldmm.store.segments import SEGMENT_COLUMNS

_SEG_COLUMNS = ", ".join(f"g.{c.strip()}" for c in SEGMENT_COLUMNS.split(","))


def upsert_visual_embedding(
    conn: psycopg.Connection,
    user_id: str,
    segment_id: int,
    embedding: Sequence[float] | np.ndarray,
    *,
    mark_segment: bool = True,
) -> int:
    """Store (or replace) the segment's clip embedding, mark its visual status complete and
    return the embedding row's id. NotFoundError if the segment is not this user's.
    ``mark_segment=False``: the caller wrote the segment with that status in this
    transaction (a second update of the row would write every index of it again)."""
    q = as_vector(embedding)
    window = fetch_found(  # read first, then one write: each on the wearer's shard group alone
        conn,
        "SELECT window_start, window_end FROM segments WHERE user_id = %s AND id = %s",
        (user_id, segment_id),
        f"no segment {segment_id} for this user",
    )
    row = fetch_found(
        conn,
        "INSERT INTO visual_embeddings (user_id, segment_id, window_start, window_end, embedding)"
        f" VALUES (%s, %s, %s, %s, %s{vec_cast(q)})"
        " ON CONFLICT ON CONSTRAINT visual_embeddings_segment_key DO UPDATE SET"
        " embedding = EXCLUDED.embedding, window_start = EXCLUDED.window_start,"
        " window_end = EXCLUDED.window_end, updated_at = EXCLUDED.updated_at"
        " RETURNING id",
        (user_id, segment_id, *window, q),
        f"no segment {segment_id} for this user",
    )
    if mark_segment:
        conn.execute(
            "UPDATE segments SET visual_status = 'complete', updated_at = now()"
            " WHERE user_id = %s AND id = %s",
            (user_id, segment_id),
        )
    return int(row[0])


def visual_query(
    as_of: datetime | None = None, start: datetime | None = None, end: datetime | None = None
) -> knn.VectorQuery:
    """The clip search's filters: as_of hides clips whose window had not ended; start/end
    keep windows overlapping [start, end). The window end is in the user's btree."""
    ends = []
    if as_of is not None:
        ends.append(" AND v.window_end <= %(as_of)s")
    if start is not None:
        ends.append(" AND v.window_end > %(start)s")
    starts = " AND v.window_start < %(end)s" if end is not None else ""
    return knn.VectorQuery(
        table="visual_embeddings",
        alias="v",
        columns="v.segment_id",
        tiebreak="segment_id",
        where="".join(ends) + starts,
        params={"as_of": as_of, "start": start, "end": end},
        count_where="".join(ends),
        wrap="WITH nearest AS MATERIALIZED ({})"
        f" SELECT {_SEG_COLUMNS}, n.distance FROM nearest n"
        " JOIN segments g ON g.user_id = %(u)s AND g.id = n.segment_id"
        " ORDER BY n.distance, g.id",
    )


def search_visual(
    conn: psycopg.Connection,
    user_id: str,
    embedding: Sequence[float] | np.ndarray,
    k: int,
    as_of: datetime | None = None,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    exact_rows: int | None = None,
) -> list[tuple[SegmentRow, float]]:
    """This user's k clips nearest the query (cosine, best first) with their segments;
    as_of hides clips whose window had not ended; start/end restrict to overlapping windows.
    Exact below ``exact_rows`` clips (:mod:`worldmm.store.knn`)."""
    query = visual_query(as_of, start, end)
    rows = knn.nearest(conn, query, user_id, as_vector(embedding), k, exact_rows=exact_rows)
    return [(SegmentRow.model_validate(r), 1.0 - float(r["distance"])) for r in rows]
