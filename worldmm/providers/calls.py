"""Model API calls through the OpenAI SDK, retried by worldmm.retry alone (the SDK clients are
built with ``max_retries=0``): which errors deserve another try, and the call wrappers that
count each retry in ``worldmm_llm_retries_total`` under the call's role."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import openai

from worldmm import metrics
from worldmm.providers.errors import ModelCallError
from worldmm.retry import RetryPolicy, acall_with_retry, call_with_retry

T = TypeVar("T")


def retry_reason(exc: BaseException) -> str | None:
    """Why an error is worth retrying, or None when it is not (4xx other than 429)."""
    if isinstance(exc, openai.APITimeoutError | asyncio.TimeoutError):
        return "timeout"
    if isinstance(exc, openai.RateLimitError):
        return "rate_limit"
    if isinstance(exc, openai.APIStatusError):
        return "server_error" if exc.status_code >= 500 else None
    if isinstance(exc, openai.APIConnectionError):
        return "connection"
    return None


def _counter(role: str, provider: str) -> Callable[[str], None]:
    def count(reason: str) -> None:
        metrics.LLM_RETRIES.labels(role=role, provider=provider, reason=reason).inc()

    return count


def call_model_sync(call: Callable[[], T], policy: RetryPolicy, *, role: str, provider: str) -> T:
    """``call()``, retried as ``policy`` says while :func:`retry_reason` allows; the last
    error is raised again when the retries run out (embeddings, transcription)."""
    return call_with_retry(
        call, policy, step=f"model.{role}", retry_on=retry_reason, on_retry=_counter(role, provider)
    )


async def call_model(
    call: Callable[[], Awaitable[T]], policy: RetryPolicy, *, role: str, provider: str
) -> T:
    """``await call()``, retried as ``policy`` says while :func:`retry_reason` allows;
    ModelCallError once it fails for good."""
    attempts = 0

    async def attempt() -> T:
        nonlocal attempts
        attempts += 1
        return await call()

    try:
        return await acall_with_retry(
            attempt,
            policy,
            step=f"llm.{role}",
            retry_on=retry_reason,
            on_retry=_counter(role, provider),
            log_level=logging.INFO,  # 429s are how the adaptive bound finds its ceiling
        )
    except Exception as exc:
        raise ModelCallError(
            f"{role}: model call failed after {attempts} attempt(s): {type(exc).__name__}: {exc}",
            role=role,
            status=getattr(exc, "status_code", None),
        ) from exc
