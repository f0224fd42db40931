"""How many exports stream at once: a few per process, one (by default) per key, so no key
can keep the service busy with slow exports. Each export reads on a connection of its own
(worldmm.privacy.export), so the request pool is never what they hold.

The slots are per process: N API processes stream at most N times the limit.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator

from fastapi.concurrency import run_in_threadpool


class ExportSlots:
    """``total`` exports at once, at most ``per_key`` of them by one key (by its hash)."""

    def __init__(self, total: int, per_key: int) -> None:
        self.total = total
        self.per_key = per_key
        self._held: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self, identity: str) -> str | None:
        """Take a slot: None when one is free, else why not (a message for the caller)."""
        with self._lock:
            if self._held[identity] >= self.per_key:
                return f"{self.per_key} export(s) of this key are already streaming"
            if sum(self._held.values()) >= self.total:
                return f"{self.total} exports are already streaming"
            self._held[identity] += 1
        return None

    def give(self, identity: str) -> None:
        with self._lock:
            self._held[identity] -= 1
            if self._held[identity] <= 0:
                del self._held[identity]


_END = object()


class SlotStream:
    """A response body over a blocking chunk iterator (read in worker threads) that gives its
    slot back exactly once: when it ends, fails, is cancelled (the client left), or is dropped
    without ever being read (the client left before the body started)."""

    def __init__(self, chunks: Iterator[bytes], release: Callable[[], None]) -> None:
        self._chunks = chunks
        self._release: Callable[[], None] | None = release

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        try:
            chunk = await run_in_threadpool(next, self._chunks, _END)
        except BaseException:
            self.close()
            raise
        if chunk is _END:
            self.close()
            raise StopAsyncIteration
        return chunk  # type: ignore[return-value]

    def close(self) -> None:
        release, self._release = self._release, None
        if release is None:
            return
        release()
        # a generator a worker thread is still inside cannot be closed here: it closes
        # itself (and its connection) once that read returns and nothing holds it
        close = getattr(self._chunks, "close", None)
        if close is not None:
            with contextlib.suppress(ValueError):
                close()

    def __del__(self) -> None:
        self.close()
