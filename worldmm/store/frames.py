"""Frames and audio chunks: rows pointing at blobs, read back by capture time.

A capture's bytes are either inside its window's container (``media_key`` at
``media_offset``, ``media_length`` bytes) or, for rows older than containers and for late
captures, the blob named by ``blob_key``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple, TypeVar

import psycopg
from pydantic import BaseModel

from worldmm.store._sql import fetch_models, user_filter
from worldmm.store.models import AudioChunkRecord, AudioChunkRow, FrameRecord, FrameRow

_MEDIA = "media_key, media_offset, media_length"
_FRAME_COLUMNS = (
    f"id, user_id, session_id, captured_at, seq, blob_key, content_type, late, {_MEDIA}"
)
_AUDIO_COLUMNS = (
    "id, user_id, session_id, started_at, duration_ms, sample_rate, codec, blob_key, late,"
    f" {_MEDIA}"
)
# A row written again keeps its container unless the new write names one (a capture whose
# bytes were already stored is recorded again without re-storing them).
_KEEP_MEDIA = (
    "media_key = COALESCE(EXCLUDED.media_key, {t}.media_key),"
    " media_offset = CASE WHEN EXCLUDED.media_key IS NULL THEN {t}.media_offset"
    " ELSE EXCLUDED.media_offset END,"
    " media_length = CASE WHEN EXCLUDED.media_key IS NULL THEN {t}.media_length"
    " ELSE EXCLUDED.media_length END"
)


class MediaRef(NamedTuple):
    """Where a capture's bytes lie inside a window container."""

    key: str
    offset: int
    length: int


def _insert_capture(
    conn: psycopg.Connection, table: str, row_type: type[BaseModel], capture: BaseModel
) -> int:
    """Record one capture in ``table``, the fields of ``row_type`` its columns (a record
    subclass passed in adds none); idempotent on (user, blob_key), and a replay that finds it
    on time clears its late flag (late only if it was late every time). Returns the row id."""
    values = {name: getattr(capture, name) for name in row_type.model_fields}
    row = conn.execute(
        f"INSERT INTO {table} ({', '.join(values)})"  # noqa: S608 - fixed table, model fields
        f" VALUES ({', '.join(['%s'] * len(values))})"
        f" ON CONFLICT ON CONSTRAINT {table}_blob_key DO UPDATE SET"
        f" late = {table}.late AND EXCLUDED.late"
        " RETURNING id",
        tuple(values.values()),
    ).fetchone()
    assert row is not None
    return int(row[0])


def insert_frame(conn: psycopg.Connection, frame: FrameRow) -> int:
    """Record a frame; idempotent on (user, blob_key). Returns the row id. A replay that
    finds the frame on time clears its late flag (late only if it was late every time)."""
    return _insert_capture(conn, "frames", FrameRow, frame)


class FrameBatchRow(NamedTuple):
    """One frame of :func:`insert_frames` (a tuple, not a model: a window writes dozens)."""

    session_id: str | None
    captured_at: datetime
    seq: int | None
    blob_key: str
    content_type: str = "image/jpeg"
    late: bool = False
    media: MediaRef | None = None


class AudioBatchRow(NamedTuple):
    """One audio chunk of :func:`insert_audio_chunks`."""

    session_id: str | None
    started_at: datetime
    duration_ms: int
    sample_rate: int | None
    blob_key: str
    codec: str = "wav"
    late: bool = False
    media: MediaRef | None = None


def _media_columns(rows: Sequence[FrameBatchRow] | Sequence[AudioBatchRow]) -> tuple[list, ...]:
    keys, offsets, lengths = [], [], []
    for r in rows:
        m = r.media
        keys.append(m.key if m else None)
        offsets.append(m.offset if m else None)
        lengths.append(m.length if m else None)
    return keys, offsets, lengths


R = TypeVar("R", FrameBatchRow, AudioBatchRow)


def _dedupe(rows: Sequence[R]) -> list[R]:
    """One row per blob key (ON CONFLICT DO UPDATE may not touch a row twice in one
    statement); a key given twice is late only if every copy is, as with two single inserts."""
    out: dict[str, R] = {}
    for r in rows:
        seen = out.get(r.blob_key)
        if seen is None:
            out[r.blob_key] = r
        else:
            out[r.blob_key] = seen._replace(late=seen.late and r.late, media=r.media or seen.media)
    return list(out.values())


def insert_frames(conn: psycopg.Connection, user_id: str, rows: Sequence[FrameBatchRow]) -> int:
    """Record many frames of one user in one statement (a window's captures: one round trip,
    not one per frame). Same rows and conflict rule as :func:`insert_frame`; returns how many
    distinct frames were given."""
    rows = _dedupe(rows)
    if not rows:
        return 0
    cols = [list(c) for c in zip(*rows, strict=True)]
    sessions, times, seqs, keys, types, late = cols[:6]
    media = _media_columns(rows)
    conn.execute(
        "INSERT INTO frames (user_id, session_id, captured_at, seq, blob_key, content_type, late,"
        f" {_MEDIA})"
        " SELECT %s, u.* FROM unnest(%s::text[], %s::timestamptz[], %s::bigint[], %s::text[],"
        " %s::text[], %s::boolean[], %s::text[], %s::bigint[], %s::integer[]) AS u"
        " ON CONFLICT ON CONSTRAINT frames_blob_key DO UPDATE SET"
        " late = frames.late AND EXCLUDED.late, " + _KEEP_MEDIA.format(t="frames"),
        (user_id, sessions, times, seqs, keys, types, late, *media),
    )
    return len(rows)


