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

from dataflows.ingest_metrics import SESSION_ENDS_FORCED
from worldmm import metrics
from worldmm.media.spool import WindowSpool
from worldmm.memory.windows import (
    Item,
    LateItem,
    Pause,
    PausedItem,
    SessionEnd,
    WindowCascade,
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


Floor = Callable[[str], int]
"""Where a wearer's closed windows end (epoch ms), for a state made afresh: read from the
store, so a capture older than the user's last built window is late, not a new window,
after the user's idle state was dropped."""


class WindowLogic(StatefulBatchLogic[UserInput, WindowEvent, WindowCascade]):
    """One wearer's cascade. A state that has held nothing for ``state_idle_s`` of wall
    time is dropped (Bytewax forgets the key): idle wearers cost nothing."""

    def __init__(
        self,
        state: WindowCascade | None,
        config: WindowConfig,
        clock: Clock,
        spool: WindowSpool | None = None,
        floor: Floor | None = None,
    ) -> None:
        self.state = state
        self.config = config
        self.clock = clock
        self.spool = spool
        self.floor = floor

    def on_batch(self, values: list[UserInput]) -> tuple[Iterable[WindowEvent], bool]:
        if self.state is None:
            self.state = WindowCascade(values[0][0], self.config)
            if self.floor is not None:
                self.state.closed_until_ms = self.floor(self.state.user_id)
        state, forced = self.state, self.state.forced_ends
        return self._out(state.ingest([v for _, v in values], self.clock()), forced), self.RETAIN

    def on_notify(self) -> tuple[Iterable[WindowEvent], bool]:
        if self.state is None:
            return [], self.DISCARD
        now = self.clock()
        out = self._out(self.state.tick(now), self.state.forced_ends)
        evict = self.state.evict_at()
        if not out and evict is not None and now >= evict:
            return [], self.DISCARD  # an idle wearer: the next capture starts afresh
        return out, self.RETAIN

    def on_eof(self) -> tuple[Iterable[WindowEvent], bool]:
        if self.state is None:
            return [], self.RETAIN
        return self._out(self.state.eof(self.clock()), self.state.forced_ends), self.RETAIN

    def _out(self, events: list[WindowEvent], forced_before: int) -> list[WindowEvent]:
        assert self.state is not None
        if self.state.forced_ends > forced_before:  # rare: not a metric call per batch
            SESSION_ENDS_FORCED.inc(self.state.forced_ends - forced_before)
        return [self._with_bytes(e) for e in _without_paused(events)]

    def _with_bytes(self, event: WindowEvent) -> WindowEvent:
        """A late capture whose bytes went to the spool while it was held (behind a session
        end, at a snapshot) gets them back: a late capture is stored alone, from memory."""
        item = event.item if isinstance(event, LateItem) else None
        if item is None or self.spool is None or getattr(item.ref, "data", 1) is not None:
            return event
        for start in item.windows():
            data = self.spool.read(event.user_id, start).get(item.ref.blob_key)
            if data is not None:
                return replace(event, item=replace(item, ref=replace(item.ref, data=data)))
        return event

    def notify_at(self) -> datetime | None:
        if self.state is None:
            return None
        wakes = [
            w for w in (self.state.next_wake(self.clock()), self.state.evict_at()) if w is not None
        ]
        return datetime.fromtimestamp(min(wakes), tz=UTC) if wakes else None

    def snapshot(self) -> WindowCascade | None:
        if self.state is None:
            return None
        if self.spool is not None:
            spool_open_windows(self.state, self.spool)
        return self.state.copy()


def spool_open_windows(state: WindowCascade, spool: WindowSpool) -> int:
    """Append the carried bytes of every open window to its spool and drop them from the
    state; returns the captures spooled. A window whose spool refuses keeps its bytes (the
    snapshot then carries them)."""
    n = spool_held(state, spool)
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


def spool_held(state: WindowCascade, spool: WindowSpool) -> int:
    """Input held behind a session end goes to the spools of the windows it will join, as if
    it were in them already (one write per window); returns the captures spooled."""
    by_window: dict[int, list[Item]] = {}
    for x in state.held.values():
        if isinstance(x, Item) and getattr(x.ref, "data", None):
            for start in x.windows():
                by_window.setdefault(start, []).append(x)
    failed: set[str] = set()
    for start, items in by_window.items():
        try:
            spool.append(state.user_id, start, [(i.ref.blob_key, i.ref.data) for i in items])
        except OSError as exc:
            log.warning("spool_failed user=%s start=%s error=%s", state.user_id, start, exc)
            failed.update(i.ref.blob_key for i in items)
    n = 0
    for key, x in list(state.held.items()):
        if isinstance(x, Item) and getattr(x.ref, "data", None) and x.ref.blob_key not in failed:
            state.held[key] = replace(x, ref=x.ref.without_data())
            n += 1
    return n


def window_builder(
    config: WindowConfig,
    clock: Clock,
    spool: WindowSpool | None = None,
    floor: Floor | None = None,
):
    """Builder for ``op.stateful_batch``: a fresh or resumed state per user key."""

    def build(resume: WindowCascade | None) -> WindowLogic:
        return WindowLogic(resume, config, clock, spool, floor)

    return build
