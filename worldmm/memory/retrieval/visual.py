"""Visual retrieval in two modes (paper §3.2), reading time as every memory does
(:mod:`question_time`, on the wearer's clock):

- time range — the query names ISO-8601 times ("2025-05-01T10:02:00Z to 2025-05-01T10:03:00Z",
  or one time for the ±15 s around it; a time without an offset is the wearer's local time):
  frames straight from the store, at most one per second and at most ``MAX_RANGE_FRAMES``,
  spread evenly over the range. Needs no model.
- feature — anything else: query text → ``VisualEncoder.encode_text`` → pgvector cosine →
  top ``settings.visual_top_k`` clips → ``FRAMES_PER_CLIP`` frames of each clip. When the
  question names a time in words ("what did I see yesterday at 3 pm"), only clips of that
  range are searched; with no clip there (or no encoder) the range's frames are returned.

An unavailable encoder gives an empty result with a note, never an error: the agent can still
use the other memories. A time at the edge of the calendar is no constraint, never an error.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import TYPE_CHECKING

from worldmm.encoder.base import EncoderRejected, EncoderUnavailable
from worldmm.memory.retrieval.question_time import at_question_time, iso_range, parse_time
from worldmm.memory.retrieval.reader import FrameRef
from worldmm.memory.retrieval.results import FrameHit, RetrievalResult

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.localtime import Asked

log = logging.getLogger(__name__)

MAX_RANGE_FRAMES = 30
FRAMES_PER_CLIP = 4
MAX_FRAMES_SCANNED = 20_000  # rows read for one range before thinning


def thin_frames(frames: list[FrameRef], start: datetime, end: datetime, cap: int) -> list[FrameRef]:
    """First frame of each time bin: bins are 1 s, or wider so that at most ``cap`` remain."""
    if cap <= 0 or not frames:
        return []
    span = (end - start).total_seconds()
    width = max(1.0, span / cap)
    picked: dict[int, FrameRef] = {}
    for f in sorted(frames, key=lambda f: f.ts):
        b = int((f.ts - start).total_seconds() // width)
        if b >= 0 and b not in picked:
            picked[b] = f
    return [picked[b] for b in sorted(picked)][:cap]


def frames_in_range(
    deps: Deps, user_id: str, start: datetime, end: datetime, as_of: datetime | None
) -> list[FrameHit]:
    if as_of is not None:
        end = min(end, as_of)
    if end <= start:
        return []
    rows = deps.reader.frames(user_id, start, end, MAX_FRAMES_SCANNED)
    kept = thin_frames(rows, start, end, MAX_RANGE_FRAMES)
    return [FrameHit(key=f.key, ts=f.ts) for f in kept]


def frames_of_clips(
    deps: Deps,
    user_id: str,
    query_vec,
    as_of: datetime | None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> list[FrameHit]:
    clips = deps.reader.search_visual(
        user_id, query_vec, deps.settings.visual_top_k, as_of=as_of, start=start, end=end
    )
    hits: list[FrameHit] = []
    for clip in clips:
        end_ = min(clip.end, as_of) if as_of is not None else clip.end
        rows = deps.reader.frames(user_id, clip.start, end_, MAX_FRAMES_SCANNED)
        for f in thin_frames(rows, clip.start, end_, FRAMES_PER_CLIP):
            hits.append(FrameHit(key=f.key, ts=f.ts, segment_id=clip.segment_id, score=clip.score))
    return hits


@at_question_time
async def search_visual(deps: Deps, user_id: str, query: str, asked: Asked) -> RetrievalResult:
    at = asked.at
    window = iso_range(query, asked.tz)
    if window is None:
        span = parse_time(query, at, asked.tz)
        if span.start is not None:  # a time in words: its range, open ends closed by `at`
            window = (span.start, span.end or at)
        hits, note = await _by_feature(deps, user_id, query, at, window)
        if hits or window is None:
            return RetrievalResult(memory_type="visual", query=query, hits=hits, note=note)
    # an ISO range, or a range in words with no clip in it: the range's own frames
    hits = await asyncio.to_thread(frames_in_range, deps, user_id, *window, at)
    return RetrievalResult(memory_type="visual", query=query, hits=hits)


async def _by_feature(
    deps: Deps,
    user_id: str,
    query: str,
    at: datetime,
    window: tuple[datetime, datetime] | None,
) -> tuple[list[FrameHit], str | None]:
    """Frames of the clips nearest the query (within ``window`` when given), or none and why."""
    if deps.encoder is None:
        return [], "visual encoder not configured"
    try:
        vector = await deps.encoder.encode_text(query)
    except EncoderUnavailable as exc:
        log.warning("retrieval.visual_encoder_unavailable error=%s", exc)
        return [], "visual encoder unavailable; search by time range still works"
    except EncoderRejected as exc:
        log.warning("retrieval.visual_query_rejected error=%s", exc)
        return [], f"visual encoder rejected: {exc}"
    start, end = window or (None, None)
    hits = await asyncio.to_thread(frames_of_clips, deps, user_id, vector, at, start, end)
    return hits, None
