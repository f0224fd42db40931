"""Re-run windows from what is stored: pending/failed segments (or all, with ``force``) and
clip embeddings left pending while the encoder was down.

A 30 s window is rebuilt from the frames and audio chunks recorded for its time range (late
captures included, so a retrigger also folds in what arrived after the window closed); their
bytes come from the blob store, or from the window's spool when its container was never
stored (the blob store failed: ``store_failed``), in which case the container is stored now; a
coarse window re-merges its stored children, and the stored ancestors of every window that
was redone are re-merged too (a 3 min summary written while a child had failed must not stay
without it). Writes are keyed by (user, scale, window start), so running this twice is
harmless. ``visual_only`` leaves the windows alone and only encodes the pending clips.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from worldmm.media import window as window_media
from worldmm.memory.base_segment import sampled_frames
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import (
    BASE_S,
    BaseWindow,
    CoarseWindow,
    Item,
    WindowId,
    children_of,
    dt_to_ms,
    ms_to_dt,
    parent_of,
)
from worldmm.models import SCALES
from worldmm.store import frames as frame_store
from worldmm.store import segments as segment_store
from worldmm.store import visual as visual_store
from worldmm.store.models import SegmentRow

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.store.db import Database


@dataclass
class RetriggerResult:
    windows: list[WindowOutcome]
    visual_done: int = 0
    visual_still_pending: int = 0


def _select(
    deps: Deps,
    user_id: str,
    session_id: str | None,
    start: datetime | None,
    end: datetime | None,
    force: bool,
    visual_only: bool = False,
) -> tuple[list[SegmentRow], list[SegmentRow]]:
    with deps.db.connection() as conn:
        if visual_only:
            rows = []
        elif force:
            rows = segment_store.list_segments(conn, user_id, start, end, limit=100_000)
            rows = [r for r in rows if session_id is None or r.session_id == session_id]
        else:
            rows = segment_store.segments_needing_work(conn, user_id, session_id, start, end)
        visual = segment_store.segments_needing_work(
            conn, user_id, session_id, start, end, visual=True
        )
    return rows, [v for v in visual if v.scale_seconds == BASE_S]


def base_window_from_store(deps: Deps, seg: SegmentRow) -> BaseWindow:
    with deps.db.connection() as conn:
        frames = frame_store.list_frames(
            conn, seg.user_id, seg.window_start, seg.window_end, limit=10_000
        )
        audio = frame_store.list_audio_chunks(conn, seg.user_id, seg.window_start, seg.window_end)
    items = [
        Item(
            "frames",
            f.blob_key,
            f.session_id or "",
            dt_to_ms(f.captured_at),
            dt_to_ms(f.captured_at),
            CaptureRef(f.blob_key, seq=f.seq),
        )
        for f in frames
    ]
    for a in audio:
        t = dt_to_ms(a.started_at)
        ref = CaptureRef(
            a.blob_key,
            sample_rate=a.sample_rate,
            duration_ms=a.duration_ms,
            content_type="audio/wav",
        )
        items.append(Item("audio", a.blob_key, a.session_id or "", t, t + a.duration_ms, ref))
    # a paused window stays paused when redone (nothing of it was stored to rebuild from)
    paused = seg.processing_status == "paused" and not items
    return BaseWindow(
        seg.user_id, dt_to_ms(seg.window_start), tuple(items), seg.partial, seg.session_id, paused
    )


def coarse_window_from_store(seg: SegmentRow) -> CoarseWindow:
    wid = (seg.scale_seconds, dt_to_ms(seg.window_start))
    return CoarseWindow(
        seg.user_id, seg.scale_seconds, wid[1], tuple(children_of(wid)), seg.partial, seg.session_id
    )


async def retrigger(
    deps: Deps,
    user_id: str,
    *,
    session_id: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    force: bool = False,
    visual_only: bool = False,
) -> RetriggerResult:
    rows, visual = await asyncio.to_thread(
        _select, deps, user_id, session_id, start, end, force, visual_only
    )
    gate = asyncio.Semaphore(deps.settings.in_flight_start)

    async def run(window) -> WindowOutcome:
        async with gate:
            outcome = await process_window(deps, window)
        if isinstance(window, BaseWindow) and outcome.media_durable:
            await asyncio.to_thread(deps.spool.delete, window.user_id, window.start_ms)
        return outcome

    bases = [r for r in rows if r.scale_seconds == BASE_S]
    windows = [await asyncio.to_thread(base_window_from_store, deps, r) for r in bases]
    outcomes = list(await asyncio.gather(*(run(w) for w in windows)))
    coarse = {
        (r.scale_seconds, dt_to_ms(r.window_start)): r for r in rows if r.scale_seconds != BASE_S
    }
    redone = {(BASE_S, w.start_ms) for w in windows}
    for scale in SCALES[1:]:  # finest first: a parent merges its re-run children
        wanted = {a for a in _ancestors(redone) if a[0] == scale} - set(coarse)
        coarse.update(await asyncio.to_thread(_stored_windows, deps, user_id, wanted))
        level = [coarse_window_from_store(r) for w, r in sorted(coarse.items()) if w[0] == scale]
        outcomes += await asyncio.gather(*(run(w) for w in level))
        redone |= {(w.scale_s, w.start_ms) for w in level}

    result = RetriggerResult(outcomes)
    for seg in visual:
        if (BASE_S, dt_to_ms(seg.window_start)) in redone:
            continue  # its rebuild already tried the encoder
        if await _reencode(deps, seg):
            result.visual_done += 1
        else:
            result.visual_still_pending += 1
    return result


def _ancestors(wids: set[WindowId]) -> set[WindowId]:
    out: set[WindowId] = set()
    for wid in wids:
        parent = parent_of(wid)
        while parent is not None:
            out.add(parent)
            parent = parent_of(parent)
    return out


def _stored_windows(deps: Deps, user_id: str, wids: set[WindowId]) -> dict[WindowId, SegmentRow]:
    """The stored segments of these windows (an ancestor never written is not invented)."""
    out: dict[WindowId, SegmentRow] = {}
    with deps.db.connection() as conn:
        for scale, start in sorted(wids):
            row = segment_store.get_segment_by_window(conn, user_id, scale, ms_to_dt(start))
            if row is not None:
                out[(scale, start)] = row
    return out


async def rebuild_summaries(deps: Deps, user_id: str, windows: list[tuple[int, datetime]]) -> int:
    """Rebuild summaries a forget kept (``(scale seconds, start)``, pending) from the
    windows that remain, finest first (a 10 min summary merges the rebuilt 3 min one);
    returns how many completed. One that fails stays failed for ``worldmm retrigger``."""
    wanted = {(scale, dt_to_ms(start)) for scale, start in windows}
    rows = await asyncio.to_thread(_stored_windows, deps, user_id, wanted)
    done = 0
    for scale in SCALES[1:]:
        level = [coarse_window_from_store(r) for w, r in sorted(rows.items()) if w[0] == scale]
        outcomes = await asyncio.gather(*(process_window(deps, w) for w in level))
        done += sum(o.status == "complete" for o in outcomes)
    return done


def forget_derived(
    db: Database, user_id: str, start: datetime | None, end: datetime | None
) -> dict[str, int]:
    """Delete the user's memory built from [start, end) (segments at every scale overlapping
    it, their triples, clip embeddings and audit, entities nothing uses any more, and the
    frame/audio rows) so that a replay rebuilds it from the topics. The blobs stay: the
    replay stores them again under the same keys."""
    from worldmm.store.purge import forget_range

    lo = start or ms_to_dt(0)
    hi = end or datetime(9999, 1, 1, tzinfo=lo.tzinfo)
    with db.transaction() as conn:
        return forget_range(conn, user_id, lo, hi).counts


async def _reencode(deps: Deps, seg: SegmentRow) -> bool:
    from worldmm.encoder.base import EncoderUnavailable

    if deps.encoder is None:
        return False
    window = await asyncio.to_thread(base_window_from_store, deps, seg)
    sampled = sampled_frames(window, deps.settings.frames_per_window)
    media = await asyncio.to_thread(window_media.gather, deps, window)
    keys = [i.key for i in sampled]
    found = await asyncio.to_thread(window_media.read_captures, deps, media, keys)
    jpegs = [found[k] for k in keys if k in found]
    if not jpegs:
        return False
    try:
        vec = await deps.encoder.encode_video(jpegs)
    except EncoderUnavailable:
        return False

    def write() -> None:
        with deps.db.transaction() as conn:
            visual_store.upsert_visual_embedding(conn, seg.user_id, seg.id, vec)

    await asyncio.to_thread(write)
    return True
