"""Turning an HTTP response into a typed result or a typed error (shared by both clients)."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import ValidationError

from apps.client.calls import Call
from apps.client.errors import ApiError, error_for


def detail_of(response: httpx.Response) -> str:
    """The API's ``{"detail": ...}`` message, or the start of whatever else came back."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    text = response.text.strip()
    return text[:300] or response.reason_phrase or "no message"


def decode(call: Call[Any], response: httpx.Response) -> Any:
    """The call's response model (or bytes for a frame); raises ApiError on an error status."""
    if response.status_code >= 400:
        raise error_for(response.status_code, detail_of(response))
    if call.model is None:
        return response.content
    try:
        return call.model.model_validate_json(response.content)
    except ValidationError as exc:
        raise ApiError(
            response.status_code, f"unexpected reply to {call.method} {call.path}: {exc}"
        ) from None


def build_request(client: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
    return client.build_request(call.method, call.path, params=call.params, json=call.body)


def redacted(key: str) -> str:
    """What a repr may show of a key: never the key itself."""
    return f"<{len(key)} chars>" if key else "<none>"
