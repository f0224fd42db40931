"""Direct dispatch: async calls with bounded concurrency, timeouts and retries (worldmm.retry).

One ``DirectDispatcher`` serves any number of event loops (the query service's loop, the
ingest worker's loop thread, tests' ``asyncio.run``): the SDK client and the in-flight bound
are made per loop, because both bind to the loop that first uses them. The bound is adaptive
(worldmm.llm.adaptive): it starts at ``concurrency``, grows with the calls waiting up to
``concurrency_max`` and halves on a 429. Retries: worldmm.providers.calls.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol, TypeVar

import openai

from worldmm import metrics
from worldmm.llm.adaptive import AdaptiveLimit, report_to_gauges
from worldmm.llm.request import ChatRequest, ChatResult, result_from_body
from worldmm.llm.usage_ledger import NullUsage, UsageRecord, UsageSink
from worldmm.providers.calls import call_model
from worldmm.providers.errors import ModelCallError
from worldmm.retry import RetryPolicy

T = TypeVar("T")


class Dispatcher(Protocol):
    name: str

    async def complete(self, request: ChatRequest) -> ChatResult: ...


class PerLoop:
    """One object per running event loop, made on first use by ``factory``."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._items: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def get(self):
        loop = asyncio.get_running_loop()
        item = self._items.get(loop)
        if item is None:
            item = self._factory()
            self._items[loop] = item
        return item


class DirectDispatcher:
    name = "direct"

    def __init__(
        self,
        client_factory: Callable[[], openai.AsyncOpenAI],
        *,
        provider: str,
        concurrency: int,
        timeout_s: float,
        retry: RetryPolicy,
        concurrency_max: int | None = None,
        usage: UsageSink | None = None,
    ) -> None:
        ceiling = max(concurrency, concurrency_max or concurrency)
        self._clients = PerLoop(client_factory)
        self._limits: PerLoop = PerLoop(
            lambda: AdaptiveLimit(concurrency, ceiling, on_change=report_to_gauges("llm_calls"))
        )
        self.provider = provider
        self.timeout_s = timeout_s
        self.retry = retry
        self.usage: UsageSink = usage or NullUsage()

    def limit(self) -> AdaptiveLimit:
        """The in-flight bound of the running loop."""
        return self._limits.get()

    def client(self) -> openai.AsyncOpenAI:
        """The SDK client of the running loop (the batch dispatcher shares it)."""
        return self._clients.get()

    async def complete(self, request: ChatRequest) -> ChatResult:
        client = self._clients.get()
        started = time.perf_counter()

        async def once() -> ChatResult:
            async with self.limit().slot() as slot:
                try:
                    reply = await client.chat.completions.create(
                        **request.body(), timeout=self.timeout_s
                    )
                except openai.RateLimitError:
                    slot.throttled()  # the provider says too many: fewer calls in flight
                    raise
            return result_from_body(reply.model_dump(), time.perf_counter() - started)

        labels = {"role": request.role, "provider": self.provider, "dispatch": self.name}
        try:
            result = await call_model(once, self.retry, role=request.role, provider=self.provider)
        except ModelCallError:
            metrics.LLM_REQUESTS.labels(**labels, outcome="error").inc()
            raise
        record_success(request, result, self.provider, billed_as(request, result), self.usage)
        return result


def billed_as(request: ChatRequest, result: ChatResult) -> str:
    """A direct call's dispatch label: ``flex`` when the flex tier served it (the reply
    says which tier did; a server that does not say is taken to honour the request)."""
    tier = result.service_tier or request.service_tier
    return "flex" if tier == "flex" else DirectDispatcher.name


def record_success(
    request: ChatRequest, result: ChatResult, provider: str, dispatch: str, usage: UsageSink
) -> None:
    """Count a call that returned, and hand its reported usage to ``usage`` (memory only:
    the ledger writes to the database from its own thread)."""
    metrics.LLM_REQUESTS.labels(
        role=request.role, provider=provider, dispatch=dispatch, outcome="ok"
    ).inc()
    metrics.LLM_LATENCY.labels(role=request.role, provider=provider, dispatch=dispatch).observe(
        result.latency_s
    )
    usage.record(
        UsageRecord(
            at=datetime.now(UTC),
            user_id=request.user_id,
            role=request.role,
            model=result.model or request.model,
            provider=provider,
            dispatch=dispatch,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            cached_tokens=result.cached_tokens,
            reasoning_tokens=result.reasoning_tokens,
        )
    )
