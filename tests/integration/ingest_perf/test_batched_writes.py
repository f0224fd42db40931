"""Batched capture writes leave exactly the rows the per-row path leaves.

A small session (one user, two windows of frames and audio, then a replay with some captures
late and one key given twice) goes through the per-row inserts for one user and through the
window's batched path (``record_captures``: one statement per table) for another; the two
users' frame and audio rows must be identical, late flags included.
"""

from __future__ import annotations

import uuid

import psycopg

from worldmm.memory.late_and_control import audio_row
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.window_rows import record_captures
from worldmm.memory.windows import BaseWindow, Item, ms_to_dt
from worldmm.store import frames as frame_store
from worldmm.store.models import FrameRow
from worldmm.store.users import ensure_user

T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a 10 min boundary


def _items(user: str, window: int) -> list[Item]:
    """30 frames at 1 fps and six 5 s audio chunks of one 30 s window."""
    start = T0_MS + window * 30_000
    frames = [
        Item("frames", f"f{k}", "s1", start + k * 1000, start + k * 1000,
             CaptureRef(f"frames/{user}/s1/{start + k * 1000}-{k}.jpg", seq=k))
        for k in range(30)
    ]  # fmt: skip
    audio = [
        Item("audio", f"a{k}", "s1", start + k * 5000, start + (k + 1) * 5000,
             CaptureRef(f"audio/{user}/s1/{start + k * 5000}.wav", sample_rate=8000,
                        duration_ms=5000, content_type="audio/wav"))
        for k in range(6)
    ]  # fmt: skip
    return frames + audio


def _window(user: str, window: int, items: list[Item]) -> BaseWindow:
    return BaseWindow(user, T0_MS + window * 30_000, tuple(items), False, "s1")


def _per_row(conn: psycopg.Connection, user: str, items: list[Item], late: bool) -> None:
    """The path the batched one replaced: one INSERT per capture."""
    for i in items:
        if i.kind == "frames":
            row = FrameRow(user_id=user, session_id=i.session_id, captured_at=ms_to_dt(i.ts_ms),
                           seq=i.ref.seq, blob_key=i.ref.blob_key, late=late)  # fmt: skip
            frame_store.insert_frame(conn, row)
        else:
            frame_store.insert_audio_chunk(conn, audio_row(user, i, late=late))


def _batched(conn: psycopg.Connection, user: str, items: list[Item], late: bool) -> None:
    if not late:
        record_captures(conn, _window(user, 0, items), {})
        return
    frames = [
        frame_store.FrameBatchRow(i.session_id, ms_to_dt(i.ts_ms), i.ref.seq, i.ref.blob_key,
                                  late=True)
        for i in items if i.kind == "frames"
    ]  # fmt: skip
    audio = [
        frame_store.AudioBatchRow(i.session_id, ms_to_dt(i.ts_ms), i.end_ms - i.ts_ms,
                                  i.ref.sample_rate, i.ref.blob_key, late=True)
        for i in items if i.kind == "audio"
    ]  # fmt: skip
    frame_store.insert_frames(conn, user, frames)
    frame_store.insert_audio_chunks(conn, user, audio)


def _rows(conn: psycopg.Connection, user: str) -> tuple[list[tuple], list[tuple]]:
    """Every column but the identity, creation time and user id (which differ by design);
    keys are made user-independent."""
    frames = conn.execute(
        "SELECT session_id, captured_at, seq, replace(blob_key, user_id, 'U'), content_type,"
        " late FROM frames WHERE user_id = %s ORDER BY blob_key",
        (user,),
    ).fetchall()
    audio = conn.execute(
        "SELECT session_id, started_at, duration_ms, sample_rate, codec,"
        " replace(blob_key, user_id, 'U'), late FROM audio_chunks WHERE user_id = %s"
        " ORDER BY blob_key",
        (user,),
    ).fetchall()
    return frames, audio


def test_batched_capture_writes_match_per_row_writes(conn) -> None:
    written = {}
    for name, write in (("per_row", _per_row), ("batched", _batched)):
        user = f"user-{uuid.uuid4().hex[:12]}"
        with conn.transaction():
            ensure_user(conn, user)
            first, second = _items(user, 0), _items(user, 1)
            # Window 1's captures arrive late once before the window itself is recorded
            # (a row is late only if late every time), then windows 0 and 1 on time, then
            # a replay of window 0 with every capture late and one frame given twice.
            write(conn, user, second[:5] + second[30:31], True)
            write(conn, user, first, False)
            write(conn, user, second, False)
            write(conn, user, [*first, first[3]], True)
        written[name] = _rows(conn, user)
    frames, audio = written["batched"]
    assert len(frames) == 60 and len(audio) == 12
    assert not any(f[-1] for f in frames) and not any(a[-1] for a in audio)
    assert written["batched"] == written["per_row"]


def test_batched_late_captures_stay_late_and_duplicates_collapse(conn) -> None:
    user = f"user-{uuid.uuid4().hex[:12]}"
    items = _items(user, 0)
    with conn.transaction():
        ensure_user(conn, user)
        row = frame_store.FrameBatchRow("s1", ms_to_dt(items[0].ts_ms), 0, items[0].ref.blob_key)
        n = frame_store.insert_frames(conn, user, [row._replace(late=True)] * 3)
        assert frame_store.insert_frames(conn, user, []) == 0
    assert n == 1
    frames, _ = _rows(conn, user)
    assert [(f[3], f[-1]) for f in frames] == [(items[0].ref.blob_key.replace(user, "U"), True)]
