"""Telling a database outage from a bad write, and waiting one out.

An outage (server restarting, connection refused or cut, pool starved of live connections)
says nothing about the data: the same write succeeds once the server is back. Long-running
writers (the ingest dataflow) therefore wait with capped exponential backoff
(``worldmm.retry.DB_OUTAGE``) instead of counting the outage as a failed attempt or
crashing; request handlers answer 503 instead.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg

from worldmm.retry import DB_OUTAGE, acall_with_retry, call_with_retry

T = TypeVar("T")


def is_db_unavailable(exc: BaseException) -> bool:
    """True for errors of reaching the server, not of the statement: psycopg raises
    OperationalError (and PoolTimeout, a subclass) for refused, cut or shut-down
    connections; a constraint or data error is a DatabaseError of another kind."""
    return isinstance(exc, psycopg.OperationalError)


def retry_while_down(
    fn: Callable[[], T],
    *,
    what: str,
    sleep: Callable[[float], object] = time.sleep,
) -> T:
    """``fn()``, retried while the database is unavailable; other errors pass through."""
    return call_with_retry(fn, DB_OUTAGE, step=f"db.{what}", retry_on=_outage, sleep=sleep)


async def retry_while_down_async(fn: Callable[[], Awaitable[T]], *, what: str) -> T:
    """The async form: ``await fn()`` again after each outage, sleeping without a thread."""
    return await acall_with_retry(fn, DB_OUTAGE, step=f"db.{what}", retry_on=_outage)


def _outage(exc: BaseException) -> str | None:
    return "db_unavailable" if is_db_unavailable(exc) else None
