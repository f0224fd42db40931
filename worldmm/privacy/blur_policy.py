"""Which frames are blurred before they are stored: the deployment's switch
(``WORLDMM_FACE_BLUR``) and each wearer's recorded opt-out (``users.face_blur``).

The ingest flow asks :meth:`FaceBlur.transform` for a window's frame transform (the hook of
:func:`worldmm.media.window.store_window`, and of a late capture's store); the transform
records what it stored so that, with ``WORLDMM_FACE_BLUR_MODELS_SEE=blurred``, the models see
exactly that. Detection is the cost (docs/privacy.md): it runs while the process's
:class:`~worldmm.privacy.detect_budget.DetectionBudget` allows, the window's sampled frames
first, and a frame it does not reach is veiled (the whole frame obscured), never stored as
sent. What was decided for each capture (its boxes, or the veil) is remembered (bounded, by
capture key), so a window stored again (its database write retried in an outage, a retrigger
in the same process) stores the same bytes without detecting again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from worldmm import metrics
from worldmm.privacy.detect_budget import DetectionBudget
from worldmm.privacy.faces import Box, FrameBlurrer, build_blurrer, veil
from worldmm.store.users import get_profile

if TYPE_CHECKING:
    from worldmm.store.db import Database

log = logging.getLogger("worldmm.privacy.faces")

OPT_OUT_TTL_S = 60.0  # an opt-out (or its end) applies to windows closing after this
# Wearers whose choice is remembered (least recently used out): an id is a few dozen bytes,
# and a wearer forgotten here is read again at their next window.
OPT_OUT_USERS = 10_000
# Captures whose boxes are remembered: about two window closes of 1,000 wearers at 1 fps
# (a few MB), enough for a store retried while the database is down.
BOX_MEMO_CAPTURES = 65_536


VEILED: Literal["veiled"] = "veiled"
Found = tuple[Box, ...] | Literal["veiled"]
"""What was decided for a capture: the faces found in it, or that no detection reached it."""


class BoxMemo:
    """What was found per capture key (bounded, least recently used out; thread-safe)."""

    def __init__(self, size: int = BOX_MEMO_CAPTURES) -> None:
        self.size = size
        self._boxes: OrderedDict[str, Found] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Found | None:
        with self._lock:
            boxes = self._boxes.get(key)
            if boxes is not None:
                self._boxes.move_to_end(key)
            return boxes

    def put(self, key: str, boxes: Found) -> None:
        with self._lock:
            self._boxes[key] = boxes
            self._boxes.move_to_end(key)
            while len(self._boxes) > self.size:
                self._boxes.popitem(last=False)


def _blank_jpeg() -> bytes:
    import cv2
    import numpy as np

    ok, buf = cv2.imencode(".jpg", np.full((8, 8, 3), 128, np.uint8))
    assert ok
    return buf.tobytes()


UNREADABLE_JPEG = _blank_jpeg()


@dataclass
class WindowBlur:
    """The frame transform of one window (``sampled``: the keys of the frames its models see,
    served first by the budget), and the bytes it stored per capture key."""

    blurrer: FrameBlurrer
    budget: DetectionBudget
    memo: BoxMemo = field(default_factory=BoxMemo)
    sampled: frozenset[str] = frozenset()
    stored: dict[str, bytes] = field(default_factory=dict)

    def __call__(self, capture: Any) -> bytes:
        self.stored[capture.key] = data = self._store(capture)
        return data

    def _store(self, capture: Any) -> bytes:
        found = self.memo.get(capture.key)
        try:
            if found == VEILED or (
                found is None and not self.budget.allows(capture.key in self.sampled)
            ):
                data = veil(capture.data)
                if found is None:  # counted once: not again when a window is stored again
                    self.memo.put(capture.key, VEILED)
                    metrics.FACE_BLUR_FRAMES.labels("veiled").inc()
                return data
            cpu = self.budget.cpu_clock()
            result = self.blurrer(capture.data, found)
        except Exception as exc:  # noqa: BLE001 - one frame's failure is not its window's
            # a frame that cannot be decoded (or declares a huge image, or breaks the
            # detector) cannot be checked for faces: a small grey frame is stored in its
            # place, never the frame itself, and the window's other frames go on
            log.warning(
                "face_blur.unreadable key=%s error=%s: %s", capture.key, type(exc).__name__, exc
            )
            metrics.FACE_BLUR_FRAMES.labels("unreadable").inc()
            return UNREADABLE_JPEG
        if result.detected:
            cpu_s = self.budget.cpu_clock() - cpu
            self.budget.charge(cpu_s)
            self.memo.put(capture.key, result.boxes)
            metrics.FACE_BLUR_FRAMES.labels("detected").inc()
            metrics.FACE_DETECT_CPU_SECONDS.inc(cpu_s)
            metrics.FACE_BLUR_SECONDS.observe(result.seconds)
            if result.faces:
                metrics.FACES_BLURRED.inc(result.faces)
        return result.jpeg


class FaceBlur:
    """Thread-safe; opt-outs are read from the database at most once a minute per user."""

    def __init__(
        self,
        blurrer: FrameBlurrer,
        db: Database,
        budget: DetectionBudget,
        *,
        models_see: str = "original",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.blurrer = blurrer
        self.db = db
        self.budget = budget
        self.models_see = models_see
        self._clock = clock
        self._opted_in: OrderedDict[str, tuple[bool, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.memo = BoxMemo()

    @classmethod
    def from_settings(cls, settings: Any, db: Database) -> FaceBlur | None:
        blurrer = build_blurrer(settings)
        if blurrer is None:
            return None
        budget = DetectionBudget(settings.face_blur_cores)
        return cls(blurrer, db, budget, models_see=settings.face_blur_models_see)

    def applies_to(self, user_id: str) -> bool:
        now = self._clock()
        with self._lock:
            found = self._opted_in.get(user_id)
        if found is not None and now - found[1] < OPT_OUT_TTL_S:
            return found[0]
        with self.db.connection() as conn:
            profile = get_profile(conn, user_id)
        blur = profile is None or profile.face_blur  # a user first seen now: the default
        with self._lock:
            self._opted_in[user_id] = (blur, now)
            self._opted_in.move_to_end(user_id)
            while len(self._opted_in) > OPT_OUT_USERS:
                self._opted_in.popitem(last=False)
        return blur

    def transform(self, user_id: str, sampled: Iterable[str] = ()) -> WindowBlur | None:
        """The transform of a window (``sampled``: the keys of the frames its models see) or
        of a late frame; None when the wearer opted out."""
        if not self.applies_to(user_id):
            return None
        return WindowBlur(self.blurrer, self.budget, self.memo, frozenset(sampled))
