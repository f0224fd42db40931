"""Typed errors of the API client: what went wrong, and the API's own message."""

from __future__ import annotations


class ApiError(Exception):
    """The API answered with an error status; ``detail`` is its ``{"detail": ...}`` message."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail


class AuthError(ApiError):
    """401 (missing or invalid key) or 403 (the key belongs to another user)."""


class NotFoundError(ApiError):
    """404: unknown user, segment or frame."""


class InvalidRequestError(ApiError):
    """422: the message names the field."""


class UnavailableError(ApiError):
    """429 or 503 after the retries ran out, or 502 (a model call failed)."""


class ApiConnectionError(ApiError):
    """The API could not be reached at all (status 0)."""

    def __init__(self, detail: str) -> None:
        super().__init__(0, detail)


_BY_STATUS: dict[int, type[ApiError]] = {
    401: AuthError,
    403: AuthError,
    404: NotFoundError,
    422: InvalidRequestError,
    429: UnavailableError,
    502: UnavailableError,
    503: UnavailableError,
}


def error_for(status: int, detail: str) -> ApiError:
    return _BY_STATUS.get(status, ApiError)(status, detail)
