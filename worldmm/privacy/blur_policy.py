"""Which frames are blurred before they are stored: the deployment's switch
(``WORLDMM_FACE_BLUR``) and each wearer's recorded opt-out (``users.face_blur``).

The ingest flow asks :meth:`FaceBlur.transform` for a window's frame transform (the hook of
:func:`worldmm.media.window.store_window`, and of a late capture's store); the transform
records what it stored so that, with ``WORLDMM_FACE_BLUR_MODELS_SEE=blurred``, the models see
exactly that. Detection is the cost (docs/privacy.md): the boxes found for each capture are
remembered (bounded, by capture key), so a window stored again (its database write retried
in an outage, a retrigger in the same process) blurs its frames without detecting again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from worldmm import metrics
from worldmm.privacy.faces import Box, FrameBlurrer, build_blurrer
from worldmm.store.users import get_profile

if TYPE_CHECKING:
    from worldmm.store.db import Database

log = logging.getLogger("worldmm.privacy.faces")

OPT_OUT_TTL_S = 60.0  # an opt-out (or its end) applies to windows closing after this
# Captures whose boxes are remembered: about two window closes of 1,000 wearers at 1 fps
# (a few MB), enough for a store retried while the database is down.
BOX_MEMO_CAPTURES = 65_536


class BoxMemo:
    """Faces found per capture key (bounded, least recently used out; thread-safe)."""

    def __init__(self, size: int = BOX_MEMO_CAPTURES) -> None:
        self.size = size
        self._boxes: OrderedDict[str, tuple[Box, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[Box, ...] | None:
        with self._lock:
            boxes = self._boxes.get(key)
            if boxes is not None:
                self._boxes.move_to_end(key)
            return boxes

    def put(self, key: str, boxes: tuple[Box, ...]) -> None:
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
    """The frame transform of one window, and the bytes it stored per capture key."""

    blurrer: FrameBlurrer
    memo: BoxMemo = field(default_factory=BoxMemo)
    stored: dict[str, bytes] = field(default_factory=dict)

    def __call__(self, capture: Any) -> bytes:
        try:
            result = self.blurrer(capture.data, self.memo.get(capture.key))
        except ValueError as exc:
            # a frame the detector cannot read cannot be checked for faces: a small grey frame
            # is stored in its place, never the frame itself
            log.warning("face_blur.unreadable key=%s error=%s", capture.key, exc)
            self.stored[capture.key] = UNREADABLE_JPEG
            return UNREADABLE_JPEG
        if result.detected:  # counted once per capture: a re-blur from the memo is not
            self.memo.put(capture.key, result.boxes)
            metrics.FACE_BLUR_SECONDS.observe(result.seconds)
            if result.faces:
                metrics.FACES_BLURRED.inc(result.faces)
        self.stored[capture.key] = result.jpeg
        return result.jpeg


class FaceBlur:
    """Thread-safe; opt-outs are read from the database at most once a minute per user."""

    def __init__(
        self,
        blurrer: FrameBlurrer,
        db: Database,
        *,
        models_see: str = "original",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.blurrer = blurrer
        self.db = db
        self.models_see = models_see
        self._clock = clock
        self._opted_in: dict[str, tuple[bool, float]] = {}
        self._lock = threading.Lock()
        self.memo = BoxMemo()

    @classmethod
    def from_settings(cls, settings: Any, db: Database) -> FaceBlur | None:
        blurrer = build_blurrer(settings)
        if blurrer is None:
            return None
        return cls(blurrer, db, models_see=settings.face_blur_models_see)

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
        return blur

    def transform(self, user_id: str) -> WindowBlur | None:
        """The window's transform; None when the wearer opted out."""
        return WindowBlur(self.blurrer, self.memo) if self.applies_to(user_id) else None
