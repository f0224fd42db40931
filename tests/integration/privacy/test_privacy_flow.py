"""Privacy through the whole path: a real photograph with a face sent through the gateway
comes back from the frames route with the face blurred (its pixel statistics change, the
background's do not); a paused span stores no frame, no audio and no transcript, and its
window says "paused"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import cv2
import numpy as np
import pytest
from pydantic import SecretStr
from skimage import data

from tests.fixtures.api import ADMIN_KEY
from tests.fixtures.ingest_runs import cheap

pytestmark = pytest.mark.integration

START = datetime(2026, 5, 4, 9, 20, tzinfo=UTC)  # a 10 min boundary
FACE = (190, 70, 260, 170)  # well inside the astronaut's face (x1, y1, x2, y2)
BACKGROUND = (0, 300, 150, 500)  # the flag and the suit


def _jpeg(rgb: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(
        ".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 90]
    )
    assert ok
    return buf.tobytes()


def _pixels(jpeg: bytes, box: tuple[int, int, int, int]) -> np.ndarray:
    x1, y1, x2, y2 = box
    bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    return bgr[y1:y2, x1:x2].astype(float)


def test_faces_blurred_and_a_pause_stores_nothing(settings, user_id) -> None:
    from bytewax.testing import TestingSink, run_main
    from fastapi.testclient import TestClient

    from apps.gateway.recording import AudioItem, FrameItem
    from apps.gateway.send import run_gateway
    from connectors.codec import wav_bytes
    from connectors.gateway import GlassesProducer
    from connectors.topics import create_topics
    from dataflows.ingest import build_flow
    from query_api.app import create_app
    from tests.fixtures.store_reads import list_pauses
    from worldmm.deps import build_deps
    from worldmm.llm.rule_based import RuleBasedRoles
    from worldmm.store.db import Database
    from worldmm.store.frames import list_audio_chunks, list_frames
    from worldmm.store.segments import list_segments

    settings = cheap(settings, face_blur=True, admin_api_key=SecretStr(ADMIN_KEY))
    create_topics(settings.kafka_brokers, settings)
    photo = _jpeg(data.astronaut())
    # 90 s at 1 fps with 5 s audio chunks; a privacy pause over the middle 30 s window
    frames = [FrameItem(START + timedelta(seconds=s), s, photo) for s in range(90)]
    silence = wav_bytes(b"\x00\x00" * 16_000 * 5, 16_000)
    audio = [AudioItem(START + timedelta(seconds=s), 5000, silence) for s in range(0, 90, 5)]
    pause, resume = START + timedelta(seconds=30), START + timedelta(seconds=60)
    with GlassesProducer(settings) as producer:
        run_gateway(
            producer, user=user_id, session="s1", start=START, frames=frames, audio=audio,
            pauses=[(pause, False), (resume, True)],
        )  # fmt: skip

    def deps_factory(s):
        deps = build_deps(s, role="ingest")
        deps.roles = RuleBasedRoles(deps.embedder, ocr_frames=1)
        return deps

    outcomes: list = []
    run_main(
        build_flow(
            settings, tail=False, report_sink=TestingSink(outcomes), deps_factory=deps_factory
        )
    )
    assert [o for o in outcomes if o.status == "failed"] == []

    with Database(settings.database_url) as db, db.connection() as conn:
        segs = {s.window_start: s for s in list_segments(conn, user_id, scale=30)}
        stored = list_frames(conn, user_id, limit=1000)
        chunks = list_audio_chunks(conn, user_id)
        pauses = list_pauses(conn, user_id)
    # the paused window: a segment that says so, and nothing of its span stored
    paused = segs[pause]
    assert paused.processing_status == "paused"
    assert paused.caption is None and paused.transcript is None
    assert (
        segs[START].processing_status == "complete" and segs[resume].processing_status == "complete"
    )
    assert {f.captured_at for f in stored} == {
        START + timedelta(seconds=s) for s in [*range(30), *range(60, 90)]
    }
    assert chunks and all(not (pause <= c.started_at < resume) for c in chunks)
    assert [(p.started_at, p.ended_at) for p in pauses] == [(pause, resume)]

    # every stored frame comes back from the frames route with the face blurred
    api_deps = build_deps(settings, role="api")
    try:
        with TestClient(create_app(settings, deps=api_deps)) as client:
            url = f"/v1/users/{user_id}/frames/{stored[0].blob_key}"
            r = client.get(url, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    finally:
        api_deps.close()
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    face_before, face_after = _pixels(photo, FACE), _pixels(r.content, FACE)
    assert np.abs(face_after - face_before).mean() > 10
    detail = [np.abs(np.diff(f, axis=1)).mean() for f in (face_before, face_after)]
    assert detail[1] < detail[0] / 3  # the face's detail is gone
    back_before, back_after = _pixels(photo, BACKGROUND), _pixels(r.content, BACKGROUND)
    assert np.abs(back_after - back_before).mean() < 3  # only JPEG re-encoding noise
