"""A stored frame's JPEG, for the API and the memory browser alike."""

from __future__ import annotations

from fastapi import HTTPException, status
from fastapi.responses import Response

from worldmm.blobs import BlobKeyError, BlobNotFound, BlobStoreError, capture_time, validate_key
from worldmm.deps import Deps
from worldmm.media.window import read_capture
from worldmm.privacy.retention import user_cutoff
from worldmm.privacy.veil_mark import is_veiled
from worldmm.store.frames import MediaRef, get_frame
from worldmm.store.models import FrameRecord


def frame_jpeg(deps: Deps, user_id: str, key: str, row: FrameRecord | None = None) -> Response:
    """The frame at blob ``key``; 404 unless it is one of this user's frames, 410 once it is
    past the user's media retention (whether or not a retention run deleted it yet). A frame
    inside its window's container is one ranged read of it; an older frame (or a late one)
    is the blob under its own key. A veiled frame says so in ``X-WorldMM-Media: veiled``."""
    missing = HTTPException(status.HTTP_404_NOT_FOUND, "no such frame")
    # only this user's frames: a key under anyone else's prefix is simply not found
    if not key.startswith(f"frames/{user_id}/"):
        raise missing
    try:
        validate_key(key)
    except BlobKeyError:
        raise missing from None
    captured = row.captured_at if row is not None else capture_time(key)
    limit = user_cutoff(deps.db, user_id, deps.settings.media_retention_days, deps.clock())
    if captured is not None and limit is not None and captured < limit:
        raise HTTPException(
            status.HTTP_410_GONE,
            f"this frame was captured {captured.isoformat()}, before the media retention of "
            f"this memory ({limit.isoformat()}): its image is deleted, its text memory stays",
        )
    if row is None:
        with deps.db.connection() as conn:
            row = get_frame(conn, user_id, key)
    ref = (
        MediaRef(row.media_key, row.media_offset or 0, row.media_length or 0)
        if (row is not None and row.media_key)
        else None
    )
    try:
        data = read_capture(deps.blobs, key, ref)
    except BlobNotFound:
        raise missing from None
    except BlobStoreError:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the blob store is unavailable",
            headers={"Retry-After": "5"},
        ) from None
    headers = {"Cache-Control": "private, max-age=3600"}
    if is_veiled(data):  # the detection budget did not reach it: stored wholly obscured
        headers["X-WorldMM-Media"] = "veiled"
    return Response(data, media_type="image/jpeg", headers=headers)
