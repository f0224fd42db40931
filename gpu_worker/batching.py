"""Dynamic batching: requests wait in a bounded queue and run in groups of up to ``max_batch``,
or whatever arrived within ``max_wait_s`` of the first one, whichever comes first."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any


class QueueFull(Exception):
    """The batcher's queue is full; ``retry_after_s`` estimates when there will be room."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"encoder queue full; retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


@dataclass
class _Item:
    payload: Any
    future: asyncio.Future


class DynamicBatcher:
    """Runs ``run_batch(list_of_payloads) -> list_of_results`` on ``executor``.

    One batch is in flight per batcher; batchers that share a single-thread executor never
    run the model concurrently.
    """

    def __init__(
        self,
        run_batch: Callable[[list[Any]], list[Any]],
        *,
        executor: Executor,
        max_batch: int,
        max_wait_s: float,
        max_queue: int,
        on_batch: Callable[[int, float], None] | None = None,
    ) -> None:
        self._run_batch = run_batch
        self._executor = executor
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=max_queue)
        self._on_batch = on_batch
        self._task: asyncio.Task | None = None
        self._batch_seconds = 0.05  # running estimate for Retry-After

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if not item.future.done():
                item.future.set_exception(RuntimeError("encoder service is shutting down"))

    async def submit(self, payload: Any) -> Any:
        """Queue one request and wait for its result; raise QueueFull when there is no room."""
        self.start()  # idempotent; also covers hosts that skip the ASGI lifespan
        future = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Item(payload, future))
        except asyncio.QueueFull:
            raise QueueFull(self._retry_after()) from None
        return await future

    def _retry_after(self) -> int:
        batches_ahead = math.ceil(self._queue.qsize() / self.max_batch)
        return max(1, math.ceil(batches_ahead * self._batch_seconds))

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = [await self._queue.get()]
            deadline = loop.time() + self.max_wait_s
            while len(batch) < self.max_batch:
                timeout = deadline - loop.time()
                if timeout <= 0:
                    # Take whatever is already waiting without waiting longer.
                    while len(batch) < self.max_batch and not self._queue.empty():
                        batch.append(self._queue.get_nowait())
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), timeout))
                except TimeoutError:
                    break
            live = [item for item in batch if not item.future.done()]  # skip cancelled callers
            if live:
                await self._run(loop, live)

    async def _run(self, loop: asyncio.AbstractEventLoop, items: list[_Item]) -> None:
        started = time.perf_counter()
        try:
            results = await loop.run_in_executor(
                self._executor, self._run_batch, [item.payload for item in items]
            )
        except Exception as exc:  # the error goes to every caller of the batch
            for item in items:
                if not item.future.done():
                    item.future.set_exception(exc)
            return
        elapsed = time.perf_counter() - started
        self._batch_seconds = 0.8 * self._batch_seconds + 0.2 * elapsed
        if self._on_batch is not None:
            self._on_batch(len(items), elapsed)
        for item, result in zip(items, results, strict=True):
            if not item.future.done():
                item.future.set_result(result)
