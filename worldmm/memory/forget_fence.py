"""A forget holds for windows being built: their captures inside a forgotten range are
dropped before anything is stored, and a forget that lands while the window is built makes
the build start again.

A window reads its wearer's forgotten ranges once, when its build starts (the fence), and
drops the captures inside them. Every transaction that writes the window's memory then
takes the wearer's forget lock shared and checks for ranges recorded since
(:func:`check_fence`): a forget committed in between raises :class:`ForgottenMeanwhile`,
and :func:`worldmm.memory.window_status.process_window` builds the window again from what
is left. The fence travels in a context variable, so the writers deep in the build (the
segment, the summary, consolidated facts) check it without being handed it; outside a
window's build (no fence) the check does nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import psycopg

from worldmm.memory.windows import BaseWindow, Item, ms_to_dt
from worldmm.store.forgotten import (
    ForgottenRange,
    forgotten_within,
    last_forgotten_id,
    lock_forget,
)
from worldmm.store.users import lock_user, user_exists

if TYPE_CHECKING:
    from worldmm.deps import Deps
    from worldmm.memory.window_outcome import Window


class ForgottenMeanwhile(Exception):
    """A range overlapping the window was forgotten while it was built: build it again."""


class WearerPurged(ForgottenMeanwhile):
    """The window's wearer was purged while it was built: built again, nothing is left."""


@dataclass(frozen=True)
class ForgetFence:
    """The ranges a window's build started from, for one user and span."""

    user_id: str
    start_ms: int
    end_ms: int
    ranges: tuple[ForgottenRange, ...]
    seen_id: int  # the newest range of the user when the build started
    # Whether the wearer must be there to write: they were when the build started, or the
    # flow may not make users. A writer never makes again a wearer purged meanwhile.
    must_exist: bool = False
    exists: bool = True

    @classmethod
    def read(cls, deps: Deps, user_id: str, start_ms: int, end_ms: int) -> ForgetFence:
        with deps.db.connection() as conn:
            seen = last_forgotten_id(conn, user_id)
            ranges = forgotten_within(conn, user_id, ms_to_dt(start_ms), ms_to_dt(end_ms))
            exists = user_exists(conn, user_id)
        must = exists or not deps.settings.ingest_create_users
        return cls(user_id, start_ms, end_ms, tuple(ranges), seen, must, exists)

    @property
    def purged(self) -> bool:
        """The wearer is gone (purged) and may not be made again: nothing to build."""
        return self.must_exist and not self.exists

    def forgets(self, item: Item) -> bool:
        """Whether any part of the capture lies in a forgotten range (the rows a forget
        deletes: frames by capture time, audio chunks by overlap)."""
        lo, hi = ms_to_dt(item.ts_ms), ms_to_dt(max(item.end_ms, item.ts_ms + 1))
        return any(r.overlaps(lo, hi) for r in self.ranges)

    def kept(self, window: BaseWindow) -> BaseWindow:
        """The window without its forgotten captures."""
        if not self.ranges:
            return window
        return replace(window, items=tuple(i for i in window.items if not self.forgets(i)))

    def check(self, conn: psycopg.Connection) -> None:
        """In a writing transaction: hold the forget lock shared, and raise
        ForgottenMeanwhile if a range overlapping the span was recorded since the read."""
        lock_forget(conn, self.user_id, exclusive=False)
        # the wearer's row held (key share) to the commit: a purge waits, then deletes
        # what this transaction wrote; one that went first leaves nothing to write for
        if self.must_exist and not lock_user(conn, self.user_id):
            raise WearerPurged(self.user_id)
        newer = forgotten_within(
            conn,
            self.user_id,
            ms_to_dt(self.start_ms),
            ms_to_dt(self.end_ms),
            after_id=self.seen_id,
        )
        if newer:
            raise ForgottenMeanwhile(f"{self.user_id}: {newer[0].start}..{newer[0].end}")


_FENCE: ContextVar[ForgetFence | None] = ContextVar("worldmm_forget_fence", default=None)


def read_fence(deps: Deps, window: Window) -> ForgetFence:
    return ForgetFence.read(deps, window.user_id, window.start_ms, window.end_ms)


def use_fence(fence: ForgetFence | None) -> None:
    """Make ``fence`` the one this context's writes check (call it in the coroutine that
    builds the window: threads it starts copy the context)."""
    _FENCE.set(fence)


def check_fence(conn: psycopg.Connection) -> None:
    """In a transaction that writes a window's memory: see :meth:`ForgetFence.check` (no-op
    outside a window's build)."""
    fence = _FENCE.get()
    if fence is not None:
        fence.check(conn)
