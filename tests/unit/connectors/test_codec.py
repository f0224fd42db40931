"""Codec round trips and every rejection reason."""

from __future__ import annotations

import io
import json
import wave
from datetime import UTC, datetime, timedelta

import pytest
from PIL import Image

from connectors import codec
from connectors.codec import (
    AudioMessage,
    CodecLimits,
    ControlMessage,
    FrameMessage,
    InvalidMessage,
    decode,
    encode_audio,
    encode_control,
    encode_frame,
)
from tests.fixtures.media import pcm16_mono

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
TS = NOW - timedelta(minutes=5, microseconds=123_456)
LIMITS = CodecLimits(max_future_skew_s=60, max_past_age_s=3600, max_payload_bytes=200_000)


def jpeg(size=(32, 24), color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="JPEG", quality=80)
    return buf.getvalue()


def wav(n=1600, rate=16000, channels=1, width=2) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(b"\x01\x00" * (width // 2) * n * channels)
    return buf.getvalue()


def dec(kind, record, **kw):
    key, value, headers = record
    return decode(
        kind, key, value, headers, now=kw.get("now", NOW), limits=kw.get("limits", LIMITS)
    )


def replace_header(record, name, value):
    key, val, headers = record
    headers = [(n, v) for n, v in headers if n != name]
    if value is not None:
        headers.append((name, value))
    return key, val, headers


def test_frame_round_trip():
    data = jpeg()
    rec = encode_frame("alice@x.org", "s-1", TS, 7, data)
    key, _value, headers = rec
    assert key == b"alice@x.org"
    names = dict(headers)
    assert names["ts"] == str(codec.to_epoch_ms(TS)).encode()
    assert names["seq"] == b"7" and names["content_type"] == b"image/jpeg"
    msg = dec("frames", rec)
    assert isinstance(msg, FrameMessage)
    assert (msg.user_id, msg.session_id, msg.seq, msg.jpeg) == ("alice@x.org", "s-1", 7, data)
    # milliseconds survive exactly; sub-millisecond precision is dropped on purpose
    assert msg.ts == TS.replace(microsecond=TS.microsecond // 1000 * 1000) != TS
    assert codec.encode(msg) == rec


@pytest.mark.parametrize("ctype", ["audio/wav", "audio/pcm"])
def test_audio_round_trip(ctype):
    data = wav() if ctype == "audio/wav" else b"\x10\x00" * 1600
    rec = encode_audio("u1", "s1", TS, data, duration_ms=100, sample_rate=16000, content_type=ctype)
    msg = dec("audio", rec)
    assert isinstance(msg, AudioMessage)
    assert (msg.duration_ms, msg.sample_rate, msg.content_type, msg.data) == (
        100,
        16000,
        ctype,
        data,
    )
    assert msg.end - msg.ts == timedelta(milliseconds=100)
    assert codec.encode(msg) == rec
    assert len(pcm16_mono(msg)) == 3200
    assert codec.wav_info(codec.as_wav(msg)) == (16000, 1, 1600)


def test_audio_duration_derived_when_header_absent():
    rec = replace_header(
        encode_audio("u1", "s1", TS, wav(n=8000), duration_ms=1, sample_rate=16000),
        "duration_ms",
        None,
    )
    assert dec("audio", rec).duration_ms == 500


def test_stereo_wav_downmixed():
    msg = dec(
        "audio",
        encode_audio("u1", "s1", TS, wav(n=10, channels=2), duration_ms=1, sample_rate=16000),
    )
    assert len(pcm16_mono(msg)) == 20


@pytest.mark.parametrize("event", ["session_start", "session_end", "pause", "resume"])
def test_control_round_trip(event):
    rec = encode_control("u1", "s1", TS, event)
    assert json.loads(rec[1]) == {"event": event}
    msg = dec("control", rec)
    assert isinstance(msg, ControlMessage) and msg.event == event
    assert codec.encode(msg) == rec


def test_session_end_carries_where_each_stream_ended():
    ts_ms = codec.to_epoch_ms(TS)
    last = {"frames": ts_ms - 1_000, "audio": ts_ms - 500}
    rec = encode_control("u1", "s1", TS, "session_end", last)
    assert json.loads(rec[1]) == {"event": "session_end", "last_ms": last}
    msg = dec("control", rec)
    assert msg.last_ms == last and codec.encode(msg) == rec


@pytest.mark.parametrize(
    "body",
    [
        b'{"event":"session_end","last_ms":{"video":1}}',
        b'{"event":"session_end","last_ms":{"frames":-1}}',
        b'{"event":"session_end","last_ms":{"frames":1000}}',  # 1970: past the age limit
        b'{"event":"session_end","last_ms":{"audio":99999999999999}}',  # far in the future
        b'{"event":"session_end","last_ms":{"frames":"soon"}}',
        b'{"event":"session_end","last_ms":[1]}',
        b'{"event":"session_start","last_ms":{"frames":1}}',
        b'{"event":"pause","last_ms":{"frames":1}}',
        b'{"event":"hush"}',
    ],
)
def test_bad_last_ms_is_a_bad_control_message(body):
    headers = encode_control("u1", "s1", TS, "session_end")[2]
    with pytest.raises(InvalidMessage) as info:
        dec("control", (b"u1", body, headers))
    assert info.value.reason == codec.BAD_CONTROL


def test_encode_rejects_unsafe_ids_and_naive_time():
    with pytest.raises(ValueError):
        encode_frame("../etc", "s1", TS, 0, jpeg())
    with pytest.raises(ValueError):
        encode_frame("u1", "s/1", TS, 0, jpeg())
    with pytest.raises(ValueError):
        encode_frame("u1", "s1", TS.replace(tzinfo=None), 0, jpeg())


FRAME = encode_frame("u1", "s1", TS, 3, jpeg())
AUDIO = encode_audio("u1", "s1", TS, wav(), duration_ms=100, sample_rate=16000)


@pytest.mark.parametrize(
    ("kind", "record", "reason"),
    [
        ("frames", replace_header(FRAME, "user_id", None), codec.MISSING_HEADER),
        ("frames", replace_header(FRAME, "session_id", None), codec.MISSING_HEADER),
        ("frames", replace_header(FRAME, "ts", None), codec.MISSING_HEADER),
        ("frames", replace_header(FRAME, "seq", None), codec.MISSING_HEADER),
        ("frames", replace_header(FRAME, "content_type", None), codec.MISSING_HEADER),
        ("frames", replace_header(FRAME, "ts", b"yesterday"), codec.INVALID_HEADER),
        ("frames", replace_header(FRAME, "ts", b"\xff\xfe"), codec.INVALID_HEADER),
        ("frames", replace_header(FRAME, "seq", b"-1"), codec.INVALID_HEADER),
        ("frames", replace_header(FRAME, "user_id", b"../../etc"), codec.INVALID_ID),
        ("frames", replace_header(FRAME, "session_id", b"a b"), codec.INVALID_ID),
        ("frames", (b"u2", FRAME[1], FRAME[2]), codec.KEY_MISMATCH),
        ("frames", (None, FRAME[1], FRAME[2]), codec.MISSING_KEY),
        ("frames", (FRAME[0], b"", FRAME[2]), codec.EMPTY_PAYLOAD),
        ("frames", (FRAME[0], b"\xff\xd8" + b"x" * 300_000, FRAME[2]), codec.PAYLOAD_TOO_LARGE),
        ("frames", (FRAME[0], FRAME[1][:40], FRAME[2]), codec.BAD_JPEG),
        ("frames", (FRAME[0], b"not an image at all", FRAME[2]), codec.BAD_JPEG),
        (
            "frames",
            replace_header(FRAME, "content_type", b"image/png"),
            codec.UNSUPPORTED_CONTENT_TYPE,
        ),
        (
            "frames",
            replace_header(FRAME, "ts", str(codec.to_epoch_ms(NOW) + 61_000).encode()),
            codec.TS_IN_FUTURE,
        ),
        (
            "frames",
            replace_header(FRAME, "ts", str(codec.to_epoch_ms(NOW) - 3601_000).encode()),
            codec.TS_TOO_OLD,
        ),
        ("frames", replace_header(FRAME, "ts", b"9999999999999999999"), codec.INVALID_HEADER),
        ("audio", replace_header(AUDIO, "content_type", b"audio/ogg"), codec.UNSUPPORTED_AUDIO),
        ("audio", (AUDIO[0], wav(width=1), AUDIO[2]), codec.UNSUPPORTED_AUDIO),
        ("audio", (AUDIO[0], b"RIFFjunkjunk", AUDIO[2]), codec.BAD_AUDIO),
        ("audio", replace_header(AUDIO, "sample_rate", b"44100"), codec.INVALID_HEADER),
        (
            "audio",
            replace_header(
                replace_header(AUDIO, "content_type", b"audio/pcm"), "sample_rate", None
            ),
            codec.MISSING_HEADER,
        ),
        (
            "audio",
            (AUDIO[0], b"\x00" * 3, replace_header(AUDIO, "content_type", b"audio/pcm")[2]),
            codec.BAD_AUDIO,
        ),
        (
            "control",
            (b"u1", b'{"event":"reboot"}', encode_control("u1", "s1", TS, "session_end")[2]),
            codec.BAD_CONTROL,
        ),
        (
            "control",
            (b"u1", b"session_end", encode_control("u1", "s1", TS, "session_end")[2]),
            codec.BAD_CONTROL,
        ),
        ("video", FRAME, codec.UNKNOWN_TOPIC),
    ],
)
def test_invalid_records_give_specific_reason(kind, record, reason):
    with pytest.raises(InvalidMessage) as info:
        dec(kind, record)
    assert info.value.reason == reason
    assert str(info.value).startswith(reason)


def test_conflicting_duplicate_header_is_invalid():
    key, value, headers = FRAME
    with pytest.raises(InvalidMessage) as info:
        dec("frames", (key, value, [*headers, ("seq", b"99")]))
    assert info.value.reason == codec.INVALID_HEADER


def test_time_limits_are_inclusive_edges():
    edge = replace_header(FRAME, "ts", str(codec.to_epoch_ms(NOW) + 60_000).encode())
    assert dec("frames", edge).ts == NOW + timedelta(seconds=60)


def test_limits_from_settings():
    from worldmm.settings import Settings

    s = Settings(max_future_skew_s=5, max_past_age_s=10, max_payload_bytes=2048)
    assert CodecLimits.from_settings(s) == CodecLimits(
        max_future_skew_s=5, max_past_age_s=10, max_payload_bytes=2048
    )
