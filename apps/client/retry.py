"""When the client tries a request again: on 429 and 503, after the server's Retry-After when
it sends one, else after an exponential backoff. The policy, its defaults and the waiting are
``worldmm.retry``'s (the one ``RetryPolicy``, re-exported here); this module says which
answers are worth another try."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import httpx

from worldmm.retry import API_CLIENT, RetryPolicy, acall_with_retry, call_with_retry

__all__ = ["API_CLIENT", "RETRY_STATUSES", "RetryPolicy", "asend_with_retry", "send_with_retry"]

RETRY_STATUSES = frozenset({429, 503})
STEP = "api_client"


def _retry_status(response: httpx.Response) -> str | None:
    return f"http_{response.status_code}" if response.status_code in RETRY_STATUSES else None


def send_with_retry(
    send: Callable[[], httpx.Response], policy: RetryPolicy, sleep: Callable[[float], object]
) -> httpx.Response:
    """``send()`` again while it answers 429/503 and ``policy`` allows; the last answer."""
    return call_with_retry(
        send, policy, step=STEP, retry_result=_retry_status, sleep=sleep, log_level=logging.INFO
    )


async def asend_with_retry(
    send: Callable[[], Awaitable[httpx.Response]],
    policy: RetryPolicy,
    sleep: Callable[[float], Awaitable[object]],
) -> httpx.Response:
    """The async form of :func:`send_with_retry`."""
    return await acall_with_retry(
        send, policy, step=STEP, retry_result=_retry_status, sleep=sleep, log_level=logging.INFO
    )
