"""Visual retrieval in two modes (paper §3.2):

- time range — the query names ISO-8601 times ("2025-05-01T10:02:00Z to 2025-05-01T10:03:00Z",
  or one time for the ±15 s around it): frames straight from the store, at most one per
  second and at most ``MAX_RANGE_FRAMES``, spread evenly over the range. Needs no model.
- feature — anything else: query text → ``VisualEncoder.encode_text`` → pgvector cosine →
  top ``settings.visual_top_k`` clips → ``FRAMES_PER_CLIP`` frames of each clip.

An unavailable encoder gives an empty result with a note, never an error: the agent can still
use the other memories.
"""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from worldmm.encoder.base import EncoderRejected, EncoderUnavailable
from worldmm.memory.retrieval.reader import FrameRef
from worldmm.memory.retrieval.results import FrameHit, RetrievalResult

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger(__name__)

MAX_RANGE_FRAMES = 30
FRAMES_PER_CLIP = 4
POINT_HALF_WINDOW = timedelta(seconds=15)
MAX_FRAMES_SCANNED = 20_000  # rows read for one range before thinning

_ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")


def parse_time_range(query: str) -> tuple[datetime, datetime] | None:
    """The range a query names with ISO-8601 times (naive times are UTC), or None."""
    stamps = []
    for m in _ISO.finditer(query):
        try:
            ts = datetime.fromisoformat(m.group().replace("Z", "+00:00"))
        except ValueError:
            continue
        stamps.append(ts if ts.tzinfo else ts.replace(tzinfo=UTC))
    if not stamps:
        return None
    if len(stamps) == 1:
        return stamps[0] - POINT_HALF_WINDOW, stamps[0] + POINT_HALF_WINDOW
    start, end = sorted(stamps[:2])
    if start == end:
        return start - POINT_HALF_WINDOW, end + POINT_HALF_WINDOW
    return start, end


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


def frames_of_clips(deps: Deps, user_id: str, query_vec, as_of: datetime | None) -> list[FrameHit]:
    clips = deps.reader.search_visual(user_id, query_vec, deps.settings.visual_top_k, as_of=as_of)
    hits: list[FrameHit] = []
    for clip in clips:
        end = min(clip.end, as_of) if as_of is not None else clip.end
        rows = deps.reader.frames(user_id, clip.start, end, MAX_FRAMES_SCANNED)
        for f in thin_frames(rows, clip.start, end, FRAMES_PER_CLIP):
            hits.append(FrameHit(key=f.key, ts=f.ts, segment_id=clip.segment_id, score=clip.score))
    return hits


async def search_visual(
    deps: Deps, user_id: str, query: str, as_of: datetime | None = None
) -> RetrievalResult:
    window = parse_time_range(query)
    if window is not None:
        hits = await asyncio.to_thread(frames_in_range, deps, user_id, *window, as_of)
        return RetrievalResult(memory_type="visual", query=query, hits=hits)
    if deps.encoder is None:
        return RetrievalResult(
            memory_type="visual", query=query, hits=[], note="visual encoder not configured"
        )
    try:
        vector = await deps.encoder.encode_text(query)
    except EncoderUnavailable as exc:
        log.warning("retrieval.visual_encoder_unavailable error=%s", exc)
        return RetrievalResult(
            memory_type="visual",
            query=query,
            hits=[],
            note="visual encoder unavailable; search by time range still works",
        )
    except EncoderRejected as exc:
        log.warning("retrieval.visual_query_rejected error=%s", exc)
        return RetrievalResult(
            memory_type="visual", query=query, hits=[], note=f"visual encoder rejected: {exc}"
        )
    hits = await asyncio.to_thread(frames_of_clips, deps, user_id, vector, as_of)
    return RetrievalResult(memory_type="visual", query=query, hits=hits)
