"""Retrying outbound calls: one policy value, one loop (tenacity), one Retry-After rule.

Each call site decides *what* is worth another try: ``retry_on`` names the reason an error
deserves one (``retry_result`` the same for a returned value, such as a 503 response), or
answers None. This module decides *how*: exponential backoff from ``backoff_s``, doubling up
to ``max_delay_s`` (full jitter when asked, so callers throttled together spread out); the
server's Retry-After instead, when it sends one (seconds or an HTTP date, capped the same);
at most ``max_retries`` retries and none once ``give_up_s`` have passed. Each retry is logged
under the call's step name. When the retries run out the caller gets what the last attempt
gave: its error raised again, or its value.

The policy of each kind of outbound call is defined together at the end of this module; the
model APIs' SDK clients are built with their own retries off, so this loop is the only one.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, TypeVar

import tenacity
from tenacity import RetryCallState

if TYPE_CHECKING:
    from worldmm.settings import Settings

log = logging.getLogger("worldmm.retry")
T = TypeVar("T")
Reason = Callable[[Any], str | None]  # why this outcome deserves another try, or None


@dataclass(frozen=True)
class RetryPolicy:
    """How to retry. ``RetryPolicy(0)`` never retries; ``max_retries=None`` retries until
    ``give_up_s`` have passed, or for ever."""

    max_retries: int | None = 3
    backoff_s: float = 0.5  # first wait without Retry-After; doubles each retry
    max_delay_s: float = 60.0  # longest wait we accept, whatever the server asks
    jitter: bool = False  # full jitter: each backoff drawn uniformly from [0, backoff]
    retry_after: bool = True  # the server's Retry-After replaces the backoff
    give_up_s: float | None = None  # no retry once this long has passed since the first try

    def __post_init__(self) -> None:
        if self.max_retries is not None and self.max_retries < 0:
            raise ValueError("max_retries must be >= 0 (or None: no limit)")
        if self.backoff_s < 0 or self.max_delay_s < 0:
            raise ValueError("backoff_s and max_delay_s must be >= 0")
        if self.give_up_s is not None and self.give_up_s < 0:
            raise ValueError("give_up_s must be >= 0 (or None: never)")

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry ``attempt`` (0-based), given the server's Retry-After."""
        asked = parse_retry_after(retry_after) if self.retry_after else None
        if asked is not None:
            return min(asked, self.max_delay_s)
        backoff = tenacity.wait_random_exponential if self.jitter else tenacity.wait_exponential
        state = RetryCallState(None, None, (), {})  # tenacity's waits read its attempt number
        state.attempt_number = attempt + 1
        return backoff(multiplier=self.backoff_s, max=self.max_delay_s)(state)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After as seconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); None when
    absent or unusable (the caller then backs off on its own)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)  # OpenAI-compatible servers send fractions ("0.5")
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)


def retry_after_of(outcome: object) -> str | None:
    """The Retry-After header of a response, or of the response an error carries (httpx's
    ``HTTPStatusError``, the OpenAI SDK's ``APIStatusError``)."""
    response = getattr(outcome, "response", outcome)
    headers = getattr(response, "headers", None)
    return headers.get("retry-after") if headers is not None else None


def _never(_: object) -> None:
    return None


def call_with_retry(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    step: str,
    retry_on: Reason = _never,
    retry_result: Reason = _never,
    on_retry: Callable[[str], None] | None = None,
    sleep: Callable[[float], object] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    log_level: int = logging.WARNING,
) -> T:
    """``fn()``, tried again as ``policy`` says while ``retry_on`` (for an error) or
    ``retry_result`` (for a value) names a reason; ``on_retry(reason)`` before each wait."""
    controls = _controls(policy, step, retry_on, retry_result, on_retry, clock, log_level)
    return tenacity.Retrying(sleep=lambda s: sleep(float(s)), **controls)(fn)


