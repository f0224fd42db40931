"""Telling a database outage from a bad write, and waiting one out.

An outage (server restarting, connection refused or cut, pool starved of live connections)
says nothing about the data: the same write succeeds once the server is back. Long-running
writers (the ingest dataflow) therefore wait with capped exponential backoff instead of
counting the outage as a failed attempt or crashing; request handlers answer 503 instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import psycopg

log = logging.getLogger("worldmm.store.outage")

T = TypeVar("T")


def is_db_unavailable(exc: BaseException) -> bool:
    """True for errors of reaching the server, not of the statement: psycopg raises
    OperationalError (and PoolTimeout, a subclass) for refused, cut or shut-down
    connections; a constraint or data error is a DatabaseError of another kind."""
    return isinstance(exc, psycopg.OperationalError)


@dataclass(frozen=True)
class Backoff:
    """Delays of 0.25 s, 0.5 s, ... capped at ``cap_s``; ``give_up_s`` None = wait forever."""

    first_s: float = 0.25
    cap_s: float = 5.0
    give_up_s: float | None = None

    def delay(self, attempt: int) -> float:
        return min(self.cap_s, self.first_s * 2 ** max(0, attempt - 1))


DEFAULT_BACKOFF = Backoff()


def retry_while_down(
    fn: Callable[[], T],
    *,
    what: str,
    backoff: Backoff = DEFAULT_BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``fn()``, retried while the database is unavailable; other errors pass through."""
    started = time.monotonic()
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            if not is_db_unavailable(exc) or _expired(backoff, started):
                raise
            attempt += 1
            _log_wait(what, attempt, backoff, exc)
            sleep(backoff.delay(attempt))


async def retry_while_down_async(
    fn: Callable[[], Awaitable[T]], *, what: str, backoff: Backoff = DEFAULT_BACKOFF
) -> T:
    """The async form: ``await fn()`` again after each outage, sleeping without a thread."""
    started = time.monotonic()
    attempt = 0
    while True:
        try:
            return await fn()
        except Exception as exc:
            if not is_db_unavailable(exc) or _expired(backoff, started):
                raise
            attempt += 1
            _log_wait(what, attempt, backoff, exc)
            await asyncio.sleep(backoff.delay(attempt))


def _expired(backoff: Backoff, started: float) -> bool:
    return backoff.give_up_s is not None and time.monotonic() - started > backoff.give_up_s


def _log_wait(what: str, attempt: int, backoff: Backoff, exc: BaseException) -> None:
    # first and then every 10th wait: an outage of minutes must not flood the log
    if attempt == 1 or attempt % 10 == 0:
        log.warning(
            "db_unavailable what=%s attempt=%d retry_in_s=%.2f error=%s",
            what,
            attempt,
            backoff.delay(attempt),
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
        )
