"""The per-user window cascade as a Bytewax stateful step (the logic is worldmm.memory.windows).

Wall time comes from an injected ``clock`` (epoch seconds) so tests control it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from bytewax.operators import StatefulBatchLogic

from worldmm import metrics
from worldmm.memory.windows import (
    Item,
    Pause,
    PausedItem,
    SessionEnd,
    UserWindows,
    WindowConfig,
    WindowEvent,
)

Clock = Callable[[], float]


UserInput = tuple[str, Item | SessionEnd | Pause]
"""(user id, item, session end or pause): Bytewax builders never see the key, so values
carry it."""


def _without_paused(events: list[WindowEvent]) -> list[WindowEvent]:
    """Captures a privacy pause dropped are counted here and go no further (never stored)."""
    out = []
    for event in events:
        if isinstance(event, PausedItem):
            metrics.PAUSED_CAPTURES.labels(event.item.kind).inc()
        else:
            out.append(event)
    return out


class WindowLogic(StatefulBatchLogic[UserInput, WindowEvent, UserWindows]):
    def __init__(self, state: UserWindows | None, config: WindowConfig, clock: Clock) -> None:
        self.state = state
        self.config = config
        self.clock = clock

    def on_batch(self, values: list[UserInput]) -> tuple[Iterable[WindowEvent], bool]:
        if self.state is None:
            self.state = UserWindows(values[0][0], self.config)
        events = self.state.ingest([v for _, v in values], self.clock())
        return _without_paused(events), self.RETAIN

    def on_notify(self) -> tuple[Iterable[WindowEvent], bool]:
        return (_without_paused(self.state.tick(self.clock())) if self.state else []), self.RETAIN

    def on_eof(self) -> tuple[Iterable[WindowEvent], bool]:
        return (_without_paused(self.state.eof(self.clock())) if self.state else []), self.RETAIN

    def notify_at(self) -> datetime | None:
        wake = self.state.next_wake(self.clock()) if self.state else None
        return None if wake is None else datetime.fromtimestamp(wake, tz=UTC)

    def snapshot(self) -> UserWindows | None:
        return self.state.copy() if self.state is not None else None


def window_builder(config: WindowConfig, clock: Clock):
    """Builder for ``op.stateful_batch``: a fresh or resumed state per user key."""

    def build(resume: UserWindows | None) -> WindowLogic:
        return WindowLogic(resume, config, clock)

    return build
