import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from gpu_worker.batching import DynamicBatcher, QueueFull


class Recorder:
    """Records batch sizes; optionally holds every batch until ``gate`` is set."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.sizes: list[int] = []
        self.gate = gate
        self.entered = threading.Event()

    def __call__(self, items):
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(10)
        self.sizes.append(len(items))
        return [x * 2 for x in items]


def _batcher(run, **kw):
    defaults = dict(executor=ThreadPoolExecutor(1), max_batch=4, max_wait_s=0.05, max_queue=64)
    defaults.update(kw)
    return DynamicBatcher(run, **defaults)


def test_groups_up_to_max_batch_and_keeps_order():
    async def main():
        run = Recorder()
        batcher = _batcher(run)
        results = await asyncio.gather(*[batcher.submit(i) for i in range(10)])
        await batcher.stop()
        return run.sizes, results

    sizes, results = asyncio.run(main())
    assert results == [i * 2 for i in range(10)]
    assert sizes == [4, 4, 2]


def test_a_lone_request_runs_after_the_wait_time():
    async def main():
        run = Recorder()
        batcher = _batcher(run, max_batch=8, max_wait_s=0.02)
        result = await asyncio.wait_for(batcher.submit(21), timeout=5)
        await batcher.stop()
        return run.sizes, result

    assert asyncio.run(main()) == ([1], 42)


def test_full_queue_raises_queue_full_with_retry_after():
    async def main():
        gate = threading.Event()
        run = Recorder(gate)
        batcher = _batcher(run, max_batch=1, max_wait_s=0, max_queue=2)
        first = asyncio.ensure_future(batcher.submit(1))
        await asyncio.to_thread(run.entered.wait, 5)  # item 1 is in the model now
        queued = [asyncio.ensure_future(batcher.submit(i)) for i in (2, 3)]
        await asyncio.sleep(0)  # let the two submits enqueue
        with pytest.raises(QueueFull) as info:
            await batcher.submit(4)
        gate.set()
        results = await asyncio.gather(first, *queued)
        await batcher.stop()
        return info.value.retry_after_s, results

    retry_after, results = asyncio.run(main())
    assert retry_after >= 1
    assert results == [2, 4, 6]


def test_a_failing_batch_fails_each_caller_and_the_batcher_goes_on():
    calls = []

    def run(items):
        calls.append(items)
        if len(calls) == 1:
            raise RuntimeError("model exploded")
        return items

    async def main():
        batcher = _batcher(run, max_batch=2)
        outcome = await asyncio.gather(batcher.submit(1), batcher.submit(2), return_exceptions=True)
        after = await batcher.submit(3)
        await batcher.stop()
        return outcome, after

    outcome, after = asyncio.run(main())
    assert all(isinstance(o, RuntimeError) and "exploded" in str(o) for o in outcome)
    assert after == 3
