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
    status: Literal["complete", "failed", "late", "paused", "forgotten"]
    partial: bool = False
    segment_id: int | None = None
    visual_status: str = "none"
    error: str | None = None
    attempts: int = 1
    counts: dict[str, int] = field(default_factory=dict)
    duration_s: float = 0.0
    # Why a failed window failed: window_failed (its models), store_failed (the blob
    # store: its captures are kept in the spool, or ``capture`` for a late one), or the
    # class of an unexpected error (its captures kept the same way).
    reason: str | None = None
    capture: Any = None  # the late capture whose store failed (it goes to the DLQ whole)
    # Captures of a window that could not even be recorded as failed (no rows point at
    # them): each goes to the DLQ whole, as a record of its topic.
    unrecorded: tuple[Any, ...] = ()

    @property
    def media_durable(self) -> bool:
        """The window's captures are in the blob store (its spool may go): it was built,
        paused, or failed in its models after its captures were stored."""
        return self.status != "failed" or self.reason == "window_failed"

    @property
    def key(self) -> str:
        return f"{self.user_id}/{self.scale_s}/{self.start_ms}"

    @classmethod
    def of(
        cls,
        window: Window,
        status: Literal["complete", "failed", "paused", "forgotten"],
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
