"""Liveness, readiness and Prometheus metrics.

``/healthz`` and ``/readyz`` need no key and say nothing of users or internals (readiness
gives reason codes; the errors go to the log). ``/metrics`` needs the metrics key or the
admin key, unless ``WORLDMM_API_METRICS_PUBLIC`` serves it to anyone, and then without the
series labelled with a user id.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Iterator
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric

from query_api.auth import check_failures
from query_api.depends import AppDeps, Failures
from query_api.proxies import client_address
from worldmm.deps import Deps as Bundle
from worldmm.settings import Settings
from worldmm.store.migrate import check_schema
from worldmm.wire.schemas import ErrorOut, Health, Readiness

log = logging.getLogger("query_api.health")
router = APIRouter(tags=["health"])
READY_TIMEOUT_S = 3.0


@router.get("/healthz", summary="The process is up")
async def healthz() -> Health:
    return Health(status="ok")


def readiness_checks(deps: Bundle) -> dict[str, str]:
    """'ok' or a stable reason code per dependency, never an exception's text (it may name
    hosts, users or the schema); the error itself goes to the log. Redis is checked only
    when configured."""
    checks: dict[str, str] = {}
    try:
        # a short wait: a probe must answer quickly even when the pool cannot connect
        with deps.db.pool.connection(timeout=READY_TIMEOUT_S) as conn:
            conn.execute("SELECT 1")
            checks["database"] = "ok"
            try:
                check_schema(conn, deps.settings)
                checks["schema"] = "ok"
            except Exception:  # noqa: BLE001 - reported as the failing check
                log.warning("readyz.schema_failed", exc_info=True)
                checks["schema"] = "not_migrated"
    except Exception:  # noqa: BLE001
        log.warning("readyz.database_unavailable", exc_info=True)
        checks["database"] = "unavailable"
        checks["schema"] = "not_checked"
    if deps.redis is not None:
        try:
            deps.redis.ping()
            checks["redis"] = "ok"
        except Exception:  # noqa: BLE001
            log.warning("readyz.redis_unavailable", exc_info=True)
            checks["redis"] = "unavailable"
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


_metrics_bearer = HTTPBearer(auto_error=False, description="The metrics key or the admin key.")


@router.get(
    "/metrics",
    summary="Prometheus metrics (the metrics key or the admin key, unless served publicly)",
    response_class=Response,
    responses={401: {"model": ErrorOut, "description": "No valid metrics or admin key"}},
)
async def metrics(
    request: Request,
    deps: AppDeps,
    failures: Failures,
    creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_metrics_bearer)],
) -> Response:
    settings = deps.settings
    if creds is not None and creds.credentials:
        address = client_address(request)
        check_failures(failures, address)
        if not _is_metrics_key(settings, creds.credentials):
            failures.failed(address)
            raise _refused("invalid metrics key")
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
    if not settings.api_metrics_public:
        raise _refused("/metrics needs the metrics key (Authorization: Bearer <key>)")
    return Response(generate_latest(WithoutUserSeries(REGISTRY)), media_type=CONTENT_TYPE_LATEST)


def _refused(message: str) -> HTTPException:
    return HTTPException(
        status.HTTP_401_UNAUTHORIZED, message, headers={"WWW-Authenticate": "Bearer"}
    )


def _is_metrics_key(settings: Settings, key: str) -> bool:
    accepted = [
        s.get_secret_value() for s in (settings.api_metrics_key, settings.admin_api_key) if s
    ]
    # every candidate is compared (no early exit on the first match)
    return any([hmac.compare_digest(key.encode(), a.encode()) for a in accepted if a])


class WithoutUserSeries:
    """A registry's metrics less every sample labelled with a user id: what an anonymous
    scraper may see."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self.registry.collect():
            metric.samples = [s for s in metric.samples if "user_id" not in s.labels]
            yield metric
