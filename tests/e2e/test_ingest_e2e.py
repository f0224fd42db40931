"""End to end on the embedded stack with the offline providers: a generated 12-minute session
goes gateway → Kafka → the ingest dataflow (in-process, reading to the end of the topics) →
PostgreSQL, starting on a 10-minute boundary; the session end flushes the open windows."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.slow]


def _ten_minute_floor(ts: datetime) -> datetime:
    return ts.replace(minute=ts.minute - ts.minute % 10, second=0, microsecond=0)


def test_twelve_minute_session_builds_all_memories(stack, settings, user_id, tmp_path) -> None:
    from bytewax.testing import TestingSink, run_main

    from apps.demo.synthetic import DEFAULT_SCRIPT, generate_session
    from apps.gateway.recording import plan_recording
    from apps.gateway.send import run_gateway
    from connectors.gateway import GlassesProducer
    from connectors.topics import create_topics
    from dataflows.ingest import build_flow
    from tests.fixtures.store_reads import get_visual_embedding
    from worldmm.blobs import LocalBlobStore
    from worldmm.media.window import read_capture
    from worldmm.store.db import Database
    from worldmm.store.frames import MediaRef, list_audio_chunks, list_frames
    from worldmm.store.segments import list_segments
    from worldmm.store.triples import list_semantic, triples_for_segments

    # The offline captioner and encoder read text from fewer frames here (their OCR is most of
    # the CPU); the pipeline still samples and passes 16 frames per window.
    settings = settings.model_copy(
        update={"allowed_lateness_s": 5.0, "in_flight_start": 8, "ocr_frames": 1}
    )
    create_topics(settings.kafka_brokers, settings)
    # A fixed start keeps the offline models' output (OCR of on-frame text, speech) the same
    # on every run; the codec's age limit is widened for it.
    start = datetime(2026, 5, 4, 9, 20, tzinfo=UTC)
    settings = settings.model_copy(update={"max_past_age_s": 20 * 365 * 86400.0})
    # Lasting statements (habits, preferences) give the 10 min summaries semantic content.
    script = [s.model_copy() for s in DEFAULT_SCRIPT]
    script[0] = script[0].model_copy(
        update={"speech": [*script[0].speech, "I usually drink green tea every morning."]}
    )
    script[3] = script[3].model_copy(
        update={"speech": [*script[3].speech, "Alice likes spicy noodles."]}
    )
    files = generate_session(
        tmp_path / "session", minutes=12, fps=1, start=start, seed=3, script=script
    )
    plan = plan_recording(frames_dir=files.frames_dir, audio=files.audio_wav, fps=1, start=start)
    with GlassesProducer(settings) as producer:
        run_gateway(
            producer,
            user=user_id,
            session="s1",
            start=start,
            frames=plan.frames,
            audio=plan.audio,
        )

    # malformed input beside the session: it must land on the DLQ topic, not stop the flow
    from connectors import codec, kafka_io
    from connectors.topics import topic_names
    from tests.fixtures.kafka import produce_and_flush

    topics = topic_names(settings)
    bad_key, _v, bad_headers = codec.encode_frame(user_id, "s1", start, 99_999, b"x")
    produce_and_flush(
        kafka_io.make_producer(settings.kafka_brokers),
        topics["frames"],
        [(bad_key, b"not a jpeg", bad_headers), (bad_key, b"\xff\xd8", [])],
    )

    outcomes: list = []

    def deps_factory(s):
        from worldmm.deps import build_deps
        from worldmm.llm.rule_based import RuleBasedRoles

        deps = build_deps(s, role="ingest")
        deps.roles = RuleBasedRoles(deps.embedder, ocr_frames=1)
        return deps

    flow = build_flow(
        settings, tail=False, report_sink=TestingSink(outcomes), deps_factory=deps_factory
    )
    run_main(flow)

    assert [o for o in outcomes if o.status == "failed"] == []
    with Database(settings.database_url) as db, db.connection() as conn:
        segs = list_segments(conn, user_id, limit=10_000)
        by_scale = Counter(s.scale_seconds for s in segs)
        assert by_scale == {30: 24, 180: 4, 600: 2, 3600: 1}
        assert all(s.processing_status == "complete" for s in segs)
        partial = {(s.scale_seconds, s.window_start - start) for s in segs if s.partial}
        assert partial == {
            (180, timedelta(minutes=10)),
            (600, timedelta(minutes=10)),
            (3600, _ten_minute_floor(start).replace(minute=0) - start),
        }
        # parent links: every window but the hour points at the window that merged it
        ids = {s.id: s for s in segs}
        for s in segs:
            if s.scale_seconds == 3600:
                assert s.parent_segment_id is None
                continue
            parent = ids[s.parent_segment_id]
            assert parent.window_start <= s.window_start < parent.window_end
            assert parent.scale_seconds > s.scale_seconds
        bases = [s for s in segs if s.scale_seconds == 30]
        assert all(s.caption for s in bases)
        assert any(s.transcript for s in bases), "speech should be transcribed"
        # episodic triples point at canonical entities
        triples = triples_for_segments(conn, user_id, [s.id for s in segs])
        assert len(triples) > 10
        ent_ids = {t.subject_entity_id for t in triples} | {
            t.object_entity_id for t in triples if t.object_entity_id is not None
        }
        canonical = conn.execute(
            "SELECT count(*) FROM entities WHERE user_id = %s AND id = ANY(%s)"
            " AND canonical_entity_id IS NULL",
            (user_id, sorted(ent_ids)),
        ).fetchone()[0]
        assert canonical == len(ent_ids)
        assert {s.scale_seconds for s in segs if any(t.segment_id == s.id for t in triples)} >= {
            30,
            180,
            600,
        }
        assert list_semantic(conn, user_id, history=True)
        assert all(get_visual_embedding(conn, user_id, s.id) is not None for s in bases)
        assert all(s.visual_status == "complete" for s in bases)
        frames = list_frames(conn, user_id, limit=10_000)
        assert len(frames) == 720
        audio = list_audio_chunks(conn, user_id)
    dlq = kafka_io.consume_all(settings.kafka_brokers, topics["dlq"])
    assert sorted(r.header("reason") for r in dlq) == [codec.BAD_JPEG, codec.MISSING_HEADER]
    blobs = LocalBlobStore(settings.resolved_blob_dir)
    # every capture is stored and reads back: in its window's container, one object per
    # window since #26 (a capture that came after its window closed: alone, under its key)
    containers = set(blobs.list(f"media/{user_id}/"))
    assert containers and audio
    jpeg, wav = b"\xff\xd8", b"RIFF"
    for c, magic in [*((f, jpeg) for f in frames), *((a, wav) for a in audio)]:
        ref = None
        if c.media_key is not None:
            assert c.media_key in containers
            ref = MediaRef(c.media_key, c.media_offset or 0, c.media_length or 0)
        data = read_capture(blobs, c.blob_key, ref)
        assert data.startswith(magic), c.blob_key
