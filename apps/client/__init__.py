"""A typed Python client of the query API, sync and async, over the API's own pydantic models
(``worldmm.wire.schemas``: plain pydantic, no FastAPI). 429 and 503 are retried, after the
server's Retry-After when it sends one. ``worldmm ask``, the demo and the MCP server all talk
to the API through it.

    from apps.client import WorldMMClient

    with WorldMMClient("http://127.0.0.1:8080", key) as mm:
        reply = mm.query("Where did I leave my keys?")
        for e in reply.evidence:
            print(e.start, e.end, e.text)
"""

from apps.client.aio import AsyncWorldMMClient
from apps.client.errors import (
    ApiConnectionError,
    ApiError,
    AuthError,
    InvalidRequestError,
    NotFoundError,
    UnavailableError,
)
from apps.client.retry import RetryPolicy
from apps.client.sync import WorldMMClient

__all__ = [
    "ApiConnectionError",
    "ApiError",
    "AsyncWorldMMClient",
    "AuthError",
    "InvalidRequestError",
    "NotFoundError",
    "RetryPolicy",
    "UnavailableError",
    "WorldMMClient",
]
