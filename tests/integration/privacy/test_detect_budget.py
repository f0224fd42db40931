"""The detection budget through the real window build path, with the shipped detector on a
real photograph with a face: a frame no detection reaches is stored veiled (the whole frame
obscured, never the bytes sent, and the frames route says so), the frames the models sample
are searched before the others, and with budget to spare every frame is searched."""

from __future__ import annotations

import asyncio
import itertools

import cv2
import numpy as np
import pytest

from query_api.ops.frames import frame_jpeg
from tests.fixtures.blur import (
    BLUR_BUNDLE,
    PHOTO,
    blurring,
    face_detail,
    frame_at_hand,
    stored_frames,
)
from tests.fixtures.windows import T10
from worldmm.deps import Deps
from worldmm.memory.base_segment import sampled_frames
from worldmm.memory.late_and_control import record_late
from worldmm.memory.window_status import process_window
from worldmm.memory.windows import BaseWindow, dt_to_ms
from worldmm.metrics import FACE_BLUR_FRAMES
from worldmm.privacy.detect_budget import DetectionBudget
from worldmm.privacy.faces import FaceDetector
from worldmm.privacy.veil_mark import is_veiled

pytestmark = [pytest.mark.integration, pytest.mark.deps(**BLUR_BUNDLE)]

FRAMES = 10  # a window of 10 frames, 4 of them sampled for the models
SAMPLED = 4


def _decoded(jpeg: bytes, size: tuple[int, int] = (512, 512)) -> np.ndarray:
    """A stored frame at the photograph's size (a veiled frame is stored at 1/8)."""
    bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    return cv2.resize(bgr, size, interpolation=cv2.INTER_LINEAR).astype(float)


def _detail(image: np.ndarray) -> float:
    """Mean absolute difference of neighbouring pixels: what pixelation removes."""
    return float(np.abs(np.diff(image, axis=0)).mean() + np.abs(np.diff(image, axis=1)).mean())


def _assert_veiled(jpeg: bytes) -> None:
    assert jpeg != PHOTO and is_veiled(jpeg)
    before, after = _decoded(PHOTO), _decoded(jpeg)
    assert _detail(after) < _detail(before) / 8
    tiles = [after[y : y + 64, x : x + 64] for y in range(0, 512, 64) for x in range(0, 512, 64)]
    assert max(_detail(t) for t in tiles) < 3  # every part of the frame, not only the face
    rgb = cv2.cvtColor(after.astype(np.uint8), cv2.COLOR_BGR2RGB)
    assert FaceDetector(threshold=0.4, max_side=512).detect(rgb) == []


def _window(user_id: str) -> BaseWindow:
    items = tuple(frame_at_hand(user_id, k, PHOTO) for k in range(FRAMES))
    return BaseWindow(user_id, dt_to_ms(T10), items, False, "s1")


def _veiled_count() -> float:
    return FACE_BLUR_FRAMES.labels("veiled")._value.get()


def _run(deps: Deps, window: BaseWindow) -> None:
    assert asyncio.run(process_window(deps, window)).status == "complete"


def test_a_spent_budget_stores_every_frame_veiled(deps: Deps, user_id: str) -> None:
    deps = blurring(deps, DetectionBudget(0.0))  # nothing to spend
    window, veiled = _window(user_id), _veiled_count()
    _run(deps, window)
    late = frame_at_hand(user_id, 29, PHOTO)  # a frame that missed its window: the same rule
    record_late(deps, user_id, late)

    assert deps.faces.blurrer.detector.calls == 0
    stored = stored_frames(deps, user_id)
    assert len(stored) == FRAMES + 1
    for jpeg in stored.values():
        _assert_veiled(jpeg)
    assert _veiled_count() - veiled == FRAMES + 1
    # a reader of the frames route is told
    r = frame_jpeg(deps, user_id, late.ref.blob_key)
    assert r.headers["X-WorldMM-Media"] == "veiled" and r.body == stored[late.ref.blob_key]


def test_sampled_frames_are_searched_first(deps: Deps, user_id: str) -> None:
    # each search is charged 1 CPU-second (a ticking clock), no refill (a stopped clock): the
    # bucket holds 6, the 4 sampled frames take it to 2, the others need more than half (3)
    ticks = itertools.count()
    budget = DetectionBudget(1.0, burst_s=6, clock=lambda: 0.0, cpu_clock=lambda: next(ticks))
    deps = blurring(deps, budget, frames_per_window=SAMPLED)
    window = _window(user_id)
    _run(deps, window)
    sampled = {i.ref.blob_key for i in sampled_frames(window, SAMPLED)}
    assert len(sampled) == SAMPLED
    assert deps.faces.blurrer.detector.calls == SAMPLED
    stored = stored_frames(deps, user_id)
    searched = {k for k, jpeg in stored.items() if not is_veiled(jpeg)}
    assert searched == sampled
    for k in searched:
        assert face_detail(stored[k]) < face_detail(PHOTO) / 3  # blurred, not veiled
        assert np.abs(_decoded(stored[k]) - _decoded(PHOTO)).mean() < 5  # the rest kept
    for k in stored.keys() - sampled:
        _assert_veiled(stored[k])

    # stored again (a retry after a database outage): the same bytes, no new search,
    # though the budget could now pay for the others
    budget.charge(-100)
    _run(deps, window)
    assert deps.faces.blurrer.detector.calls == SAMPLED
    assert stored_frames(deps, user_id) == stored


def test_with_budget_to_spare_every_frame_is_searched(deps: Deps, user_id: str) -> None:
    deps = blurring(deps, DetectionBudget(64.0), frames_per_window=SAMPLED)
    veiled = _veiled_count()
    _run(deps, _window(user_id))
    assert deps.faces.blurrer.detector.calls == FRAMES
    stored = stored_frames(deps, user_id)
    assert len(stored) == FRAMES and _veiled_count() == veiled
    for jpeg in stored.values():
        assert not is_veiled(jpeg)
        assert face_detail(jpeg) < face_detail(PHOTO) / 3
