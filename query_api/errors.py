"""Every error leaves the service as JSON ``{"detail": "<message>"}`` with a fitting status."""

from __future__ import annotations

import logging

import psycopg
from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from query_api.api_metrics import API_MODEL_ERRORS
from query_api.cursors import CursorError
from query_api.ops.query import RoundsOutOfRange
from worldmm.providers.errors import ModelCallError
from worldmm.store.errors import ConflictError, NotFoundError

log = logging.getLogger("query_api")
DB_RETRY_AFTER_S = 5  # a restarting PostgreSQL is usually back within seconds


def route_of(request: Request) -> str:
    """The route template ('/v1/users/{user_id}/query'), never the raw path: raw paths
    would put user ids into metric labels."""
    route = request.scope.get("route")
    return getattr(route, "path", None) or "unmatched"


def validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body",)) or "request"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(
            {"detail": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(
            {"detail": validation_message(exc)},
            status_code=status.HTTP_422_UNPROCESSABLE_CONTENT,
        )

    @app.exception_handler(RoundsOutOfRange)
    @app.exception_handler(CursorError)
    async def bad_value(request: Request, exc: ValueError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(NotFoundError)
    async def not_found(request: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=404)

    @app.exception_handler(ModelCallError)
    async def model_failed(request: Request, exc: ModelCallError) -> JSONResponse:
        route = route_of(request)
        API_MODEL_ERRORS.labels(route).inc()
        log.warning("api.model_error route=%s role=%s error=%s", route, exc.role, exc)
        role = f" ({exc.role})" if exc.role else ""
        return JSONResponse(
            {"detail": f"the model call failed{role}: {exc}; try again later"},
            status_code=status.HTTP_502_BAD_GATEWAY,
        )

    @app.exception_handler(ConflictError)
    async def busy(request: Request, exc: ConflictError) -> JSONResponse:
        # other writers of the same user kept winning: nothing was written, try again soon
        log.warning("api.conflict route=%s error=%s", route_of(request), exc)
        return JSONResponse(
            {"detail": f"{exc}; nothing was written, retry later"},
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(psycopg.OperationalError)
    async def database_down(request: Request, exc: psycopg.OperationalError) -> JSONResponse:
        # the server is restarting or unreachable (PoolTimeout included): nothing is wrong
        # with the request, so tell the client when to come back instead of a 500
        log.warning("api.database_unavailable route=%s error=%s", route_of(request), exc)
        return JSONResponse(
            {"detail": "the database is unavailable; retry later"},
            status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(DB_RETRY_AFTER_S)},
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("api.internal_error route=%s", route_of(request))
        return JSONResponse({"detail": "internal server error"}, status_code=500)
