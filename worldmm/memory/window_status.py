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
from worldmm.memory.forget_fence import ForgottenMeanwhile, WearerPurged, read_fence, use_fence
from worldmm.memory.summary_segment import build_summary_segment, load_children
from worldmm.memory.window_outcome import Window, WindowOutcome
from worldmm.memory.window_rows import (
    mark_failed,
    mark_pending,
    queue_container,
    queue_wearer_blobs,
    write_paused,
)
from worldmm.memory.windows import BaseWindow, CoarseWindow
from worldmm.store.outage import is_db_unavailable

if TYPE_CHECKING:
    from worldmm.deps import Deps

log = logging.getLogger("worldmm.memory.window_status")


# A forget landing during a build restarts it; forgets of one wearer's same window this
# many times in a row are not a thing people do (the last try's error then fails it).
MAX_FORGET_RESTARTS = 8


async def process_window(deps: Deps, window: Window) -> WindowOutcome:
    """pending → complete, or failed (with the error) after ``window_max_attempts`` tries.
    A 30 s window's captures are stored first; if the blob store fails the window is failed
    at once with reason ``store_failed`` (no model runs: retrigger rebuilds it). Captures in
    a forgotten range are dropped first, and a window nothing is left of is ``forgotten``
    (nothing written); a forget during the build starts it again. Every model call made for
    it is the window's user's usage."""
    with for_user(window.user_id), deps.recent_windows.building(window):
        try:
            return await _restarting(deps, window)
        except WearerPurged:  # not built again: that would make the wearer again
            # what the build stored after the purge's blobs went goes the same way
            await asyncio.to_thread(queue_wearer_blobs, deps, window.user_id)
            return WindowOutcome.of(window, "forgotten", None)


async def _restarting(deps: Deps, window: Window) -> WindowOutcome:
    """The window built, again after each forget that lands while it is built."""
    for _ in range(MAX_FORGET_RESTARTS - 1):
        try:
            return await _fenced(deps, window)
        except WearerPurged:
            raise
        except ForgottenMeanwhile as exc:
            log.info(
                "window_restarted_after_forget user=%s scale=%s start=%s range=%s",
                window.user_id,
                window.scale_s,
                window.start_ms,
                exc,
            )
    return await _fenced(deps, window)


async def _fenced(deps: Deps, window: Window) -> WindowOutcome:
    """The window without what its wearer forgot, built under that fence."""
    fence = await asyncio.to_thread(read_fence, deps, window)
    use_fence(fence)
    if fence.purged:  # nothing is kept of a purged wearer, nor are they made again
        return WindowOutcome.of(window, "forgotten", None)
    if fence.ranges and isinstance(window, BaseWindow):
        kept = fence.kept(window)
        if window.items and not kept.items:
            return WindowOutcome.of(window, "forgotten", None)
        window = kept
    elif (
        fence.ranges
        and isinstance(window, CoarseWindow)
        and not await asyncio.to_thread(load_children, deps, window)
    ):
        return WindowOutcome.of(window, "forgotten", None)
    return await _process_window(deps, window)


def _passes(exc: BaseException) -> bool:
    """Not the window's failure: a database outage (waited out by the caller) or a forget
    during the build (built again)."""
    return is_db_unavailable(exc) or isinstance(exc, ForgottenMeanwhile)


async def _process_window(deps: Deps, window: Window) -> WindowOutcome:
    loop = asyncio.get_running_loop()
    started = loop.time()
    if isinstance(window, BaseWindow) and window.paused:
        segment_id = await asyncio.to_thread(write_paused, deps, window)
        return WindowOutcome.of(window, "paused", segment_id, duration_s=loop.time() - started)
    media: WindowMedia | None = None
    try:
        if isinstance(window, BaseWindow):
            try:
                media = await asyncio.to_thread(store_media, deps, window)
            except MediaStoreFailed as exc:
                return await _store_failed(deps, window, exc, loop.time() - started)
        await asyncio.to_thread(mark_pending, deps, window, media.refs if media else {})
    except Exception as exc:  # noqa: BLE001 - the window is kept and failed, never dropped
        if (
            isinstance(exc, ForgottenMeanwhile)
            and not isinstance(exc, WearerPurged)
            and media
            and media.container_key
        ):
            # stored before the forget showed: the container may hold forgotten captures
            await asyncio.to_thread(queue_container, deps, window.user_id, media.container_key)
        if _passes(exc):
            raise
        return await _unexpected(deps, window, exc, media, loop.time() - started)
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
            if _passes(exc):
                raise  # not this window's fault: the caller waits, or it is built again
            error = f"{type(exc).__name__}: {exc}"
            log.warning(
                "window_failed user=%s scale=%s start=%s attempt=%d error=%s",
                window.user_id,
                window.scale_s,
                window.start_ms,
                attempt,
                error,
            )
    try:
        segment_id = await asyncio.to_thread(mark_failed, deps, window, error)
    except Exception as exc:  # noqa: BLE001 - as above
        if _passes(exc):
            raise
        return await _unexpected(deps, window, exc, media, loop.time() - started)
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


async def _unexpected(
    deps: Deps, window: Window, exc: Exception, media: WindowMedia | None, duration_s: float
) -> WindowOutcome:
    """An error nobody planned for (not the blob store, not a model, not an outage) while the
    window was stored or recorded: its captures stay in the spool, and the window is failed
    with the error's class as its reason, for ``worldmm retrigger``. When even that cannot
    be written, no row points at its captures: the outcome lists them, and the flow puts
    each on the DLQ whole."""
    reason = type(exc).__name__
    error = f"{reason}: {exc}"
    log.error(
        "window_error user=%s scale=%s start=%s error=%s",
        window.user_id,
        window.scale_s,
        window.start_ms,
        error,
        exc_info=exc,
    )

    def record() -> int:
        if isinstance(window, BaseWindow):
            window_media.spool_carried(deps, window)
            mark_pending(deps, window, media.refs if media else {})
        return mark_failed(deps, window, error)

    try:
        segment_id: int | None = await asyncio.to_thread(record)
        unrecorded: tuple = ()
    except Exception as again:  # noqa: BLE001 - the captures go to the DLQ instead
        if _passes(again):
            raise
        log.error(
            "window_unrecorded user=%s start=%s error=%r", window.user_id, window.start_ms, again
        )
        segment_id = None
        unrecorded = window.items if isinstance(window, BaseWindow) else ()
    return WindowOutcome.of(
        window,
        "failed",
        segment_id,
        error=error,
        duration_s=duration_s,
        reason=reason,
        unrecorded=unrecorded,
    )
