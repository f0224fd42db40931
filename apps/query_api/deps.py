"""The service's request dependencies, handed to routes via ``Depends``: the one bundle
(:class:`worldmm.deps.Deps`, built at start-up by ``create_app``) and this process's per-key
rate limiter."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from apps.query_api.limits import RateLimiter
from worldmm.deps import Deps as Bundle


def get_deps(request: Request) -> Bundle:
    return request.app.state.deps


def get_limiter(request: Request) -> RateLimiter:
    return request.app.state.limiter


def install(state: object, deps: Bundle) -> None:
    """Put ``deps`` and a rate limiter over its Redis (WORLDMM_API_RATE_LIMIT, per process
    while there is none) on an app's state."""
    state.deps = deps  # type: ignore[attr-defined]
    state.limiter = RateLimiter(deps.settings.api_rate_limit, deps.redis)  # type: ignore[attr-defined]


Deps = Annotated[Bundle, Depends(get_deps)]
Limiter = Annotated[RateLimiter, Depends(get_limiter)]
