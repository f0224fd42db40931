"""A stored frame's JPEG, for the API and the memory browser alike."""

from __future__ import annotations

from fastapi import HTTPException, status
from fastapi.responses import Response

from worldmm.blobs import BlobKeyError, BlobNotFound, validate_key
from worldmm.deps import Deps


def frame_jpeg(deps: Deps, user_id: str, key: str) -> Response:
    """The frame at blob ``key``; 404 unless it is one of this user's frames."""
    missing = HTTPException(status.HTTP_404_NOT_FOUND, "no such frame")
    # only this user's frames: a key under anyone else's prefix is simply not found
    if not key.startswith(f"frames/{user_id}/"):
        raise missing
    try:
        data = deps.blobs.get(validate_key(key))
    except (BlobKeyError, BlobNotFound):
        raise missing from None
    return Response(
        data, media_type="image/jpeg", headers={"Cache-Control": "private, max-age=3600"}
    )
