"""Shared pieces of the per-user routers."""

from __future__ import annotations

from datetime import datetime

from fastapi import HTTPException, status

from query_api.schemas import ErrorOut

USER_ERRORS: dict[int | str, dict] = {
    401: {"model": ErrorOut, "description": "Missing or invalid API key"},
    403: {"model": ErrorOut, "description": "The key belongs to another user"},
    404: {"model": ErrorOut, "description": "Unknown user (admin key) or item"},
    422: {"model": ErrorOut, "description": "Invalid input; the message says which"},
}


def check_range(start: datetime | None, end: datetime | None) -> None:
    if start is not None and end is not None and start > end:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT, "'from' must not be after 'to'"
        )
