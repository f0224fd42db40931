"""Domain models shared by every part (pydantic, timezone-aware datetimes only)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, field_validator

# Window scales in seconds, finest first. The 3 min / 10 min / 1 h levels merge the finer ones.
SCALES: tuple[int, ...] = (30, 180, 600, 3600)
BASE_SCALE = SCALES[0]

# Ids end up in blob keys and file names: keep them to a charset that is safe everywhere.
SAFE_ID_RE = re.compile(r"^[A-Za-z0-9_.@-]{1,128}$")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def to_epoch_ms(ts: datetime) -> int:
    """Exact integer milliseconds (no float rounding), truncated toward the past."""
    if ts.tzinfo is None:
        raise ValueError("naive datetime: capture times must be timezone-aware")
    return (ts - _EPOCH) // _MS


def from_epoch_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


MemoryType = Literal["episodic", "semantic", "visual"]
TripleType = Literal["episodic", "semantic"]
ProcessingStatus = Literal["pending", "complete", "failed", "paused"]
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


class SegmentFields(BaseModel):
    """What a segment holds, written or read back: one window of one user at one scale."""

    user_id: str
    session_id: str | None = None
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


class SegmentRecord(SegmentFields):
    """A segment as read back from the store."""

    id: int


# --- multiple choice: 2-8 options, lettered A-H by position ------------------------------
MIN_CHOICES = 2
MAX_CHOICES = 8
Letter = Literal["A", "B", "C", "D", "E", "F", "G", "H"]
_LABEL = re.compile(r"^\s*\(?([A-Ha-h])[).:]\s+")


def choice_letter(index: int) -> str:
    return chr(ord("A") + index)


def choice_texts(choices: Sequence[str]) -> list[str]:
    """The option texts, checked: 2-8 non-blank strings (else ValueError). A leading label
    that matches the position ("B. eggs" second) is dropped, so letters stay positional."""
    if not MIN_CHOICES <= len(choices) <= MAX_CHOICES:
        raise ValueError(f"give {MIN_CHOICES} to {MAX_CHOICES} choices, got {len(choices)}")
    texts = []
    for i, choice in enumerate(choices):
        m = _LABEL.match(choice)
        text = choice[m.end() :] if m and m.group(1).upper() == choice_letter(i) else choice
        if not text.strip():
            raise ValueError(f"choice {choice_letter(i)} is blank")
        texts.append(text.strip())
    return texts
