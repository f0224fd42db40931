"""Every field a gateway sends is bounded before it is believed (issue #42): a declared
duration against the payload, a declared pixel size before any decode, ``seq`` within the
database's bigint, times within the flow's limits. Each hostile record is refused with its
reason; the one at a bound is accepted."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from PIL import Image

from connectors import codec
from tests.fixtures.hostile_records import giant_jpeg, hostile_records, wav_claiming

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TS = NOW - timedelta(minutes=5)
LIMITS = codec.CodecLimits(max_payload_bytes=300_000)


def _jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (32, 24), (200, 30, 30)).save(buf, format="JPEG")
    return buf.getvalue()


CASES = hostile_records("u1", TS, _jpeg(), LIMITS, NOW)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_record_is_refused_with_its_reason(case) -> None:
    key, value, headers = case.record
    if case.reason is None:
        codec.decode(case.kind, key, value, headers, now=NOW, limits=LIMITS)
        return
    with pytest.raises(codec.InvalidMessage) as info:
        codec.decode(case.kind, key, value, headers, now=NOW, limits=LIMITS)
    assert info.value.reason == case.reason, info.value.detail
    assert info.value.detail


def test_an_audio_chunk_lasts_what_its_payload_holds() -> None:
    # a header may round, within the tolerance; without one the payload says
    rec = codec.encode_audio(
        "u1", "s1", TS, codec.wav_bytes(b"\0\0" * 8000, 16_000), duration_ms=540, sample_rate=16_000
    )
    assert codec.decode("audio", *rec, now=NOW, limits=LIMITS).duration_ms == 540
    # a WAV header claiming an hour of frames it does not hold lasts what it holds
    claiming = wav_claiming(frames_declared=16_000 * 3600, frames_held=3_200)
    assert codec.wav_info(claiming) == (16_000, 1, 3_200)
    rec = codec.encode_audio("u1", "s1", TS, claiming, duration_ms=200, sample_rate=16_000)
    assert codec.decode("audio", *rec, now=NOW, limits=LIMITS).duration_ms == 200


def test_pixel_limit_is_checked_before_any_decode() -> None:
    data = giant_jpeg(_jpeg(), 6000, 4001)  # 24,006,000 pixels: just over the default
    with pytest.raises(codec.InvalidMessage) as info:
        codec.check_jpeg(data, LIMITS.max_frame_pixels)
    assert info.value.reason == codec.FRAME_TOO_LARGE
    assert codec.check_jpeg(giant_jpeg(_jpeg(), 6000, 4000), LIMITS.max_frame_pixels) == (
        6000,
        4000,
    )


def test_limits_come_from_settings() -> None:
    from worldmm.settings import Settings

    s = Settings(max_frame_pixels=10_000, max_audio_chunk_ms=5_000, audio_duration_tolerance_ms=7)
    limits = codec.CodecLimits.from_settings(s)
    assert (limits.max_frame_pixels, limits.max_audio_chunk_ms) == (10_000, 5_000)
    assert limits.audio_duration_tolerance_ms == 7
