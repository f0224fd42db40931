"""The memory browser (``/ui``), served by the query API with the same per-user keys."""

from __future__ import annotations

from fastapi import FastAPI, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from query_api.ui.routes import router
from query_api.ui.session import UI_HEADER, LoginRequired


def install_ui(app: FastAPI) -> None:
    app.include_router(router)

    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, exc: LoginRequired) -> Response:
        if request.headers.get(UI_HEADER):  # a fragment request: say so where it lands
            return HTMLResponse(
                '<p class="error">Your session has ended: <a href="/ui/login">log in</a>.</p>',
                status_code=status.HTTP_401_UNAUTHORIZED,
            )
        return RedirectResponse("/ui/login", status_code=status.HTTP_303_SEE_OTHER)


__all__ = ["install_ui", "router"]
