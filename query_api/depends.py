"""What routes receive through ``Depends``: the app's bundle (``AppDeps``: the
:class:`worldmm.deps.Deps` built at start-up by ``create_app``), this process's per-key rate
limiter and its queue of recalls (reinforcement, written in batches)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from query_api.limits import RateLimiter
from worldmm.deps import Deps as Bundle
from worldmm.memory.recall_queue import RecallQueue


def get_deps(request: Request) -> Bundle:
    return request.app.state.deps


def get_limiter(request: Request) -> RateLimiter:
    return request.app.state.limiter


def get_recalls(request: Request) -> RecallQueue:
    return request.app.state.recalls


def install(state: object, deps: Bundle) -> None:
    """Put ``deps``, a rate limiter over its Redis (WORLDMM_API_RATE_LIMIT, per process
    while there is none) and a recall queue over its database on an app's state (the
    lifespan starts and closes the queue's flushing)."""
    state.deps = deps  # type: ignore[attr-defined]
    state.limiter = RateLimiter(deps.settings.api_rate_limit, deps.redis)  # type: ignore[attr-defined]
    state.recalls = recall_queue(deps)  # type: ignore[attr-defined]


def recall_queue(deps: Bundle) -> RecallQueue:
    s = deps.settings
    return RecallQueue(deps.db, flush_s=s.recall_flush_s, max_pending=s.recall_max_pending)


AppDeps = Annotated[Bundle, Depends(get_deps)]
Limiter = Annotated[RateLimiter, Depends(get_limiter)]
Recalls = Annotated[RecallQueue, Depends(get_recalls)]
