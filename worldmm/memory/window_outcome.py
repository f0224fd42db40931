"""What became of one window: the flow logs it, counts it and sends failures to the DLQ."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from worldmm.memory.windows import BaseWindow, CoarseWindow

Window = BaseWindow | CoarseWindow


@dataclass
class WindowOutcome:
    """What became of one window (the flow logs it, counts it, and DLQs failures)."""

    user_id: str
    scale_s: int
    start_ms: int
    status: Literal["complete", "failed", "late", "paused"]
    partial: bool = False
    segment_id: int | None = None
    visual_status: str = "none"
    error: str | None = None
    attempts: int = 1
    counts: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0
    # Why a failed window failed: window_failed (its models) or store_failed (the blob
    # store: its captures are kept in the spool, or ``capture`` for a late one).
    reason: str | None = None
    capture: Any = None  # the late capture whose store failed (it goes to the DLQ whole)

    @property
    def media_durable(self) -> bool:
        """The window's captures are in the blob store (its spool may go)."""
        return self.reason != "store_failed"

    @property
    def key(self) -> str:
        return f"{self.user_id}/{self.scale_s}/{self.start_ms}"

    @classmethod
    def of(
        cls,
        window: Window,
        status: Literal["complete", "failed", "paused"],
        segment_id: int | None,
        **fields: Any,
    ) -> WindowOutcome:
        """What became of ``window`` (its user, scale, start and partial flag) and its
        segment; ``fields``: the rest."""
        return cls(
            window.user_id,
            window.scale_s,
            window.start_ms,
            status,
            partial=window.partial,
            segment_id=segment_id,
            **fields,
        )
