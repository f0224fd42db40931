"""What the retrievers return, and how results read as text for the agent and the responder."""

from __future__ import annotations

from datetime import datetime, tzinfo

from pydantic import AwareDatetime, BaseModel, Field

from worldmm.localtime import in_zone
from worldmm.models import MemoryType

NO_RESULTS = "(no results)"


class LaneScore(BaseModel):
    """Where one retrieval lane (lexical, dense, graph) placed a segment: 1-based rank."""

    rank: int
    score: float


class SegmentHit(BaseModel):
    """An episodic passage: a caption (30 s) or summary (coarser scales) with its window.

    ``lanes`` keeps every lane's rank and score behind the fused ``score`` (debugging and the
    API's evidence); ``context`` is the coarser segment a drill-down came from, if any."""

    segment_id: int
    scale: int
    start: AwareDatetime
    end: AwareDatetime
    text: str
    score: float
    transcript: str | None = None
    lanes: dict[str, LaneScore] = Field(default_factory=dict)
    context: str | None = None
    context_segment_id: int | None = None


class TripleHit(BaseModel):
    """A semantic fact; ``invalidated_at`` is as of the query (None while active)."""

    triple_id: int
    subject: str
    predicate: str
    object: str
    score: float
    valid_from: AwareDatetime | None = None
    invalidated_at: AwareDatetime | None = None


class FrameHit(BaseModel):
    """A stored frame (bytes in the blob store under ``key``)."""

    key: str
    ts: AwareDatetime
    segment_id: int | None = None
    score: float | None = None


Hit = SegmentHit | TripleHit | FrameHit
_TIMES = ("start", "end", "ts", "valid_from", "invalidated_at")


def hit_in_zone(hit: Hit, tz: tzinfo) -> Hit:
    """The same hit with its times on ``tz``'s clock (the same instants)."""
    times = {k: in_zone(v, tz) for k in _TIMES if isinstance(v := getattr(hit, k, None), datetime)}
    return hit.model_copy(update=times)


class RetrievalResult(BaseModel):
    """One search of one memory. ``note`` says why results are missing or degraded
    (e.g. the visual encoder is unavailable) — it is shown to the agent, never raised."""

    memory_type: MemoryType
    query: str
    hits: list[SegmentHit] | list[TripleHit] | list[FrameHit]
    note: str | None = None

    def in_zone(self, tz: tzinfo) -> RetrievalResult:
        """The same result with every hit's times on ``tz``'s clock."""
        hits = [hit_in_zone(h, tz) for h in self.hits]
        return self.model_copy(update={"hits": hits})

    def as_text(self) -> str:
        lines = [hit_line(h) for h in self.hits]
        if not lines:
            lines = [NO_RESULTS + (f" {self.note}" if self.note else "")]
        elif self.note:
            lines.append(f"({self.note})")
        return "\n".join(lines)


def _ts(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


def scale_label(seconds: int) -> str:
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def hit_line(hit: Hit) -> str:
    if isinstance(hit, SegmentHit):
        return f"[{_ts(hit.start)} to {_ts(hit.end)}, {scale_label(hit.scale)}] {hit.text}"
    if isinstance(hit, TripleHit):
        since = f" (since {_ts(hit.valid_from)})" if hit.valid_from else ""
        return f"- {hit.subject} {hit.predicate} {hit.object}.{since}"
    where = f" (segment {hit.segment_id})" if hit.segment_id is not None else ""
    return f"frame {hit.key} at {_ts(hit.ts)}{where}"
