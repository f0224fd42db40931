"""Shared pieces of the per-user routers."""

from __future__ import annotations

from datetime import datetime

from fastapi import HTTPException, status

from worldmm.models import SCALES
from worldmm.wire.schemas import ErrorOut

USER_ERRORS: dict[int | str, dict] = {
    401: {"model": ErrorOut, "description": "Missing or invalid API key"},
    403: {"model": ErrorOut, "description": "The key belongs to another user"},
    404: {"model": ErrorOut, "description": "Unknown user (admin key) or item"},
    422: {"model": ErrorOut, "description": "Invalid input; the message says which"},
}
MODEL_ERROR: dict[int | str, dict] = {
    502: {"model": ErrorOut, "description": "A model call failed; retry later"},
}


def check_range(start: datetime | None, end: datetime | None) -> None:
    if start is not None and end is not None and start > end:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, "'from' must not be after 'to'")


def check_scale(scale: int | None) -> None:
    if scale is not None and scale not in SCALES:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"scale must be one of {', '.join(map(str, SCALES))} (seconds), got {scale}",
        )
