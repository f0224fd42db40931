"""Memory construction as a Bytewax step that never blocks the worker.

Closed windows run on one asyncio loop in a thread per process, under an adaptive in-flight
bound (every user's window closes at the same instant); finished ones are emitted when the
step is woken, and a coarse window waits for every child it merges. ``snapshot()`` holds the
*inputs* of unfinished work, resubmitted on resume (the writes are idempotent), with their
capture bytes in the window's spool (worldmm.media.spool).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from bytewax.operators import StatefulBatchLogic

from worldmm.deps import Deps
from worldmm.llm.adaptive import AdaptiveLimit, report_to_gauges
from worldmm.media.spool import WindowSpool
from worldmm.memory.late_and_control import record_late
from worldmm.memory.window_outcome import WindowOutcome
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import (
    BASE_S,
    BaseWindow,
    CoarseWindow,
    LateItem,
    WindowEvent,
    WindowId,
    parent_of,
)
from worldmm.store.outage import retry_while_down_async

log = logging.getLogger("worldmm.dataflow.construct")
# Each user with windows in flight is woken this often to collect finished ones: with a
# thousand users, 20 ms meant 50k wake-ups a second; 100 ms adds at most 0.1 s to a window.
POLL = timedelta(milliseconds=100)


Process = Callable[[Deps, WindowEvent], Awaitable[WindowOutcome]]


class AsyncRunner:
    """One event loop in a daemon thread; coroutines in, concurrent futures out."""

    def __init__(
        self,
        deps: Deps,
        concurrency: int,
        process: Process | None = None,
        concurrency_max: int | None = None,
    ) -> None:
        self.deps = deps
        self.process = process or run_event
        self.loop = asyncio.new_event_loop()
        self._concurrency = concurrency
        self._ceiling = max(concurrency, concurrency_max or concurrency)
        # Blocking calls (store, blob reads, a synchronous ASR client) run in threads: enough
        # for every window in flight, made only when needed.
        self.loop.set_default_executor(cf.ThreadPoolExecutor(self._ceiling + 4, "worldmm-io"))
        self._gate: AdaptiveLimit | None = None
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="worldmm-async", daemon=True
        )
        self.thread.start()

    @property
    def gate(self) -> AdaptiveLimit:
        """The windows-in-flight bound (made on the runner's loop, where it is used)."""
        if self._gate is None:
            self._gate = AdaptiveLimit(
                self._concurrency, self._ceiling, on_change=report_to_gauges("windows")
            )
        return self._gate

    async def _gated(self, event: WindowEvent) -> WindowOutcome:
        async with self.gate.slot():
            return await self.process(self.deps, event)

    def submit(self, event: WindowEvent) -> cf.Future[WindowOutcome]:
        return asyncio.run_coroutine_threadsafe(self._gated(event), self.loop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


async def run_event(deps: Deps, event: WindowEvent) -> WindowOutcome:
    # A database outage waits (capped backoff) and redoes the window: the writes are
    # idempotent, and neither failing the window nor stopping the flow would be right.
    if isinstance(event, LateItem):
        try:
            kept = await retry_while_down_async(
                lambda: asyncio.to_thread(record_late, deps, event.user_id, event.item),
                what="record_late",
            )
        except OSError as exc:  # the blob store failed: the capture goes to the DLQ whole
            error = f"store_failed: {type(exc).__name__}: {exc}"
            return WindowOutcome(
                event.user_id,
                BASE_S,
                event.window_start_ms,
                "failed",
                error=error,
                reason="store_failed",
                capture=event.item,
            )
        status = "late" if kept else "forgotten"  # a range its wearer forgot: not kept
        return WindowOutcome(event.user_id, BASE_S, event.window_start_ms, status)
    return await retry_while_down_async(
        lambda: process_window(deps, event), what=f"window {event.user_id}/{event.wid}"
    )


@dataclass
class ConstructState:
    """Picklable: the windows not finished yet (inputs, not futures) and finished children
    that a waiting parent still needs."""

    unfinished: list[WindowEvent] = field(default_factory=list)
    done: set[WindowId] = field(default_factory=set)


class ConstructLogic(StatefulBatchLogic[WindowEvent, WindowOutcome, ConstructState]):
    def __init__(
        self,
        runner: Callable[[], AsyncRunner],
        resume: ConstructState | None,
        spool: WindowSpool | None = None,
    ) -> None:
        self.runner = runner
        self.spool = spool
        self.spooled: set[WindowId] = set()  # windows in flight whose bytes are spooled
        self.done: set[WindowId] = set(resume.done) if resume else set()
        self.running: list[tuple[WindowEvent, cf.Future[WindowOutcome]]] = []
        self.waiting: list[CoarseWindow] = []
        for event in resume.unfinished if resume else []:
            self._accept(event)

    # -- scheduling -------------------------------------------------------------------

    def _accept(self, event: WindowEvent) -> None:
        if isinstance(event, CoarseWindow) and not self._ready(event):
            self.waiting.append(event)
            return
        self.running.append((event, self.runner().submit(event)))

    def _ready(self, event: CoarseWindow) -> bool:
        return all(child in self.done for child in event.children)

    def _harvest(self) -> list[WindowOutcome]:
        out: list[WindowOutcome] = []
        still = []
        for event, fut in self.running:
            if not fut.done():
                still.append((event, fut))
                continue
            exc = fut.exception()
            outcome = fut.result() if exc is None else self._failed(event, exc)
            if isinstance(event, CoarseWindow):
                # its children are kept until it is done, not until it starts: a snapshot
                # taken while it runs resubmits it, and it must find them still done
                self.done.difference_update(event.children)  # each child has one parent
            if not isinstance(event, LateItem) and parent_of(event.wid) is not None:
                self.done.add(event.wid)  # a top window has no parent to wait for it
            if isinstance(event, BaseWindow):
                self._forget_spool(event, outcome)
            out.append(outcome)
        self.running = still
        ready = [w for w in self.waiting if self._ready(w)]
        if ready:
            self.waiting = [w for w in self.waiting if not self._ready(w)]
            for w in ready:
                self.running.append((w, self.runner().submit(w)))
        return out

    def _failed(self, event: WindowEvent, exc: BaseException) -> WindowOutcome:
        """An error that escaped process_window (which records its own failures): the
        window's captures are kept (its spool, and the DLQ), never dropped with it."""
        reason = type(exc).__name__
        log.error("window_crashed user=%s event=%s error=%r", event.user_id, _start(event), exc)
        failed = WindowOutcome(
            event.user_id,
            _scale(event),
            _start(event),
            "failed",
            error=f"{reason}: {exc}",
            reason=reason,
        )
        if isinstance(event, LateItem):
            failed.capture = event.item
        elif isinstance(event, BaseWindow):
            self._spool_carried(event)
            failed.unrecorded = event.items
        return failed

    def _idle(self) -> bool:
        """Nothing in flight, waiting, or kept for a parent: the state may go."""
        return not (self.running or self.waiting or self.done)

    # -- Bytewax hooks ------------------------------------------------------------------

    def on_batch(self, values: list[WindowEvent]) -> tuple[Iterable[WindowOutcome], bool]:
        for event in values:
            self._accept(event)
        out = self._harvest()
        return out, self.DISCARD if self._idle() else self.RETAIN

    def on_notify(self) -> tuple[Iterable[WindowOutcome], bool]:
        out = self._harvest()
        return out, self.DISCARD if self._idle() else self.RETAIN

    def on_eof(self) -> tuple[Iterable[WindowOutcome], bool]:
        out = self._harvest()
        while self.running:
            cf.wait([f for _, f in self.running], return_when=cf.FIRST_COMPLETED)
            out += self._harvest()
        if self.waiting:  # parents whose children never arrive stay for the next run
            log.warning("eof_with_waiting_windows count=%d", len(self.waiting))
        return out, self.RETAIN

    def notify_at(self) -> datetime | None:
        return datetime.now(UTC) + POLL if self.running else None

    def snapshot(self) -> ConstructState:
        unfinished = [self._without_bytes(e) for e, _ in self.running] + list(self.waiting)
        return ConstructState(unfinished, set(self.done))

    # -- capture bytes ------------------------------------------------------------------

    def _without_bytes(self, event: WindowEvent) -> WindowEvent:
        """A 30 s window for the snapshot: its captures' bytes spooled, references kept. If
        the spool refuses, the snapshot carries the bytes instead (nothing is lost)."""
        if not isinstance(event, BaseWindow) or self.spool is None:
            return event
        carried = [
            (i.ref.blob_key, i.ref.data) for i in event.items if getattr(i.ref, "data", None)
        ]
        if not carried:
            return event
        if event.wid not in self.spooled:
            try:
                self.spool.append(event.user_id, event.start_ms, carried)
            except OSError as exc:
                log.warning(
                    "spool_failed user=%s start=%s error=%s", event.user_id, event.start_ms, exc
                )
                return event
            self.spooled.add(event.wid)
        return strip_bytes(event)

    def _spool_carried(self, event: BaseWindow) -> None:
        carried = [
            (i.ref.blob_key, i.ref.data) for i in event.items if getattr(i.ref, "data", None)
        ]
        if self.spool is None or not carried or event.wid in self.spooled:
            return
        try:
            self.spool.append(event.user_id, event.start_ms, carried)
        except OSError as exc:  # the bytes still travel with the outcome to the DLQ
            log.warning(
                "spool_failed user=%s start=%s error=%s", event.user_id, event.start_ms, exc
            )

    def _forget_spool(self, event: BaseWindow, outcome: WindowOutcome) -> None:
        self.spooled.discard(event.wid)
        if self.spool is not None and outcome.media_durable:
            try:
                self.spool.delete(event.user_id, event.start_ms)
            except OSError as exc:  # a leftover spool costs disk, never data
                log.warning("spool_delete_failed user=%s error=%s", event.user_id, exc)


def strip_bytes(window: BaseWindow) -> BaseWindow:
    """The window with its items' bytes dropped (references kept)."""
    items = tuple(
        replace(i, ref=i.ref.without_data()) if getattr(i.ref, "data", None) else i
        for i in window.items
    )
    return replace(window, items=items)


def _scale(event: WindowEvent) -> int:
    return event.scale_s if isinstance(event, CoarseWindow) else BASE_S


def _start(event: WindowEvent) -> int:
    return event.window_start_ms if isinstance(event, LateItem) else event.start_ms


def construct_builder(runner: Callable[[], AsyncRunner], spool: WindowSpool | None = None):
    def build(resume: ConstructState | None) -> ConstructLogic:
        return ConstructLogic(runner, resume, spool)

    return build


__all__ = ["AsyncRunner", "ConstructLogic", "ConstructState", "BaseWindow", "construct_builder"]
