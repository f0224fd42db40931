"""A bound on calls in flight that follows the load: grows with the callers waiting, halves on
a provider's rate-limit answer (429) and then grows back one step at a time (AIMD).

Every wearer's 30 s window closes at the same instant, so work arrives in bursts of N windows.
A fixed bound C makes the burst take ⌈N/C⌉ model-latency rounds; this one admits the burst at
once up to ``ceiling`` (a setting sized to the provider's rate limit), so the default keeps up
without tuning. When the provider still answers 429, :meth:`Slot.throttled` halves the bound
(at most once per round: calls admitted before the last decrease do not decrease it again)
and, until ``calm_s`` passes without another 429, it grows by one slot per ``limit`` calls
finished while others wait — additive increase, as TCP does after a loss.

One instance belongs to one event loop (its waiters are that loop's futures).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass
class Slot:
    """One admitted call; tell the limit if the provider throttled it."""

    limit: AdaptiveLimit
    generation: int

    def throttled(self) -> None:
        self.limit.throttled(self.generation)


class AdaptiveLimit:
    def __init__(
        self,
        initial: int,
        ceiling: int,
        *,
        floor: int = 1,
        calm_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[AdaptiveLimit], None] | None = None,
    ) -> None:
        if not 1 <= floor <= initial <= ceiling:
            raise ValueError(f"need 1 ≤ floor ≤ initial ≤ ceiling, got {floor}/{initial}/{ceiling}")
        self.limit = initial
        self.ceiling = ceiling
        self.floor = floor
        self.calm_s = calm_s
        self.in_flight = 0
        self.peak_in_flight = 0
        self.throttles = 0
        self._clock = clock
        self._on_change = on_change
        self._waiters: deque[asyncio.Future[int]] = deque()
        self._generation = 0  # bumped at each decrease
        self._throttled_at: float | None = None
        self._credit = 0  # calls finished with others waiting, since the last additive step

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def _probing(self) -> bool:
        """After a 429, until ``calm_s`` passes quietly: grow additively, not on demand."""
        return self._throttled_at is not None and self._clock() - self._throttled_at < self.calm_s

    def _admit(self) -> int:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        self._changed()
        return self._generation

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    async def acquire(self) -> int:
        """Wait for a slot; returns the generation the call was admitted in."""
        if not self._waiters:
            if self.in_flight < self.limit:
                return self._admit()
            if self.limit < self.ceiling and not self._probing():
                self.limit += 1  # a caller would wait: the bound follows the backlog
                return self._admit()
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._changed()
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # granted just as we were cancelled: hand it on
            else:
                self._waiters.remove(fut)
            raise

    def release(self) -> None:
        self.in_flight -= 1
        if self._waiters and self._probing():
            self._credit += 1
            if self._credit >= self.limit and self.limit < self.ceiling:
                self.limit += 1
                self._credit = 0
        elif self._waiters and self.limit < self.ceiling:
            self.limit = min(self.ceiling, self.in_flight + len(self._waiters))  # calm again
        while self._waiters and self.in_flight < self.limit:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(self._admit())
        self._changed()

    def throttled(self, generation: int) -> None:
        """A call admitted in ``generation`` got a 429: halve, once per round of calls."""
        self.throttles += 1
        self._throttled_at = self._clock()
        if generation < self._generation:
            return  # admitted before the last decrease: that one already answered it
        self._generation += 1
        self.limit = max(self.floor, self.limit // 2)
        self._credit = 0
        self._changed()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[Slot]:
        generation = await self.acquire()
        try:
            yield Slot(self, generation)
        finally:
            self.release()


def report_to_gauges(scope: str) -> Callable[[AdaptiveLimit], None]:
    """An ``on_change`` that keeps the Prometheus gauges of ``scope`` current."""
    from worldmm import metrics

    limit_g = metrics.CONCURRENCY_LIMIT.labels(scope=scope)
    flight_g = metrics.CONCURRENCY_IN_FLIGHT.labels(scope=scope)
    waiting_g = metrics.CONCURRENCY_WAITING.labels(scope=scope)

    def report(limit: AdaptiveLimit) -> None:
        limit_g.set(limit.limit)
        flight_g.set(limit.in_flight)
        waiting_g.set(limit.waiting)

    return report
