"""The query service: ``create_app(settings, deps=None)``.

Dependencies (database pool, model roles, embedder, encoder, graph cache, blob store) are
built once when the app starts (lifespan) unless passed in; routes reach them through
``query_api.depends.AppDeps``. Passed-in deps belong to the caller and are not closed here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from query_api.api_metrics import API_LATENCY, API_REQUESTS
from query_api.depends import install
from query_api.errors import install_error_handlers, route_of
from query_api.proxies import TrustedProxies
from query_api.routes import (
    health,
    keys,
    memory,
    privacy,
    profile,
    query,
    usage,
    users,
    whoami,
)
from query_api.ui import install_ui
from worldmm.body_limit import BodySizeLimit
from worldmm.deps import Deps, build_deps
from worldmm.llm.prices import prices_for
from worldmm.privacy.forget_media import DeletionSweeper
from worldmm.settings import Settings

log = logging.getLogger("query_api")

DESCRIPTION = """\
The memory of a camera-glasses wearer, as a service.

Every `/v1/users/{user_id}/...` route needs `Authorization: Bearer <key>`: that user's key
(from `POST /v1/users`, issued by an admin) or the admin key (`WORLDMM_ADMIN_API_KEY`).
Errors are JSON `{"detail": "..."}`: 401 missing, invalid or revoked key, 403 a key of
another user, 404 unknown user or item, 413 body too large, 422 invalid input, 429 the key's
rate limit (see Retry-After), 502 a model call failed, 503 the database is unavailable (see
Retry-After). A user may hold several keys; admins create, list, rotate and revoke them.
Times are ISO 8601 with a zone. Every user has a time zone (`GET`/`PATCH
/v1/users/{user_id}`, default UTC): questions are read on the wearer's clock ("yesterday
afternoon" asked without `as_of` means the wearer's yesterday, as of the moment it is
asked), and answers give times on it; stored times are UTC.
"""


class ObserveRequests:
    """ASGI middleware counting requests and their latency by route template. Plain ASGI,
    not ``@app.middleware``: that wrapper ends a streamed body cleanly when the app fails
    in the middle of it, so a client would take a cut-off export for a whole one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        finally:
            route = route_of(Request(scope))
            method = scope["method"]
            API_REQUESTS.labels(method, route, str(status)).inc()
            API_LATENCY.labels(method, route).observe(time.perf_counter() - started)


def create_app(
    settings: Settings, deps: Deps | None = None, *, sweep_every_s: float = 30.0
) -> FastAPI:
    """The service. ``sweep_every_s`` paces the retry of queued blob deletions; a test that
    inspects the queue sets it past its own length so the sweep cannot race it."""
    prices_for(settings)  # a bad price table stops the service here, with its file named

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = deps is None
        if owned:  # only PostgreSQL and Redis: the query service never talks to Kafka
            install(app.state, build_deps(settings, role="api"))
        app.state.recalls.start()
        # blobs a forget or purge could not delete yet (the store was down): retried here
        sweeper = DeletionSweeper(app.state.deps.db, app.state.deps.blobs, sweep_every_s)
        sweeper.start()
        log.info(
            "query_api.start provider=%s cache=%s blobs=%r",
            app.state.deps.roles.label,
            type(app.state.deps.cache).__name__,
            app.state.deps.blobs,
        )
        try:
            yield
        finally:
            sweeper.close()
            await app.state.recalls.close()  # what answers recalled is written before the pool goes
            if owned:
                app.state.deps.close()

    app = FastAPI(
        title="WorldMM Live query API",
        version="1",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    if deps is not None:  # usable without running the lifespan (e.g. a bare TestClient)
        install(app.state, deps)
    install_error_handlers(app)

    app.add_middleware(ObserveRequests)  # innermost: it sees the matched route
    for module in (health, users, profile, keys, whoami, query, memory, usage, privacy):
        app.include_router(module.router)
    # who is asking: proxy headers believed only from WORLDMM_API_TRUSTED_PROXIES
    app.add_middleware(TrustedProxies, networks=settings.trusted_proxy_networks())
    # outermost: an oversized body is refused before any route or middleware reads it
    app.add_middleware(BodySizeLimit, max_bytes=settings.api_max_body_bytes)
    install_ui(app)  # the memory browser at /ui
    return app
