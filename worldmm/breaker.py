"""The circuit breaker of outbound calls (worldmm.retry retries one call; this stops calling a
service that keeps failing): after N consecutive failures, fail fast for T seconds, then let
one trial call through (half-open); its success closes the circuit, its failure re-opens it.
The GPU worker's client uses it (worldmm.encoder.client), as :func:`encoder_breaker` sets it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worldmm.settings import Settings


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        failure_threshold: int,
        reset_after_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be >= 1")
        self.failure_threshold = failure_threshold
        self.reset_after_s = reset_after_s
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._opened_at: float | None = None
        self._trial_in_flight = False

    @property
    def state(self) -> BreakerState:
        with self._lock:
            return self._state()

    def _state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock() - self._opened_at >= self.reset_after_s:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def allow(self) -> bool:
        """May a call go out now? In half-open state only one trial call at a time may."""
        with self._lock:
            state = self._state()
            if state is BreakerState.CLOSED:
                return True
            if state is BreakerState.HALF_OPEN and not self._trial_in_flight:
                self._trial_in_flight = True
                return True
            return False

    def retry_in(self) -> float:
        """Seconds until a trial call will be allowed (0 when closed or half-open)."""
        with self._lock:
            if self._opened_at is None:
                return 0.0
            return max(0.0, self.reset_after_s - (self._clock() - self._opened_at))

    def record_success(self) -> None:
        with self._lock:
            self._failures = 0
            self._opened_at = None
            self._trial_in_flight = False

    def abandon(self) -> None:
        """A call that was allowed ended without a verdict (cancelled): free the trial slot."""
        with self._lock:
            self._trial_in_flight = False

    def record_failure(self) -> None:
        with self._lock:
            self._trial_in_flight = False
            if self._opened_at is not None:  # a failed trial: open again for a full period
                self._opened_at = self._clock()
                return
            self._failures += 1
            if self._failures >= self.failure_threshold:
                self._opened_at = self._clock()


def encoder_breaker(settings: Settings) -> CircuitBreaker:
    """The GPU worker's breaker: WORLDMM_GPU_BREAKER_FAILURES and WORLDMM_GPU_BREAKER_RESET_S."""
    return CircuitBreaker(settings.gpu_breaker_failures, settings.gpu_breaker_reset_s)