def insert_audio_chunks(
    conn: psycopg.Connection, user_id: str, rows: Sequence[AudioBatchRow]
) -> int:
    """Record many audio chunks of one user in one statement; same rows and conflict rule as
    :func:`insert_audio_chunk`; returns how many distinct chunks were given."""
    rows = _dedupe(rows)
    if not rows:
        return 0
    if any(r.duration_ms < 0 for r in rows):
        raise ValueError("audio chunk duration_ms must be ≥ 0")
    cols = [list(c) for c in zip(*rows, strict=True)]
    sessions, starts, durations, rates, keys, codecs, late = cols[:7]
    media = _media_columns(rows)
    conn.execute(
        "INSERT INTO audio_chunks (user_id, session_id, started_at, duration_ms, sample_rate,"
        f" blob_key, codec, late, {_MEDIA})"
        " SELECT %s, u.* FROM unnest(%s::text[], %s::timestamptz[], %s::integer[],"
        " %s::integer[], %s::text[], %s::text[], %s::boolean[], %s::text[], %s::bigint[],"
        " %s::integer[]) AS u"
        " ON CONFLICT ON CONSTRAINT audio_chunks_blob_key DO UPDATE SET"
        " late = audio_chunks.late AND EXCLUDED.late, " + _KEEP_MEDIA.format(t="audio_chunks"),
        (user_id, sessions, starts, durations, rates, keys, codecs, late, *media),
    )
    return len(rows)


def list_frames(
    conn: psycopg.Connection,
    user_id: str,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 1000,
    *,
    after: tuple[datetime, int] | None = None,
) -> list[FrameRecord]:
    """Frames captured in [start, end), ordered by (captured_at, id).

    after: a keyset cursor (captured_at, id): only frames strictly after it, so pages of
    ``limit`` neither skip nor repeat a frame however many share a capture time.
    """
    where, args = user_filter(
        user_id,
        [
            ("captured_at >= %s", start),
            ("captured_at < %s", end),
            ("(captured_at, id) > (%s, %s)", after),
        ],
    )
    query = f"SELECT {_FRAME_COLUMNS} FROM frames WHERE {where} ORDER BY captured_at, id LIMIT %s"
    return fetch_models(conn, FrameRecord, query, (*args, limit))


def insert_audio_chunk(conn: psycopg.Connection, chunk: AudioChunkRow) -> int:
    """Record an audio chunk; idempotent on (user, blob_key), late as for a frame. Returns
    the row id."""
    return _insert_capture(conn, "audio_chunks", AudioChunkRow, chunk)


def list_audio_chunks(
    conn: psycopg.Connection,
    user_id: str,
    start: datetime | None = None,
    end: datetime | None = None,
    limit: int = 10000,
) -> list[AudioChunkRecord]:
    """Audio chunks overlapping [start, end), in time order."""
    where, args = user_filter(
        user_id,
        [
            ("started_at + duration_ms * interval '1 millisecond' > %s", start),
            ("started_at < %s", end),
        ],
    )
    query = (
        f"SELECT {_AUDIO_COLUMNS} FROM audio_chunks WHERE {where} ORDER BY started_at, id LIMIT %s"
    )
    return fetch_models(conn, AudioChunkRecord, query, (*args, limit))


def stored_media(
    conn: psycopg.Connection, user_id: str, keys: Sequence[str]
) -> dict[str, MediaRef | None]:
    """For each of ``keys`` that has a row (frame or audio chunk): its container reference,
    or None when its bytes are the blob under the key itself."""
    if not keys:
        return {}
    rows = conn.execute(
        f"SELECT blob_key, {_MEDIA} FROM frames WHERE user_id = %s AND blob_key = ANY(%s)"
        f" UNION ALL SELECT blob_key, {_MEDIA} FROM audio_chunks"
        " WHERE user_id = %s AND blob_key = ANY(%s)",
        (user_id, list(keys), user_id, list(keys)),
    ).fetchall()
    return {k: MediaRef(m, o, n) if m is not None else None for k, m, o, n in rows}


def get_frame(conn: psycopg.Connection, user_id: str, blob_key: str) -> FrameRecord | None:
    """The frame row of this user under ``blob_key``."""
    query = f"SELECT {_FRAME_COLUMNS} FROM frames WHERE user_id = %s AND blob_key = %s"
    rows = fetch_models(conn, FrameRecord, query, (user_id, blob_key))
    return rows[0] if rows else None
