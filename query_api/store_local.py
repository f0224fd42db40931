"""SQL the query API needs that ``worldmm.store`` does not offer (yet).

Kept here, clearly apart, so the store's owners can adopt them: finding whose key a key is,
and keyset paging of segments and frames.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

import psycopg
from psycopg.rows import dict_row

from worldmm.store.models import FrameRecord, SegmentRow
from worldmm.store.segments import SEGMENT_COLUMNS
from worldmm.store.users import hash_api_key

FRAME_COLUMNS = "id, user_id, session_id, captured_at, seq, blob_key, content_type, late"


def _dicts(conn: psycopg.Connection, query: str, params: tuple) -> list[dict]:
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query, params)
        return cur.fetchall()


class CursorError(ValueError):
    """A paging cursor that this service did not issue."""


def user_for_key(conn: psycopg.Connection, key: str) -> str | None:
    """The user whose key this is, or None. Looked up by hash: the key itself is never stored
    and a 256-bit random key cannot be probed through lookup timing."""
    row = conn.execute(
        "SELECT id FROM users WHERE api_key_hash = %s LIMIT 1", (hash_api_key(key),)
    ).fetchone()
    return str(row[0]) if row else None


# --- cursors ---------------------------------------------------------------------------
def encode_cursor(ts: datetime, tiebreak: int) -> str:
    raw = json.dumps([ts.isoformat(), tiebreak]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        ts, tiebreak = json.loads(base64.urlsafe_b64decode(padded.encode()))
        parsed = datetime.fromisoformat(ts)
        if parsed.tzinfo is None or not isinstance(tiebreak, int):
            raise ValueError("bad cursor fields")
        return parsed, tiebreak
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise CursorError("invalid cursor") from exc


# --- paged reads -----------------------------------------------------------------------
def page_segments(
    conn: psycopg.Connection,
    user_id: str,
    *,
    start: datetime | None,
    end: datetime | None,
    scale: int | None,
    as_of: datetime | None,
    after: tuple[datetime, int] | None,
    limit: int,
) -> list[SegmentRow]:
    """Segments overlapping [start, end) (and existing at as_of), ordered by (window_start, id),
    strictly after the cursor position."""
    where, args = ["user_id = %s"], [user_id]
    for clause, value in (
        ("window_end > %s", start),
        ("window_start < %s", end),
        ("scale_seconds = %s", scale),
        ("window_end <= %s", as_of),
    ):
        if value is not None:
            where.append(clause)
            args.append(value)
    if after is not None:
        where.append("(window_start, id) > (%s, %s)")
        args.extend(after)
    rows = _dicts(
        conn,
        f"SELECT {SEGMENT_COLUMNS} FROM segments WHERE {' AND '.join(where)}"
        " ORDER BY window_start, id LIMIT %s",
        (*args, limit),
    )
    return [SegmentRow.model_validate(r) for r in rows]


def page_frames(
    conn: psycopg.Connection,
    user_id: str,
    *,
    start: datetime | None,
    end: datetime | None,
    after: tuple[datetime, int] | None,
    limit: int,
) -> list[FrameRecord]:
    """Frames captured in [start, end), ordered by (captured_at, id), after the cursor."""
    where, args = ["user_id = %s"], [user_id]
    if start is not None:
        where.append("captured_at >= %s")
        args.append(start)
    if end is not None:
        where.append("captured_at < %s")
        args.append(end)
    if after is not None:
        where.append("(captured_at, id) > (%s, %s)")
        args.extend(after)
    rows = _dicts(
        conn,
        f"SELECT {FRAME_COLUMNS} FROM frames WHERE {' AND '.join(where)}"
        " ORDER BY captured_at, id LIMIT %s",
        (*args, limit),
    )
    return [FrameRecord.model_validate(r) for r in rows]
