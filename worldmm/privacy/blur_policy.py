"""Which frames are blurred before they are stored: the deployment's switch
(``WORLDMM_FACE_BLUR``) and each wearer's recorded opt-out (``users.face_blur``).

The ingest flow asks :meth:`FaceBlur.transform` for a window's frame transform (the hook of
:func:`worldmm.media.window.store_window`); the transform records what it stored so that,
with ``WORLDMM_FACE_BLUR_MODELS_SEE=blurred``, the models see exactly that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from worldmm import metrics
from worldmm.privacy.faces import FrameBlurrer, build_blurrer
from worldmm.store.users import get_profile

if TYPE_CHECKING:
    from worldmm.store.db import Database

log = logging.getLogger("worldmm.privacy.faces")

OPT_OUT_TTL_S = 60.0  # an opt-out (or its end) applies to windows closing after this


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
    stored: dict[str, bytes] = field(default_factory=dict)

    def __call__(self, capture: Any) -> bytes:
        try:
            result = self.blurrer(capture.data)
        except ValueError as exc:
            # a frame the detector cannot read cannot be checked for faces: a small grey frame
            # is stored in its place, never the frame itself
            log.warning("face_blur.unreadable key=%s error=%s", capture.key, exc)
            self.stored[capture.key] = UNREADABLE_JPEG
            return UNREADABLE_JPEG
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
        return WindowBlur(self.blurrer) if self.applies_to(user_id) else None
