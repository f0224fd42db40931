"""The window media container: frames and audio round-trip, one capture is one ranged read,
the same captures always make the same bytes, and damage is detected."""

from __future__ import annotations

import io
import random
import wave

import pytest
from PIL import Image

from tests.fixtures.blobs import unpack
from worldmm.media.container import (
    Capture,
    ContainerError,
    build,
    index_length,
    payload,
    read_index,
)

T0 = 1_767_225_600_000


def _jpeg(colour: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (24, 16), colour).save(buf, format="JPEG")
    return buf.getvalue()


def _wav(seconds: int, rate: int = 8000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(range(256)) * (seconds * rate * 2 // 256))
    return buf.getvalue()


def _window() -> list[Capture]:
    frames = [
        Capture(f"frames/u1/s1/{T0 + k * 1000}-{k}.jpg", "frames", T0 + k * 1000, T0 + k * 1000,
                _jpeg((k * 8, 0, 255 - k * 8)), seq=k)
        for k in range(30)
    ]  # fmt: skip
    audio = [
        Capture(f"audio/u1/s1/{T0 + k * 5000}.wav", "audio", T0 + k * 5000, T0 + (k + 1) * 5000,
                _wav(5), sample_rate=8000, content_type="audio/wav")
        for k in range(6)
    ]  # fmt: skip
    return frames + audio


def test_frames_and_audio_round_trip() -> None:
    captures = _window()
    c = build(captures)
    assert unpack(c.data) == {x.key: x.data for x in captures}
    entries = {e.key: e for e in read_index(c.data)}
    assert entries == {e.key: e for e in c.entries}
    for x in captures:
        e = entries[x.key]
        assert (e.kind, e.ts_ms, e.end_ms, e.seq, e.sample_rate, e.content_type) == (
            x.kind, x.ts_ms, x.end_ms, x.seq, x.sample_rate, x.content_type
        )  # fmt: skip
        # a ranged read of [offset, offset + length) is the capture, nothing around it
        assert c.data[e.offset : e.offset + e.length] == x.data


def test_the_index_alone_is_enough_to_find_a_capture() -> None:
    c = build(_window())
    n = index_length(c.data[:8])
    head = c.data[: 8 + n]  # two small ranged reads: the header, then the index
    (e,) = [e for e in read_index(head) if e.key.endswith("-7.jpg")]
    assert payload(c.data, e) == _window()[7].data


def test_same_captures_same_bytes_whatever_the_order() -> None:
    captures = _window()
    shuffled = captures[:]
    random.Random(3).shuffle(shuffled)
    a, b = build(captures), build(shuffled)
    assert a.data == b.data and a.digest == b.digest and len(a.digest) == 20
    changed = [*captures[:-1], Capture(**{**captures[-1].__dict__, "data": _wav(4)})]
    assert build(changed).digest != a.digest


def test_a_key_given_twice_keeps_its_last_bytes() -> None:
    first, again = _window()[0], Capture(**{**_window()[0].__dict__, "data": b"\xff\xd8newer"})
    assert unpack(build([first, again]).data) == {first.key: b"\xff\xd8newer"}


def test_damage_is_detected() -> None:
    c = build(_window())
    e = c.entries[3]
    flipped = bytearray(c.data)
    flipped[e.offset + 5] ^= 0xFF
    with pytest.raises(ContainerError, match="CRC"):
        payload(bytes(flipped), e)
    with pytest.raises(ContainerError, match="magic"):
        read_index(b"JUNK" + c.data[4:])
    with pytest.raises(ContainerError, match="truncated"):
        read_index(c.data[:20])
    with pytest.raises(ContainerError, match="outside"):
        payload(c.data[: e.offset + 1], e)


def test_an_empty_window_is_a_valid_container() -> None:
    c = build([])
    assert unpack(c.data) == {} and c.entries == ()
