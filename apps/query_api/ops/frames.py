"""A stored frame's JPEG, for the API and the memory browser alike."""

from __future__ import annotations

from fastapi import HTTPException, status
from fastapi.responses import Response

from worldmm.blobs import BlobKeyError, BlobNotFound, capture_time, validate_key
from worldmm.deps import Deps
from worldmm.privacy.retention import user_cutoff


def frame_jpeg(deps: Deps, user_id: str, key: str) -> Response:
    """The frame at blob ``key``; 404 unless it is one of this user's frames, 410 once it is
    past the user's media retention (whether or not a retention run deleted it yet)."""
    missing = HTTPException(status.HTTP_404_NOT_FOUND, "no such frame")
    # only this user's frames: a key under anyone else's prefix is simply not found
    if not key.startswith(f"frames/{user_id}/"):
        raise missing
    try:
        validate_key(key)
    except BlobKeyError:
        raise missing from None
    captured = capture_time(key)
    limit = user_cutoff(deps.db, user_id, deps.settings.media_retention_days, deps.clock())
    if captured is not None and limit is not None and captured < limit:
        raise HTTPException(
            status.HTTP_410_GONE,
            f"this frame was captured {captured.isoformat()}, before the media retention of "
            f"this memory ({limit.isoformat()}): its image is deleted, its text memory stays",
        )
    try:
        data = deps.blobs.get(key)
    except BlobNotFound:
        raise missing from None
    return Response(
        data, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=3600"}
    )
