"""Export slots: so many at once per key and in all, and each given back exactly once however
its stream ends: read to the end, failed, cancelled, or dropped unread."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from query_api.exports import ExportSlots, SlotStream


def test_slots_per_key_and_in_all():
    slots = ExportSlots(total=2, per_key=1)
    assert slots.take("a") is None
    assert "of this key" in (slots.take("a") or "")
    assert slots.take("b") is None
    assert "2 exports" in (slots.take("c") or "")
    slots.give("a")
    assert slots.take("c") is None and slots.take("a") is not None


class Released:
    def __init__(self) -> None:
        self.times = 0

    def __call__(self) -> None:
        self.times += 1


async def _read(stream: SlotStream) -> list[bytes]:
    return [chunk async for chunk in stream]


def test_a_stream_read_to_its_end_releases_once():
    released = Released()
    stream = SlotStream(iter([b"a", b"b"]), released)
    assert asyncio.run(_read(stream)) == [b"a", b"b"]
    del stream
    gc.collect()
    assert released.times == 1


def test_a_stream_that_fails_or_is_cancelled_releases():
    def failing():
        yield b"a"
        raise RuntimeError("the database went away")

    released = Released()
    with pytest.raises(RuntimeError):
        asyncio.run(_read(SlotStream(failing(), released)))
    assert released.times == 1

    def slow():
        yield b"a"
        time.sleep(0.3)
        yield b"b"

    async def cancel_mid_way(stream: SlotStream) -> None:
        task = asyncio.ensure_future(_read(stream))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    released = Released()
    asyncio.run(cancel_mid_way(SlotStream(slow(), released)))
    assert released.times == 1


def test_a_stream_never_read_releases_when_dropped():
    released = Released()
    stream = SlotStream(iter([b"a"]), released)
    del stream
    gc.collect()
    assert released.times == 1
