"""The per-user window cascade as a Bytewax stateful step (the logic is worldmm.memory.windows).

Wall time comes from an injected ``clock`` (epoch seconds) so tests control it.

Items arrive carrying their capture's bytes. At each snapshot the bytes of open windows that
are not spooled yet are appended to the window's spool file (one write per window) and
dropped from the state, so a snapshot holds references, never media; a window that closes
between two snapshots hands its newest captures to construction straight from memory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime

from bytewax.operators import StatefulBatchLogic

from worldmm import metrics
from worldmm.media.spool import WindowSpool
from worldmm.memory.windows import (
    Item,
    Pause,
    PausedItem,
    SessionEnd,
    UserWindows,
    WindowConfig,
    WindowEvent,
)

log = logging.getLogger("worldmm.dataflow.windows")

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
    def __init__(
        self,
        state: UserWindows | None,
        config: WindowConfig,
        clock: Clock,
        spool: WindowSpool | None = None,
    ) -> None:
        self.state = state
        self.config = config
        self.clock = clock
        self.spool = spool

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
        if self.state is None:
            return None
        if self.spool is not None:
            spool_open_windows(self.state, self.spool)
        return self.state.copy()


def spool_open_windows(state: UserWindows, spool: WindowSpool) -> int:
    """Append the carried bytes of every open window to its spool and drop them from the
    state; returns the captures spooled. A window whose spool refuses keeps its bytes (the
    snapshot then carries them)."""
    n = 0
    for start, items in state.open_base.items():
        carried = [i for i in items.values() if getattr(i.ref, "data", None)]
        if not carried:
            continue
        try:
            spool.append(state.user_id, start, [(i.ref.blob_key, i.ref.data) for i in carried])
        except OSError as exc:
            log.warning("spool_failed user=%s start=%s error=%s", state.user_id, start, exc)
            continue
        for i in carried:
            items[i.key] = replace(i, ref=i.ref.without_data())
        n += len(carried)
    return n


def window_builder(config: WindowConfig, clock: Clock, spool: WindowSpool | None = None):
    """Builder for ``op.stateful_batch``: a fresh or resumed state per user key."""

    def build(resume: UserWindows | None) -> WindowLogic:
        return WindowLogic(resume, config, clock, spool)

    return build
