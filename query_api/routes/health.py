"""Liveness, readiness and Prometheus metrics (no authentication: no user data here)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from query_api.depends import AppDeps
from worldmm.deps import Deps as Bundle
from worldmm.store.migrate import check_schema
from worldmm.wire.schemas import Health, Readiness

router = APIRouter(tags=["health"])
READY_TIMEOUT_S = 3.0


@router.get("/healthz", summary="The process is up")
async def healthz() -> Health:
    return Health(status="ok")


def readiness_checks(deps: Bundle) -> dict[str, str]:
    """'ok' or the reason, per dependency. Redis is checked only when configured."""
    checks: dict[str, str] = {}
    try:
        # a short wait: a probe must answer quickly even when the pool cannot connect
        with deps.db.pool.connection(timeout=READY_TIMEOUT_S) as conn:
            conn.execute("SELECT 1")
            checks["database"] = "ok"
            try:
                check_schema(conn, deps.settings)
                checks["schema"] = "ok"
            except Exception as exc:  # noqa: BLE001 - reported as the failing check
                checks["schema"] = str(exc)
    except Exception as exc:  # noqa: BLE001
        checks["database"] = f"{type(exc).__name__}: {exc}"
        checks["schema"] = "not checked (database unreachable)"
    if deps.redis is not None:
        try:
            deps.redis.ping()
            checks["redis"] = "ok"
        except Exception as exc:  # noqa: BLE001
            checks["redis"] = f"{type(exc).__name__}: {exc}"
    return checks


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Ready to serve: database reachable and migrated, Redis answering (if configured)",
    responses={503: {"model": Readiness, "description": "A dependency failed (named in checks)"}},
)
async def readyz(deps: AppDeps) -> Response:
    checks = await asyncio.to_thread(readiness_checks, deps)
    ok = all(v == "ok" for v in checks.values())
    body = Readiness(status="ok" if ok else "unavailable", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
