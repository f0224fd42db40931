"""Face detection is the cost of blurring: through the real window build path each stored
frame is searched once — not again when the window is stored again (a retry after a database
outage redoes the whole window), not for the coarser scales, not for frames already in the
store — and a capture that missed its window is blurred too."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import cv2
import numpy as np
import pytest
from skimage import data

from tests.unit.memory.test_construct_db import Embedder, Encoder, Roles
from worldmm.blobs import LocalBlobStore
from worldmm.deps import Deps
from worldmm.media.window import read_capture
from worldmm.memory.late_and_control import record_late
from worldmm.memory.window_inputs import CaptureRef
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import BaseWindow, CoarseWindow, Item, dt_to_ms
from worldmm.privacy.blur_policy import FaceBlur
from worldmm.privacy.detect_budget import DetectionBudget
from worldmm.privacy.faces import Detection, FaceDetector, FrameBlurrer
from worldmm.store.frames import MediaRef, list_frames

pytestmark = pytest.mark.integration

T10 = datetime(2026, 5, 4, 9, 10, tzinfo=UTC)  # a 10 min boundary
FACE = (190, 70, 260, 170)  # well inside the astronaut's face


class CountingDetector(FaceDetector):
    """The shipped detector, counting the frames it searched."""

    calls = 0

    def detect(self, rgb: np.ndarray) -> list[Detection]:
        self.calls += 1
        return super().detect(rgb)


def _jpeg(rgb: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


PHOTO = _jpeg(data.astronaut())
PLAIN = _jpeg(np.dstack([np.tile(np.linspace(0, 255, 320, dtype=np.uint8), (240, 1))] * 3))


def _face_detail(jpeg: bytes) -> float:
    x1, y1, x2, y2 = FACE
    face = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)[y1:y2, x1:x2]
    return float(np.abs(np.diff(face.astype(float), axis=1)).mean())


def _frame(user_id: str, k: int, jpeg: bytes | None) -> Item:
    ts = dt_to_ms(T10) + k * 1000
    key = f"frames/{user_id}/s1/{ts}-{k}.jpg"
    return Item("frames", key, "s1", ts, ts, CaptureRef(key, seq=k, data=jpeg))


def blur_deps(settings, tmp_path, budget: DetectionBudget, **updates) -> Deps:
    """Real store and blob store, the shipped detector (counting), simulated models."""
    from worldmm.store.db import Database

    s = settings.model_copy(update={"window_max_attempts": 1, "face_blur": True, **updates})
    db = Database(s.database_url, max_size=4)
    detector = CountingDetector(threshold=0.4)
    return Deps(
        settings=s,
        db=db,
        roles=Roles(),
        embedder=Embedder(),
        encoder=Encoder(),
        blobs=LocalBlobStore(tmp_path / "blobs"),
        faces=FaceBlur(FrameBlurrer(detector), db, budget),
    )


@pytest.fixture
def deps(settings, tmp_path):
    d = blur_deps(settings, tmp_path, DetectionBudget(64.0))  # never short here
    yield d
    d.close()


def _stored(deps: Deps, user_id: str) -> dict[str, bytes]:
    with deps.db.connection() as conn:
        rows = list_frames(conn, user_id, limit=100)
    return {
        r.blob_key: read_capture(
            deps.blobs,
            r.blob_key,
            MediaRef(r.media_key, r.media_offset, r.media_length) if r.media_key else None,
        )
        for r in rows
    }


def test_each_stored_frame_is_detected_once(deps: Deps, user_id: str) -> None:
    detector = deps.faces.blurrer.detector
    # 4 faces and 2 plain frames at hand; 1 frame stored before (a retrigger finds it there)
    items = [_frame(user_id, k, PHOTO if k < 4 else PLAIN) for k in range(6)]
    earlier = _frame(user_id, 6, None)
    deps.blobs.put(earlier.ref.blob_key, PLAIN)
    window = BaseWindow(user_id, dt_to_ms(T10), (*items, earlier), False, "s1")

    assert asyncio.run(process_window(deps, window)).status == "complete"
    assert detector.calls == 6  # the frames at hand, once each; not the one stored before
    first = _stored(deps, user_id)
    faces = [first[i.ref.blob_key] for i in items[:4]]
    assert all(_face_detail(f) < _face_detail(PHOTO) / 3 for f in faces)  # blurred
    assert [first[i.ref.blob_key] for i in items[4:]] == [PLAIN, PLAIN]  # no face: as sent

    # the same window again, as a retry after a database outage redoes it: blurred from the
    # remembered boxes, no detection, the same bytes stored
    assert asyncio.run(process_window(deps, window)).status == "complete"
    assert detector.calls == 6
    assert _stored(deps, user_id) == first

    # the coarser scales merge captions; they never touch frames
    coarse = CoarseWindow(user_id, 180, dt_to_ms(T10), ((30, dt_to_ms(T10)),), True, "s1")
    asyncio.run(process_window(deps, coarse))
    assert detector.calls == 6

    # a frame that missed its window is stored alone, blurred like the others
    late = _frame(user_id, 29, PHOTO)
    record_late(deps, user_id, late)
    assert detector.calls == 7
    assert _face_detail(deps.blobs.get(late.ref.blob_key)) < _face_detail(PHOTO) / 3


def test_an_opted_out_wearer_costs_no_detection(deps: Deps, user_id: str) -> None:
    from worldmm.store.users import ensure_user, update_profile

    with deps.db.transaction() as conn:
        ensure_user(conn, user_id)
        update_profile(conn, user_id, {"face_blur": False})
    window = BaseWindow(user_id, dt_to_ms(T10), (_frame(user_id, 0, PHOTO),), False, "s1")
    asyncio.run(process_window(deps, window))
    assert deps.faces.blurrer.detector.calls == 0
    assert list(_stored(deps, user_id).values()) == [PHOTO]
