"""A window's segment row and its status: pending (its captures recorded first), failed, or
paused. Every row is keyed by (user, scale, window start), so a replay overwrites itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from worldmm.blobs import BlobKeyError, user_prefixes
from worldmm.memory.forget_fence import check_fence
from worldmm.memory.window_outcome import Window
from worldmm.memory.windows import BaseWindow, ms_to_dt
from worldmm.store import blob_deletions
from worldmm.store import frames as frame_store
from worldmm.store import segments as segment_store
from worldmm.store import users as user_store
from worldmm.store.frames import AudioBatchRow, FrameBatchRow, MediaRef
from worldmm.store.models import SegmentRow, SegmentWrite

if TYPE_CHECKING:
    from worldmm.deps import Deps


def segment_write(window: Window, **fields) -> SegmentWrite:
    """The segment row of ``window`` (its user, session, scale, span and partial flag);
    ``fields``: the rest."""
    return SegmentWrite(
        user_id=window.user_id,
        session_id=window.session_id,
        scale_seconds=window.scale_s,
        window_start=ms_to_dt(window.start_ms),
        window_end=ms_to_dt(window.end_ms),
        partial=window.partial,
        **fields,
    )


def model_versions(deps: Deps, roles: list[str]) -> tuple[dict, dict]:
    """The segment's model versions and the prompt versions of ``roles``."""
    versions = getattr(deps.roles, "versions", {}) or {}
    prompts = {r: versions[r] for r in roles if r in versions}
    return {"llm": getattr(deps.roles, "label", "?"), "embed": deps.embedder.name}, prompts


def mark_pending(deps: Deps, window: Window, refs: dict[str, MediaRef]) -> None:
    with deps.db.transaction() as conn:
        check_fence(conn)  # a forget since the build started: built again
        user_store.ensure_user(conn, window.user_id)
        existing = segment_store.get_segment_by_window(
            conn, window.user_id, window.scale_s, ms_to_dt(window.start_ms)
        )
        if existing is None:
            segment_store.upsert_segment(conn, segment_write(window, processing_status="pending"))
        else:
            segment_store.set_segment_status(conn, window.user_id, existing.id, "pending", None)
        if isinstance(window, BaseWindow):
            # Captures are recorded before any model runs: a failed window can be rebuilt
            # from them, and timestamp retrieval finds its frames regardless.
            record_captures(conn, window, refs)


def record_captures(conn, window: BaseWindow, refs: dict[str, MediaRef]) -> None:
    # One statement per table for the whole window (was one INSERT per capture). A capture
    # stored before (not in ``refs``) keeps the reference its row has.
    frames, audio = [], []
    for i in window.items:
        key = i.ref.blob_key
        if i.kind == "frames":
            ts = ms_to_dt(i.ts_ms)
            frames.append(FrameBatchRow(i.session_id, ts, i.ref.seq, key, media=refs.get(key)))
        else:
            start, ms, rate = ms_to_dt(i.ts_ms), i.end_ms - i.ts_ms, i.ref.sample_rate
            audio.append(AudioBatchRow(i.session_id, start, ms, rate, key, media=refs.get(key)))
    frame_store.insert_frames(conn, window.user_id, frames)
    frame_store.insert_audio_chunks(conn, window.user_id, audio)


def mark_failed(deps: Deps, window: Window, error: str) -> int:
    with deps.db.transaction() as conn:
        check_fence(conn)
        existing = segment_store.get_segment_by_window(
            conn, window.user_id, window.scale_s, ms_to_dt(window.start_ms)
        )
        if existing is None:
            return segment_store.upsert_segment(
                conn, segment_write(window, processing_status="failed", error=error)
            )
        segment_store.set_segment_status(conn, window.user_id, existing.id, "failed", error[:2000])
        return existing.id


def write_paused(deps: Deps, window: Window, children: list[SegmentRow] | None = None) -> int:
    """A window inside a privacy pause: a segment that says so, with no text, no triples and
    no model call (the day view shows the gap and its reason)."""
    with deps.db.transaction() as conn:
        check_fence(conn)
        user_store.ensure_user(conn, window.user_id)
        segment_id = segment_store.upsert_segment(
            conn, segment_write(window, processing_status="paused", caption=None, transcript=None)
        )
        if children:
            segment_store.link_children(conn, window.user_id, segment_id, [c.id for c in children])
    return segment_id


def queue_wearer_blobs(deps: Deps, user_id: str) -> None:
    """A window stored media for a wearer purged meanwhile: their blobs are queued to go
    again (the deletion sweep works the queue)."""
    try:
        prefixes = user_prefixes(user_id)
    except BlobKeyError:
        return
    with deps.db.transaction() as conn:
        blob_deletions.enqueue(conn, user_id, [(p, "prefix") for p in prefixes])


def queue_container(deps: Deps, user_id: str, key: str) -> None:
    """A container written before a forget showed may hold forgotten captures: queue it,
    and the deletion queue keeps of it only what rows point at
    (:mod:`worldmm.privacy.forget_media`)."""
    with deps.db.transaction() as conn:
        blob_deletions.enqueue(conn, user_id, [(key, "container")])
