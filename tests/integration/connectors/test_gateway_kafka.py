"""The gateway against a real broker: what a consumer receives is what the session holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from apps.demo.synthetic import espeak_available, generate_session
from apps.gateway.recording import plan_recording
from apps.gateway.send import run_gateway
from connectors import codec
from connectors.dlq import DlqProducer, message_dlq_record, parse_dlq_record
from connectors.gateway import GlassesProducer
from connectors.kafka_io import consume_all
from connectors.topics import create_topics, topic_names
from tests.fixtures.media import pcm16_mono

pytestmark = pytest.mark.integration

LIMITS = codec.CodecLimits(max_past_age_s=10 * 365 * 24 * 3600.0)


@pytest.fixture(scope="module")
def one_minute(tmp_path_factory):
    if not espeak_available():
        pytest.skip("espeak-ng not installed")
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    return generate_session(tmp_path_factory.mktemp("syn"), minutes=1, start=start, seed=1)


@pytest.fixture
def topics(settings):
    create_topics(settings.kafka_brokers, settings)
    return topic_names(settings)


def _decoded(settings, topics, kind):
    records = consume_all(settings.kafka_brokers, topics[kind], timeout=30)
    now = datetime.now(UTC)
    return records, [
        codec.decode(kind, r.key, r.value, r.headers, now=now, limits=LIMITS) for r in records
    ]


def _env(settings):
    return {
        "WORLDMM_KAFKA_BROKERS": settings.kafka_brokers,
        "WORLDMM_TOPIC_PREFIX": settings.topic_prefix,
        "WORLDMM_STATE_DIR": str(settings.state_dir),
    }


def test_cli_sends_a_synthetic_session(settings, topics, user_id, one_minute):
    from apps.cli import app

    start = one_minute.start
    args = [
        "gateway", "--user", user_id, "--session", "sess-1",
        "--frames", str(one_minute.frames_dir), "--audio", str(one_minute.audio_wav),
        "--start", start.isoformat(),
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env=_env(settings))
    assert result.exit_code == 0, result.output
    assert "sent 60 frames, 12 audio chunks, 2 control" in result.output

    raw, frames = _decoded(settings, topics, "frames")
    assert len(frames) == 60
    assert all(r.key == user_id.encode() for r in raw)
    assert {r.header("content_type") for r in raw} == {"image/jpeg"}
    assert [f.seq for f in frames] == list(range(60))
    assert [f.ts for f in frames] == [start + timedelta(seconds=i) for i in range(60)]
    assert frames[7].jpeg == (one_minute.frames_dir / "000007.jpg").read_bytes()
    assert {(f.user_id, f.session_id) for f in frames} == {(user_id, "sess-1")}

    raw, chunks = _decoded(settings, topics, "audio")
    assert len(chunks) == 12
    assert [c.ts for c in chunks] == [start + timedelta(seconds=5 * i) for i in range(12)]
    assert sum(c.duration_ms for c in chunks) == 60_000
    assert {(c.sample_rate, c.content_type) for c in chunks} == {(16000, "audio/wav")}
    pcm = b"".join(pcm16_mono(c) for c in chunks)
    with open(one_minute.audio_wav, "rb") as fh:
        assert pcm == fh.read()[44:]  # the chunks reassemble the original track exactly

    raw, control = _decoded(settings, topics, "control")
    assert [c.event for c in control] == ["session_start", "session_end"]
    assert control[0].ts == start and control[1].ts == start + timedelta(seconds=60)


def test_producer_api_and_realtime_pacing(settings, topics, user_id, one_minute):
    """Realtime mode waits until each item's capture time (driven by a fake clock)."""
    now = [0.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += s

    start = datetime.now(UTC).replace(microsecond=0)
    plan = plan_recording(
        frames_dir=one_minute.frames_dir, audio=one_minute.audio_wav, fps=4, start=start
    )
    producer = GlassesProducer(settings)
    producer.check()
    stats = run_gateway(
        producer, user=user_id, session="rt", start=plan.start, frames=plan.frames,
        audio=plan.audio, realtime=True, clock=lambda: now[0], sleep=sleep,
    )  # fmt: skip
    # 60 frames at 4 fps span 14.75 s; the 60 s of audio ends at 60 s: the last wait ends there.
    assert stats.frames == 60 and stats.audio_chunks == 12
    assert now[0] == pytest.approx(60.0)
    assert all(s > 0 for s in sleeps)
    _, frames = _decoded(settings, topics, "frames")
    assert frames[-1].ts == start + timedelta(seconds=59 / 4)
    _, control = _decoded(settings, topics, "control")
    assert control[-1].ts == start + timedelta(seconds=60)
    # the end says where each stream stopped, so the flow knows when the session has arrived
    ms = codec.to_epoch_ms
    assert control[-1].last_ms == {
        "frames": ms(start + timedelta(seconds=59 / 4)),
        "audio": ms(start + timedelta(seconds=60)),
    }


def test_video_input_with_its_audio_track(settings, topics, user_id, tmp_path):
    av = pytest.importorskip("av")
    import numpy as np
    from PIL import Image

    from apps.cli import app

    path = tmp_path / "clip.mp4"
    with av.open(str(path), "w") as out:
        v = out.add_stream("mpeg4", rate=10)
        v.width, v.height, v.pix_fmt = 320, 240, "yuv420p"
        a = out.add_stream("aac", rate=16000)
        a.layout = "mono"
        for i in range(60):  # 6 s of video at 10 fps
            frame = av.VideoFrame.from_image(Image.new("RGB", (320, 240), (i * 4, 90, 200)))
            for p in v.encode(frame):
                out.mux(p)
        tone = (np.sin(np.arange(16000 * 6) * 2 * np.pi * 440 / 16000) * 8000).astype(np.int16)
        for k in range(0, tone.size, 1024):
            af = av.AudioFrame.from_ndarray(tone[None, k : k + 1024], format="s16", layout="mono")
            af.sample_rate, af.pts = 16000, k
            for p in a.encode(af):
                out.mux(p)
        for stream in (v, a):
            for p in stream.encode():
                out.mux(p)

    start = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    args = ["gateway", "--user", user_id, "--session", "vid", "--video", str(path),
            "--fps", "2", "--start", start.isoformat()]  # fmt: skip
    result = CliRunner().invoke(app, args, env=_env(settings))
    assert result.exit_code == 0, result.output
    _, frames = _decoded(settings, topics, "frames")
    assert [f.ts - start for f in frames] == [timedelta(seconds=i / 2) for i in range(12)]
    _, chunks = _decoded(settings, topics, "audio")
    assert len(chunks) == 2 and chunks[0].duration_ms == 5000
    assert 6000 <= sum(c.duration_ms for c in chunks) <= 6200  # AAC adds priming samples


def test_missing_topics_is_a_clear_error(settings, user_id, one_minute):
    from apps.cli import app

    args = ["gateway", "--user", user_id, "--session", "s", "--frames",
            str(one_minute.frames_dir)]  # fmt: skip
    result = CliRunner().invoke(app, args, env=_env(settings))  # topics never created
    assert result.exit_code == 1
    assert "worldmm topics create" in result.output


def test_dlq_producer_round_trip(settings, topics):
    key, value, headers = codec.encode_frame("u1", "s1", datetime.now(UTC), 0, b"\xff\xd8bad")
    with pytest.raises(codec.InvalidMessage) as info:
        codec.decode("frames", key, value, headers, now=datetime.now(UTC), limits=LIMITS)
    dlq = DlqProducer(settings.kafka_brokers, topics["dlq"])
    dlq.send(
        message_dlq_record(
            reason=info.value.reason, detail=info.value.detail, source_topic=topics["frames"],
            source_partition=0, source_offset=17, key=key, value=value, headers=headers,
            failed_at=datetime.now(UTC),
        )
    )  # fmt: skip
    dlq.flush()
    (rec,) = consume_all(settings.kafka_brokers, topics["dlq"], timeout=30)
    entry = parse_dlq_record(rec.key, rec.value, rec.headers)
    assert entry.reason == "bad_jpeg" and entry.source_offset == 17
    assert (entry.key, entry.value, entry.original_headers) == (key, value, headers)


def test_dlq_keeps_the_failure_when_the_payload_is_too_large(settings, topics):
    dlq = DlqProducer(settings.kafka_brokers, topics["dlq"], message_max_bytes=2000)
    dlq.send(
        message_dlq_record(
            reason="payload_too_large", source_topic=topics["frames"], source_partition=0,
            source_offset=1, key=b"u1", value=b"\0" * 10_000, headers=[("seq", b"1")],
            failed_at=datetime.now(UTC),
        )
    )  # fmt: skip
    dlq.flush()
    (rec,) = consume_all(settings.kafka_brokers, topics["dlq"], timeout=30)
    entry = parse_dlq_record(rec.key, rec.value, rec.headers)
    assert entry.reason == "payload_too_large" and entry.value is None
    assert entry.payload_dropped == 10_000 and entry.original_headers == [("seq", b"1")]
