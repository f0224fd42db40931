"""The memory browser (``/ui``), served by the query API with the same per-user keys."""

from __future__ import annotations

from fastapi import FastAPI, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from query_api.ui.routes import router
from query_api.ui.session import COOKIE, UI_HEADER, LoginRequired, clear_session


def install_ui(app: FastAPI) -> None:
    app.include_router(router)

    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, exc: LoginRequired) -> Response:
        response: Response
        if request.headers.get(UI_HEADER):  # a fragment request: say so where it lands
            response = HTMLResponse(
                '<p class="error">Your session has ended: <a href="/ui/login">log in</a>.</p>',
                status_code=status.HTTP_401_UNAUTHORIZED,
            )
        else:
            response = RedirectResponse("/ui/login", status_code=status.HTTP_303_SEE_OTHER)
        if request.cookies.get(COOKIE):
            clear_session(response)  # an ended session's id is of no use any more
        return response


__all__ = ["install_ui", "router"]