async def acall_with_retry(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    step: str,
    retry_on: Reason = _never,
    retry_result: Reason = _never,
    on_retry: Callable[[str], None] | None = None,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    log_level: int = logging.WARNING,
) -> T:
    """The async form of :func:`call_with_retry`: ``await fn()``, waiting without a thread."""

    async def attempt() -> T:  # tenacity awaits only coroutine functions, not lambdas
        return await fn()

    async def nap(seconds: float) -> None:
        await sleep(float(seconds))

    controls = _controls(policy, step, retry_on, retry_result, on_retry, clock, log_level)
    return await tenacity.AsyncRetrying(sleep=nap, **controls)(attempt)


def _controls(
    policy: RetryPolicy,
    step: str,
    retry_on: Reason,
    retry_result: Reason,
    on_retry: Callable[[str], None] | None,
    clock: Callable[[], float],
    log_level: int,
) -> dict[str, Any]:
    """tenacity's stop, wait, retry and hooks for one call under ``policy``."""
    started = clock()

    def reason(state: RetryCallState) -> str | None:
        failed, value = _outcome(state)
        if not failed:
            return retry_result(value)
        # cancellation, Ctrl-C and exit are never retried, whatever the call site says
        return retry_on(value) if isinstance(value, Exception) else None

    def stop(state: RetryCallState) -> bool:
        spent = policy.max_retries is not None and state.attempt_number > policy.max_retries
        late = policy.give_up_s is not None and clock() - started >= policy.give_up_s
        return spent or late

    def wait(state: RetryCallState) -> float:
        hint = retry_after_of(_outcome(state)[1]) if policy.retry_after else None
        return policy.delay(state.attempt_number - 1, hint)

    def before_sleep(state: RetryCallState) -> None:
        why = reason(state) or "unknown"
        if on_retry is not None:
            on_retry(why)
        n, (failed, value) = state.attempt_number, _outcome(state)
        if n <= 3 or n % 10 == 0:  # a long outage must not flood the log
            first_line = str(value).strip().split("\n", 1)[0] or type(value).__name__
            error = first_line if failed else why
            message = "retry step=%s attempt=%d reason=%s wait_s=%.2f error=%.300s"
            log.log(log_level, message, step, n, why, state.upcoming_sleep, error)

    return {
        "stop": stop,
        "wait": wait,
        "retry": lambda state: reason(state) is not None,
        "before_sleep": before_sleep,
        # retries spent: the last attempt's value, or its error raised again
        "retry_error_callback": lambda state: state.outcome.result(),
    }


def _outcome(state: RetryCallState) -> tuple[bool, Any]:
    """Whether the attempt just made failed, and its error or value."""
    outcome = state.outcome
    assert outcome is not None  # tenacity sets it before it asks
    return outcome.failed, outcome.exception() if outcome.failed else outcome.result()


# --- the policy of each kind of outbound call ------------------------------------------------
# Each is written here once. The two that settings tune read their tries (and the encoder its
# first backoff) from Settings, whose defaults are the only ones: WORLDMM_LLM_MAX_RETRIES;
# WORLDMM_GPU_MAX_RETRIES and WORLDMM_GPU_RETRY_BACKOFF_S.

# the query API's typed client (429 and 503; a question is never asked twice for a 502)
API_CLIENT = RetryPolicy(3, backoff_s=0.5, max_delay_s=60.0)
# long-running writers wait a PostgreSQL outage out: 0.25 s doubling to 5 s, for ever
DB_OUTAGE = RetryPolicy(None, backoff_s=0.25, max_delay_s=5.0, retry_after=False)
# a producer whose local queue is full serves delivery reports 0.1 s, then tries again
KAFKA_QUEUE_FULL = RetryPolicy(None, backoff_s=0.1, max_delay_s=0.1, retry_after=False)


def model_policy(settings: Settings) -> RetryPolicy:
    """Model API calls, chat, embeddings and transcription alike (429, 5xx, timeouts,
    connection errors): jitter spreads the retries of a throttled burst."""
    return RetryPolicy(settings.llm_max_retries, backoff_s=0.5, max_delay_s=30.0, jitter=True)


def encoder_policy(settings: Settings) -> RetryPolicy:
    """The GPU worker (connection errors, timeouts, 5xx; 503 when its queue is full)."""
    return RetryPolicy(
        settings.gpu_max_retries, backoff_s=settings.gpu_retry_backoff_s, max_delay_s=10.0
    )
