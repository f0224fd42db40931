"""Model calls in flight follow the load: the bound grows under a backlog and halves when the
(fake, real-wire-format) OpenAI server answers 429.

In-flight counts are taken on the server side: every request's arrival and the moment its
scripted reply is due, so the overlap is what the provider saw.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import openai
import pytest

from fakes.openai_server import FakeOpenAI, Reply, chat_body
from tests.fixtures.calls import Call, max_overlap
from worldmm.llm.dispatch import DirectDispatcher
from worldmm.llm.request import ChatRequest
from worldmm.retry import model_policy
from worldmm.settings import load_settings


class Recorder:
    """Default chat responder: answers after ``delay_s`` and records the request's interval."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict) -> Reply:
        now = time.perf_counter()
        with self._lock:
            self.calls.append(Call("chat", now, now + self.delay_s))
        return Reply(body=chat_body("{}"), delay_s=self.delay_s)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _dispatcher(fake: FakeOpenAI, concurrency: int, ceiling: int) -> DirectDispatcher:
    return DirectDispatcher(
        lambda: openai.AsyncOpenAI(base_url=fake.base_url, api_key="x", max_retries=0),
        provider="fake",
        concurrency=concurrency,
        concurrency_max=ceiling,
        timeout_s=10.0,
        retry=model_policy(load_settings(llm_max_retries=3)),
    )


def _request(i: int) -> ChatRequest:
    return ChatRequest(role="caption", model="m", messages=[{"role": "user", "content": str(i)}])


async def _burst(dispatcher: DirectDispatcher, n: int) -> None:
    await asyncio.gather(*(dispatcher.complete(_request(i)) for i in range(n)))


@pytest.mark.parametrize(("ceiling", "expected_overlap"), [(64, 12), (2, 2)])
def test_calls_in_flight_grow_with_the_backlog(fake, ceiling, expected_overlap) -> None:
    recorder = Recorder(delay_s=0.25)
    fake.chat.default = recorder
    dispatcher = _dispatcher(fake, concurrency=2, ceiling=ceiling)

    async def run() -> int:
        await _burst(dispatcher, 12)
        return dispatcher.limit().limit

    limit = asyncio.run(run())
    assert len(recorder.calls) == 12
    # A backlog of 12 with a starting bound of 2: all 12 reach the provider together, unless
    # the ceiling (the provider's rate limit) says 2.
    assert max_overlap(recorder.calls) == expected_overlap
    assert limit == min(12, ceiling)


def test_a_429_halves_calls_in_flight(fake) -> None:
    recorder = Recorder(delay_s=0.2)
    fake.chat.default = recorder
    dispatcher = _dispatcher(fake, concurrency=16, ceiling=16)

    async def run():
        await _burst(dispatcher, 16)  # the bound at its ceiling, every slot used
        grown = dispatcher.limit().limit
        fake.chat.push(*(Reply.error(429, **{"retry-after": "0.05"}) for _ in range(16)))
        recorder.calls.clear()
        await _burst(dispatcher, 16)  # every first try throttled, then retried
        return grown, dispatcher.limit()

    grown, limit = asyncio.run(run())
    assert grown == 16
    assert limit.throttles == 16
    # Sixteen 429s of one round halve the bound once (not sixteen times), and after a 429
    # it grows back one slot per round: the retries reach the provider 8 (then 9) at a time.
    assert limit.limit in (8, 9)
    assert len(recorder.calls) == 16
    assert 2 <= max_overlap(recorder.calls) <= 9
