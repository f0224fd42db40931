"""One hostile frame never costs its window the good frames beside it (issue #42): a frame
whose header declares a huge image is refused before any decode and stored grey, and so is
one that breaks the detector; the window's other frames are stored, blurred, and built."""

from __future__ import annotations

import asyncio

import cv2
import numpy as np
import pytest

from tests.fixtures.blur import BLUR_BUNDLE, PHOTO, face_detail, frame_at_hand, stored_frames
from tests.fixtures.hostile_records import giant_jpeg
from tests.fixtures.windows import T10
from worldmm.deps import Deps
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import BaseWindow, dt_to_ms
from worldmm.privacy.blur_policy import UNREADABLE_JPEG, FaceBlur
from worldmm.privacy.detect_budget import DetectionBudget
from worldmm.privacy.faces import Detection, FaceDetector, FrameBlurrer

pytestmark = [pytest.mark.integration, pytest.mark.deps(**BLUR_BUNDLE, faces="touchy_faces")]

BREAKS = (1234, 5678)  # a frame of exactly this size makes the detector fail


class TouchyDetector(FaceDetector):
    """The shipped detector, failing the way OpenCV fails on one kind of frame."""

    def detect(self, rgb: np.ndarray) -> list[Detection]:
        if rgb.shape[:2] == BREAKS[::-1]:
            raise cv2.error("OpenCV(4) error: (-215:Assertion failed) in function 'forward'")
        return super().detect(rgb)


@pytest.fixture
def touchy_faces(db):
    blurrer = FrameBlurrer(TouchyDetector(threshold=0.4), max_pixels=24_000_000)
    return FaceBlur(blurrer, db, DetectionBudget(64.0))


def _frame_of_size(width: int, height: int) -> bytes:
    ok, buf = cv2.imencode(".jpg", np.full((height, width, 3), 90, np.uint8))
    assert ok
    return buf.tobytes()


def test_a_hostile_frame_beside_thirty_good_ones(deps: Deps, user_id: str) -> None:
    good = [frame_at_hand(user_id, k, PHOTO) for k in range(28)]
    huge = frame_at_hand(user_id, 28, giant_jpeg(PHOTO))  # declares 65535 x 65535
    breaks = frame_at_hand(user_id, 29, _frame_of_size(*BREAKS))
    window = BaseWindow(user_id, dt_to_ms(T10), (*good, huge, breaks), False, "s1")

    outcome = asyncio.run(process_window(deps, window))

    assert outcome.status == "complete", outcome.error
    stored = stored_frames(deps, user_id)
    assert len(stored) == 30  # every capture has its row
    assert stored[huge.ref.blob_key] == UNREADABLE_JPEG  # never stored as sent
    assert stored[breaks.ref.blob_key] == UNREADABLE_JPEG
    for item in good:  # and the good ones are there, blurred
        assert face_detail(stored[item.ref.blob_key]) < face_detail(PHOTO) / 3
