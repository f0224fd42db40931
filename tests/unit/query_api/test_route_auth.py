"""Authorisation by construction: every route under /v1/users/{user_id} carries its check as a
dependency of the route itself (set by its router), never as a handler argument that a new
handler could forget."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.routing import iter_route_contexts

from query_api.app import create_app
from query_api.auth import USER_PREFIX, USER_ROUTE_CHECKS, UserIdPath, user_router
from worldmm.settings import load_settings


def unchecked_user_routes(app: FastAPI) -> list[str]:
    """Per-user routes whose own dependencies hold none of the user checks."""
    out = []
    for route in user_routes(app):
        if not any(d.dependency in USER_ROUTE_CHECKS for d in route.dependencies):
            out.append(f"{sorted(route.methods)} {route.path}")
    return out


def user_routes(app: FastAPI) -> list:
    """Every route of the app (included routers flattened) under /v1/users/{user_id}."""
    return [r for r in iter_route_contexts(app.routes) if (r.path or "").startswith(USER_PREFIX)]


def test_every_per_user_route_is_checked_by_its_router() -> None:
    app = create_app(load_settings())
    assert len(user_routes(app)) >= 12  # the walk sees the real routes (memory, query, keys)
    assert unchecked_user_routes(app) == []


def test_the_walk_fails_on_a_per_user_route_without_the_check() -> None:
    app = create_app(load_settings())
    rogue = APIRouter(prefix=USER_PREFIX)

    @rogue.get("/diary")
    def diary(user_id: UserIdPath) -> dict:  # checks nothing: must be caught
        return {"user": user_id}

    app.include_router(rogue)
    assert unchecked_user_routes(app) == ["['GET'] /v1/users/{user_id}/diary"]
    checked = user_router()

    @checked.get("/diary2")
    def diary2(user_id: UserIdPath) -> dict:
        return {"user": user_id}

    app.include_router(checked)
    assert unchecked_user_routes(app) == ["['GET'] /v1/users/{user_id}/diary"]
