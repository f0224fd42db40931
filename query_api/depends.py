"""What routes receive through ``Depends``: the app's bundle (``AppDeps``: the
:class:`worldmm.deps.Deps` built at start-up by ``create_app``), this process's per-key rate
limiter, its failed-authentication limit, its export slots and its queue of recalls
(reinforcement, written in batches)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from query_api.exports import ExportSlots
from query_api.limits import AuthFailures, RateLimiter
from worldmm.deps import Deps as Bundle
from worldmm.memory.recall_queue import RecallQueue


def get_deps(request: Request) -> Bundle:
    return request.app.state.deps


def get_limiter(request: Request) -> RateLimiter:
    return request.app.state.limiter


def get_auth_failures(request: Request) -> AuthFailures:
    return request.app.state.auth_failures


def get_export_slots(request: Request) -> ExportSlots:
    return request.app.state.export_slots


def get_recalls(request: Request) -> RecallQueue:
    return request.app.state.recalls


def install(state: object, deps: Bundle) -> None:
    """Put ``deps``, a rate limiter and a failed-authentication limit over its Redis (per
    process while there is none), the export slots and a recall queue over its database on an
    app's state (the lifespan starts and closes the queue's flushing)."""
    s = deps.settings
    state.deps = deps  # type: ignore[attr-defined]
    state.limiter = RateLimiter(s.api_rate_limit, deps.redis)  # type: ignore[attr-defined]
    state.auth_failures = AuthFailures(  # type: ignore[attr-defined]
        s.api_auth_failures_per_address, s.api_auth_failures_per_user, deps.redis
    )
    state.export_slots = ExportSlots(s.api_export_concurrency, s.api_export_per_key)  # type: ignore[attr-defined]
    state.recalls = recall_queue(deps)  # type: ignore[attr-defined]


def recall_queue(deps: Bundle) -> RecallQueue:
    s = deps.settings
    return RecallQueue(deps.db, flush_s=s.recall_flush_s, max_pending=s.recall_max_pending)


AppDeps = Annotated[Bundle, Depends(get_deps)]
Limiter = Annotated[RateLimiter, Depends(get_limiter)]
Recalls = Annotated[RecallQueue, Depends(get_recalls)]
Failures = Annotated[AuthFailures, Depends(get_auth_failures)]
Exports = Annotated[ExportSlots, Depends(get_export_slots)]
