"""Malformed input lands on the ``dlq`` topic (reason, source topic/partition/offset, original
headers and payload) while the good messages around it become memory; a frame that arrives
after its window closed is stored and counted, never dropped."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.fixtures.ingest_runs import START, base_count, cheap, produce_session, session_frames
from tests.fixtures.store_reads import memory_rows

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MINUTES = 1


def _bad_records(user: str, jpeg: bytes, limit: int):
    """(topic kind, key, value, headers, expected reason) for every kind of malformed input."""
    from connectors import codec

    ts = START + timedelta(seconds=7)
    key, _v, frame_h = codec.encode_frame(user, "s1", ts, 500, jpeg)
    _k, wav, audio_h = codec.encode_audio(
        user, "s1", ts, codec.wav_bytes(b"\0\0" * 800, 16000), duration_ms=50, sample_rate=16000
    )

    def frame_headers(**changes: str | None) -> list[tuple[str, bytes]]:
        out = [(n, v) for n, v in frame_h if n not in changes]
        return out + [(n, v.encode()) for n, v in changes.items() if v is not None]

    future = START + timedelta(days=365 * 30)
    return [
        ("frames", key, jpeg, frame_headers(ts=None), codec.MISSING_HEADER),
        ("frames", key, jpeg, frame_headers(seq="twelve"), codec.INVALID_HEADER),
        ("frames", key, b"\xff\xd8 not really a jpeg", frame_h, codec.BAD_JPEG),
        (
            "audio",
            key,
            wav,
            [(n, b"audio/ogg" if n == "content_type" else v) for n, v in audio_h],
            codec.UNSUPPORTED_AUDIO,
        ),
        ("frames", key, jpeg, frame_headers(ts=str(codec.to_epoch_ms(future))), codec.TS_IN_FUTURE),
        ("frames", key, jpeg, frame_headers(ts="1000"), codec.TS_TOO_OLD),
        ("frames", key, b"\xff\xd8" + b"\0" * limit, frame_h, codec.PAYLOAD_TOO_LARGE),
    ]


def _late_windows() -> float:
    from prometheus_client import REGISTRY

    labels = {"scale": "30", "status": "late"}
    return REGISTRY.get_sample_value("worldmm_ingest_windows_total", labels) or 0.0


def test_malformed_input_goes_to_the_dlq_and_late_frames_are_kept(
    settings, user_id, tmp_path
) -> None:
    from bytewax.recovery import RecoveryConfig, init_db_dir
    from bytewax.testing import TestingSink, run_main

    from connectors import codec, kafka_io
    from connectors.topics import create_topics, topic_names
    from dataflows.ingest import build_flow

    settings = cheap(settings, max_payload_bytes=200_000)
    create_topics(settings.kafka_brokers, settings)
    topics = topic_names(settings)
    frames = session_frames(tmp_path / "session", MINUTES)
    jpeg = sorted(frames.iterdir())[0].read_bytes()
    bad = _bad_records(user_id, jpeg, settings.max_payload_bytes)
    producer = kafka_io.make_producer(settings.kafka_brokers)

    def send(records) -> None:
        for kind, key, value, headers, _reason in records:
            kafka_io.produce(producer, topics[kind], key, value, headers)
        assert producer.flush(30) == 0

    send(bad[:4])  # malformed records before, between and after the good ones
    n_frames = produce_session(settings, user_id, frames)
    send(bad[4:])

    recovery = tmp_path / "recovery"
    recovery.mkdir()
    init_db_dir(recovery, 1)

    def run() -> list:
        outcomes: list = []
        flow = build_flow(settings, tail=False, report_sink=TestingSink(outcomes))
        config = RecoveryConfig(str(recovery))
        run_main(flow, epoch_interval=timedelta(seconds=1), recovery_config=config)
        return outcomes

    outcomes = run()
    assert {o.status for o in outcomes} == {"complete"}
    rows = memory_rows(settings.database_url, user_id)
    assert [s[0] for s in rows["segments"]] == [30] * base_count(MINUTES) + [180, 600, 3600]
    assert all(s[6] for s in rows["segments"] if s[0] == 30), "every 30 s window has a caption"
    assert rows["frames"] == (n_frames, 0)

    dlq = kafka_io.consume_all(settings.kafka_brokers, topics["dlq"])
    assert sorted(r.header("reason") for r in dlq) == sorted(b[4] for b in bad)
    sources = {
        (r.topic, r.partition, r.offset): r
        for kind in ("frames", "audio")
        for r in kafka_io.consume_all(settings.kafka_brokers, topics[kind])
    }
    for record in dlq:
        assert record.header("dlq_kind") == "message"
        original = sources[
            (
                record.header("source_topic"),
                int(record.header("source_partition")),
                int(record.header("source_offset")),
            )
        ]
        assert record.value == original.value and record.key == original.key
        orig_headers = [(n[len("orig.") :], v) for n, v in record.headers if n.startswith("orig.")]
        assert orig_headers == original.headers
        assert record.header("detail")

    # -- a frame for a window closed long ago, then another bad record; the flow resumes ---
    late_ts = START + timedelta(seconds=3)
    late = codec.encode_frame(user_id, "s1", late_ts, 9_000, jpeg)
    send([("frames", *late, None), bad[2]])
    late_before = _late_windows()
    outcomes = run()
    assert [(o.status, o.start_ms) for o in outcomes] == [("late", codec.to_epoch_ms(START))]
    assert _late_windows() == late_before + 1
    rows_after = memory_rows(settings.database_url, user_id)
    assert rows_after["frames"] == (n_frames + 1, 1)  # stored, flagged late
    assert rows_after["segments"] == rows["segments"]  # the closed window is not redone
    dlq = kafka_io.consume_all(settings.kafka_brokers, topics["dlq"])
    assert sorted(r.header("reason") for r in dlq) == sorted([b[4] for b in bad] + [codec.BAD_JPEG])
