"""One closed window, start to end: a ``pending`` row first, then its build (30 s or coarser),
then ``complete``; ``failed`` with the error after ``window_max_attempts`` tries, which the
caller sends to the DLQ. Everything is keyed by (user, scale, window start), so a replayed
window overwrites itself."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from worldmm.llm.usage_ledger import for_user
from worldmm.media import window as window_media
from worldmm.media.window import MediaStoreFailed, WindowMedia
from worldmm.memory.base_segment import build_base_segment, store_media
from worldmm.memory.summary_segment import build_summary_segment
from worldmm.memory.window_outcome import Window, WindowOutcome
from worldmm.memory.window_rows import mark_failed, mark_pending, write_paused
from worldmm.memory.windows import BaseWindow
from worldmm.store.outage import is_db_unavailable

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger("worldmm.memory.window_status")


async def process_window(deps: Deps, window: Window) -> WindowOutcome:
    """pending → complete, or failed (with the error) after ``window_max_attempts`` tries.
    A 30 s window's captures are stored first; if the blob store fails the window is failed
    at once with reason ``store_failed`` (no model runs: retrigger rebuilds it). Every model
    call made for it is the window's user's usage."""
    with for_user(window.user_id), deps.recent_windows.building(window):
        return await _process_window(deps, window)


async def _process_window(deps: Deps, window: Window) -> WindowOutcome:
    loop = asyncio.get_running_loop()
    started = loop.time()
    if isinstance(window, BaseWindow) and window.paused:
        segment_id = await asyncio.to_thread(write_paused, deps, window)
        return WindowOutcome.of(window, "paused", segment_id, duration_s=loop.time() - started)
    media: WindowMedia | None = None
    if isinstance(window, BaseWindow):
        try:
            media = await asyncio.to_thread(store_media, deps, window)
        except MediaStoreFailed as exc:
            return await _store_failed(deps, window, exc, loop.time() - started)
    await asyncio.to_thread(mark_pending, deps, window, media.refs if media else {})
    attempts = deps.settings.window_max_attempts
    error = ""
    for attempt in range(1, attempts + 1):
        try:
            if isinstance(window, BaseWindow):
                outcome = await build_base_segment(deps, window, media)
            else:
                outcome = await build_summary_segment(deps, window)
            outcome.attempts = attempt
            outcome.duration_s = loop.time() - started
            return outcome
        except Exception as exc:  # noqa: BLE001 - recorded on the segment and in the DLQ
            if is_db_unavailable(exc):
                raise  # not this window's fault: the caller waits for the server and redoes it
            error = f"{type(exc).__name__}: {exc}"
            log.warning(
                "window_failed user=%s scale=%s start=%s attempt=%d error=%s",
                window.user_id,
                window.scale_s,
                window.start_ms,
                attempt,
                error,
            )
    segment_id = await asyncio.to_thread(mark_failed, deps, window, error)
    duration_s = loop.time() - started
    return WindowOutcome.of(
        window,
        "failed",
        segment_id,
        error=error,
        attempts=attempts,
        duration_s=duration_s,
        reason="window_failed",
    )


async def _store_failed(
    deps: Deps, window: BaseWindow, exc: MediaStoreFailed, duration_s: float
) -> WindowOutcome:
    """The container could not be written: keep the captures in the spool, record the rows
    where the same captures will be stored, mark the window failed."""
    error = f"store_failed: {type(exc.cause).__name__}: {exc.cause}"
    log.warning(
        "window_store_failed user=%s start=%s error=%s", window.user_id, window.start_ms, error
    )

    def record() -> int:
        window_media.spool_carried(deps, window)
        mark_pending(deps, window, exc.refs)
        return mark_failed(deps, window, error)

    segment_id = await asyncio.to_thread(record)
    return WindowOutcome.of(
        window, "failed", segment_id, error=error, duration_s=duration_s, reason="store_failed"
    )
