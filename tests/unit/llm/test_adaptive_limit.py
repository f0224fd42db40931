"""The adaptive in-flight bound on its own: growth with waiters, the ceiling, one decrease per
round of 429s, additive regrowth while probing, and a cancelled waiter handing its slot on."""

from __future__ import annotations

import asyncio

import pytest

from tests.fixtures.clocks import ManualClock
from worldmm.llm.adaptive import AdaptiveLimit


def test_bounds_must_be_ordered() -> None:
    with pytest.raises(ValueError):
        AdaptiveLimit(8, 4)


def test_grows_with_callers_up_to_the_ceiling() -> None:
    async def run() -> tuple[int, int, int]:
        limit = AdaptiveLimit(2, 5)
        for i in range(7):  # acquire without releasing: each extra caller grows the bound
            task = asyncio.ensure_future(limit.acquire())
            await asyncio.sleep(0)
            assert task.done() == (i < 5)
        return limit.limit, limit.in_flight, limit.waiting

    assert asyncio.run(run()) == (5, 5, 2)


def test_one_decrease_per_round_then_additive_growth() -> None:
    clock = ManualClock()

    async def run() -> None:
        limit = AdaptiveLimit(8, 8, clock=clock, calm_s=60)
        gens = [await limit.acquire() for _ in range(8)]
        for g in gens:  # a burst of 429s from calls admitted in the same round
            limit.throttled(g)
        assert limit.limit == 4 and limit.throttles == 8
        for _ in range(8):
            limit.release()
        new = await limit.acquire()
        limit.throttled(new)  # a call admitted after the decrease: halves again
        assert limit.limit == 2
        limit.release()
        # Probing: a waiter does not grow the bound at once; finished calls do, additively.
        held = [await limit.acquire() for _ in range(2)]
        waiter = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0)
        assert not waiter.done() and limit.limit == 2
        limit.release()  # credit 1 of 2
        await asyncio.sleep(0)
        assert waiter.done() and limit.limit == 2  # the freed slot went to the waiter
        assert len(held) == 2
        clock.now = 61  # calm again: demand grows the bound at once
        more = [asyncio.ensure_future(limit.acquire()) for _ in range(3)]
        await asyncio.sleep(0)
        assert all(t.done() for t in more) and limit.limit == 5

    asyncio.run(run())


def test_a_cancelled_waiter_leaves_no_slot_behind() -> None:
    async def run() -> AdaptiveLimit:
        limit = AdaptiveLimit(1, 1)
        await limit.acquire()
        waiter = asyncio.ensure_future(limit.acquire())
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        limit.release()
        return limit

    limit = asyncio.run(run())
    assert (limit.in_flight, limit.waiting) == (0, 0)
