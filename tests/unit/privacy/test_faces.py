"""Face blurring: the pure blur, and the shipped detector on a real photograph with a face
(scikit-image's astronaut, a NASA portrait of Eileen Collins)."""

from __future__ import annotations

import subprocess
import sys

import cv2
import numpy as np
import pytest
from skimage import data

from worldmm.privacy.faces import FaceDetector, FrameBlurrer, blur_boxes, veil
from worldmm.privacy.veil_mark import is_veiled

# Where the astronaut's face is (checked by eye on the 512×512 photograph).
FACE = (175, 50, 275, 185)


def _jpeg(rgb: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    assert ok
    return buf.tobytes()


def _decode(jpeg: bytes) -> np.ndarray:
    return cv2.cvtColor(
        cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB
    )


@pytest.fixture(scope="module")
def detector() -> FaceDetector:
    return FaceDetector(threshold=0.4, max_side=640)


def test_blur_changes_the_box_and_nothing_else() -> None:
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    out = blur_boxes(image, [(40, 30, 80, 70)], margin=0.0)
    inside, before = out[30:70, 40:80].astype(float), image[30:70, 40:80].astype(float)
    assert inside.std() < before.std() / 3  # detail gone
    mask = np.ones(image.shape[:2], bool)
    mask[30:70, 40:80] = False
    assert np.array_equal(out[mask], image[mask])  # the rest untouched, bit for bit


def test_blur_clips_boxes_at_the_border_and_skips_slivers() -> None:
    image = np.full((50, 50, 3), 200, np.uint8)
    image[::2] = 0
    out = blur_boxes(image, [(-10, -10, 20, 20), (49, 49, 60, 60)], margin=0.0)
    assert out.shape == image.shape
    assert not np.array_equal(out[:20, :20], image[:20, :20])
    assert np.array_equal(out[45:, 45:], image[45:, 45:])  # a 1 px box is left alone


def test_detector_finds_the_astronauts_face(detector: FaceDetector) -> None:
    faces = detector.detect(data.astronaut())
    assert len(faces) == 1
    x1, y1, x2, y2 = faces[0].box
    assert FACE[0] <= x1 < x2 <= FACE[2] and FACE[1] <= y1 < y2 <= FACE[3]
    assert faces[0].score > 0.8


def test_detection_boxes_follow_the_frame_size(detector: FaceDetector) -> None:
    """A frame larger than ``max_side`` is detected on a scaled copy; boxes come back in
    the frame's own pixels."""
    big = cv2.resize(data.astronaut(), (1024, 1024))
    (face,) = detector.detect(big)
    assert all(abs(a - 2 * b) <= 16 for a, b in zip(face.box, (181, 58, 270, 178), strict=True))


def test_blurrer_blurs_the_face_and_keeps_the_background(detector: FaceDetector) -> None:
    photo = data.astronaut()
    result = FrameBlurrer(detector)(_jpeg(photo))
    assert result.faces == 1
    before, after = _decode(_jpeg(photo)).astype(float), _decode(result.jpeg).astype(float)
    x1, y1, x2, y2 = 190, 70, 260, 170  # well inside the face
    face_before, face_after = before[y1:y2, x1:x2], after[y1:y2, x1:x2]
    assert np.abs(face_after - face_before).mean() > 10
    assert face_after.std() < face_before.std()
    # gradient energy (detail) inside the face drops sharply
    detail = [np.abs(np.diff(f, axis=1)).mean() for f in (face_before, face_after)]
    assert detail[1] < detail[0] / 3
    background = before[300:500, 0:150], after[300:500, 0:150]  # the flag and the suit
    assert np.abs(background[1] - background[0]).mean() < 3  # only JPEG re-encoding noise


def test_a_frame_without_faces_comes_back_unchanged(detector: FaceDetector) -> None:
    gradient = np.tile(np.linspace(0, 255, 320, dtype=np.uint8), (240, 1))
    jpeg = _jpeg(np.dstack([gradient] * 3))
    result = FrameBlurrer(detector)(jpeg)
    assert result.faces == 0 and result.jpeg == jpeg


def test_an_undecodable_frame_is_refused(detector: FaceDetector) -> None:
    with pytest.raises(ValueError, match="not a decodable JPEG"):
        FrameBlurrer(detector)(b"\xff\xd8 not really a jpeg \xff\xd9")


def test_detector_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="threshold"):
        FaceDetector(threshold=1.5)
    with pytest.raises(ValueError, match="max_side"):
        FaceDetector(max_side=8)


