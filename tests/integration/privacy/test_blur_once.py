"""Face detection is the cost of blurring: through the real window build path each stored
frame is searched once — not again when the window is stored again (a retry after a database
outage redoes the whole window), not for the coarser scales, not for frames already in the
store — and a capture that missed its window is blurred too."""

from __future__ import annotations

import asyncio

import pytest

from tests.fixtures.blur import (
    BLUR_BUNDLE,
    PHOTO,
    PLAIN,
    counting_faces,
    face_detail,
    frame_at_hand,
    stored_frames,
)
from tests.fixtures.windows import T10
from worldmm.deps import Deps
from worldmm.memory.late_and_control import record_late
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import BaseWindow, CoarseWindow, dt_to_ms
from worldmm.privacy.detect_budget import DetectionBudget

pytestmark = [pytest.mark.integration, pytest.mark.deps(**BLUR_BUNDLE, faces="counted_faces")]


@pytest.fixture
def counted_faces(db):
    return counting_faces(db, DetectionBudget(64.0))  # never short here


def test_each_stored_frame_is_detected_once(deps: Deps, user_id: str) -> None:
    detector = deps.faces.blurrer.detector
    # 4 faces and 2 plain frames at hand; 1 frame stored before (a retrigger finds it there)
    items = [frame_at_hand(user_id, k, PHOTO if k < 4 else PLAIN) for k in range(6)]
    earlier = frame_at_hand(user_id, 6, None)
    deps.blobs.put(earlier.ref.blob_key, PLAIN)
    window = BaseWindow(user_id, dt_to_ms(T10), (*items, earlier), False, "s1")

    assert asyncio.run(process_window(deps, window)).status == "complete"
    assert detector.calls == 6  # the frames at hand, once each; not the one stored before
    first = stored_frames(deps, user_id)
    faces = [first[i.ref.blob_key] for i in items[:4]]
    assert all(face_detail(f) < face_detail(PHOTO) / 3 for f in faces)  # blurred
    assert [first[i.ref.blob_key] for i in items[4:]] == [PLAIN, PLAIN]  # no face: as sent

    # the same window again, as a retry after a database outage redoes it: blurred from the
    # remembered boxes, no detection, the same bytes stored
    assert asyncio.run(process_window(deps, window)).status == "complete"
    assert detector.calls == 6
    assert stored_frames(deps, user_id) == first

    # the coarser scales merge captions; they never touch frames
    coarse = CoarseWindow(user_id, 180, dt_to_ms(T10), ((30, dt_to_ms(T10)),), True, "s1")
    asyncio.run(process_window(deps, coarse))
    assert detector.calls == 6

    # a frame that missed its window is stored alone, blurred like the others
    late = frame_at_hand(user_id, 29, PHOTO)
    record_late(deps, user_id, late)
    assert detector.calls == 7
    assert face_detail(deps.blobs.get(late.ref.blob_key)) < face_detail(PHOTO) / 3


def test_an_opted_out_wearer_costs_no_detection(deps: Deps, user_id: str) -> None:
    from worldmm.store.users import ensure_user, update_profile

    with deps.db.transaction() as conn:
        ensure_user(conn, user_id)
        update_profile(conn, user_id, {"face_blur": False})
    window = BaseWindow(user_id, dt_to_ms(T10), (frame_at_hand(user_id, 0, PHOTO),), False, "s1")
    asyncio.run(process_window(deps, window))
    assert deps.faces.blurrer.detector.calls == 0
    assert list(stored_frames(deps, user_id).values()) == [PHOTO]
