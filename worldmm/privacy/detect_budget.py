"""How much face detection a worker process may do: a token bucket of CPU-seconds.

It refills at ``cores`` CPU-seconds per second (``WORLDMM_FACE_BLUR_CORES``) and holds one
30 s window's worth: the windows of every wearer close together at each 30 s boundary, so a
close may spend what the period since the last one earned. A detection is charged its
measured CPU time after it ran (the bucket may dip below empty by the detections already
under way; later frames pay the debt back). The frames the models sample for a window may
empty the bucket; the others only its upper half, so when detection falls short, the sampled
frames of every window are searched before the other frames of any window. A frame the
bucket does not allow is veiled, never stored as sent (docs/privacy.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from worldmm.models import BASE_SCALE


class DetectionBudget:
    """Thread-safe; ``clock`` (wall seconds) and ``cpu_clock`` (the calling thread's CPU
    seconds) are injectable for tests."""

    def __init__(
        self,
        cores: float,
        *,
        burst_s: float = BASE_SCALE,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        if cores < 0 or burst_s <= 0:
            raise ValueError(f"need cores ≥ 0 and burst_s > 0, got {cores}, {burst_s}")
        self.rate = cores
        self.capacity = cores * burst_s
        self.cpu_clock = cpu_clock
        self._clock = clock
        self._tokens = self.capacity
        self._at = clock()
        self._lock = threading.Lock()

    def allows(self, sampled: bool) -> bool:
        """Whether a frame may be searched now (``sampled``: one the models see)."""
        floor = 0.0 if sampled else self.capacity / 2
        with self._lock:
            return self._refilled() > floor

    def charge(self, cpu_s: float) -> None:
        """What a detection cost."""
        with self._lock:
            self._tokens = self._refilled() - cpu_s

    def _refilled(self) -> float:
        now = self._clock()
        self._tokens = min(self.capacity, self._tokens + (now - self._at) * self.rate)
        self._at = now
        return self._tokens