def _iou(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    w = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union


@pytest.mark.parametrize("side", [384, 320, 256])
def test_boxes_from_a_smaller_detection_land_on_the_face(detector: FaceDetector, side: int) -> None:
    """Detected on a copy of ``side`` px, the box comes back in the frame's pixels, on the
    face the full-size detection found."""
    photo = data.astronaut()
    (full,) = detector.detect(photo)
    (small,) = FaceDetector(threshold=0.4, max_side=side).detect(photo)
    x1, y1, x2, y2 = small.box
    assert FACE[0] <= x1 < x2 <= FACE[2] and FACE[1] <= y1 < y2 <= FACE[3]
    assert _iou(small.box, full.box) > 0.7


def test_boxes_map_back_on_each_axis_of_a_wide_frame() -> None:
    """768×512 (stretched): detected at 384×256, x and y scale back by their own factors,
    onto the box the full-size detection finds."""
    wide = cv2.resize(data.astronaut(), (768, 512))
    (full,) = FaceDetector(threshold=0.4, max_side=768).detect(wide)
    (small,) = FaceDetector(threshold=0.4, max_side=384).detect(wide)
    assert _iou(small.box, full.box) > 0.8
    x1, y1, x2, y2 = small.box
    # the astronaut's face centre (225, 118) with x stretched 1.5 times
    assert abs((x1 + x2) / 2 - 1.5 * 225) < 10 and abs((y1 + y2) / 2 - 118) < 10


def test_given_boxes_blur_without_detecting(detector: FaceDetector) -> None:
    blurrer = FrameBlurrer(detector)
    jpeg = _jpeg(data.astronaut())
    found = blurrer(jpeg)
    assert found.detected and found.faces == 1
    again = blurrer(jpeg, found.boxes)
    assert not again.detected and again.jpeg == found.jpeg
    none = blurrer(jpeg, ())
    assert not none.detected and none.jpeg == jpeg  # no face remembered: stored as sent


def test_a_veiled_frame_hides_everything_and_says_so(detector: FaceDetector) -> None:
    """No detection reached it: the whole frame is pixelated (1/8 size, 8×8 cells), no face
    is found in it at any size, and its JPEG comment marks it veiled."""
    jpeg = _jpeg(data.astronaut())
    veiled = veil(jpeg)
    assert is_veiled(veiled) and not is_veiled(jpeg)
    small = _decode(veiled)
    assert small.shape == (64, 64, 3)
    back = cv2.resize(small, (512, 512), interpolation=cv2.INTER_LINEAR)
    assert detector.detect(back) == [] and detector.detect(small) == []
    detail = [np.abs(np.diff(f.astype(float), axis=1)).mean() for f in (_decode(jpeg), back)]
    assert detail[1] < detail[0] / 8
    with pytest.raises(ValueError, match="not a decodable JPEG"):
        veil(b"\xff\xd8 not really a jpeg \xff\xd9")


_THREAD_CPU = """
import time
from skimage import data
from worldmm.privacy.faces import FaceDetector
detector, photo = FaceDetector(threshold=0.4), data.astronaut()
detector.detect(photo)
process, thread = time.process_time(), time.thread_time()
for _ in range(3):
    detector.detect(photo)
print(time.process_time() - process, time.thread_time() - thread)
"""


def test_detection_runs_on_the_calling_thread_alone() -> None:
    """One OpenCV thread: a detection's CPU time is the calling thread's (what the detection
    budget charges), none is spent on threads of OpenCV's own (a fresh process, so no other
    test's threads are counted)."""
    out = subprocess.run(
        [sys.executable, "-c", _THREAD_CPU], capture_output=True, text=True, check=True
    )
    process, thread = map(float, out.stdout.split())
    assert thread > 0 and process == pytest.approx(thread, rel=0.05, abs=0.005)
