"""Domain models shared by every part (pydantic, timezone-aware datetimes only)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, field_validator

# Window scales in seconds, finest first. The 3 min / 10 min / 1 h levels merge the finer ones.
SCALES: tuple[int, ...] = (30, 180, 600, 3600)
BASE_SCALE = SCALES[0]

MemoryType = Literal["episodic", "semantic", "visual"]
TripleType = Literal["episodic", "semantic"]
ProcessingStatus = Literal["pending", "complete", "failed"]
VisualStatus = Literal["none", "pending", "complete", "failed"]


class Triple(BaseModel):
    """A [subject, predicate, object] fact as extracted; ``object_is_literal`` marks leaf values
    (times, addresses, quantities) that never become entities."""

    subject: str = Field(min_length=1, max_length=300)
    predicate: str = Field(min_length=1, max_length=300)
    object: str = Field(min_length=1, max_length=500)
    object_is_literal: bool = False

    @field_validator("subject", "predicate", "object")
    @classmethod
    def _strip(cls, v: str) -> str:
        v = " ".join(v.split())
        if not v:
            raise ValueError("empty")
        return v

    def as_list(self) -> list[str]:
        return [self.subject, self.predicate, self.object]


class WindowKey(BaseModel):
    """Identity of one window of one user: every derived write is keyed by it."""

    user_id: str
    scale_seconds: int
    window_start: AwareDatetime

    @property
    def window_end(self) -> datetime:
        from datetime import timedelta

        return self.window_start + timedelta(seconds=self.scale_seconds)


class SegmentRecord(BaseModel):
    """A segment as read back from the store."""

    id: int
    user_id: str
    session_id: str | None
    scale_seconds: int
    window_start: AwareDatetime
    window_end: AwareDatetime
    partial: bool = False
    caption: str | None = None
    transcript: str | None = None
    parent_segment_id: int | None = None
    processing_status: ProcessingStatus = "pending"
    visual_status: VisualStatus = "none"
    error: str | None = None
