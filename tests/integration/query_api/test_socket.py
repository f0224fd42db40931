"""The service over a real uvicorn socket (what `worldmm serve` runs)."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import httpx
import pytest
import uvicorn

from query_api.app import create_app
from tests.integration.query_api.conftest import ADMIN

pytestmark = pytest.mark.integration


@pytest.fixture
def served(api_settings, api_deps):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = create_app(api_settings, deps=api_deps)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:  # uvicorn offers no start callback: poll its flag
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def test_query_over_a_real_socket(served):
    with httpx.Client(base_url=served, timeout=60) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        assert http.get("/readyz").status_code == 200
        user = f"socket-{uuid.uuid4().hex[:10]}"
        made = http.post("/v1/users", json={"user_id": user}, headers=ADMIN)
        assert made.status_code == 201, made.text
        key = {"Authorization": f"Bearer {made.json()['api_key']}"}
        note = http.post(
            f"/v1/users/{user}/memories",
            json={"text": "I left my passport in the top drawer of the desk."}, headers=key,
        )
        assert note.status_code == 201, note.text
        r = http.post(f"/v1/users/{user}/query",
                      json={"question": "Where is my passport?"}, headers=key)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        assert note.json()["segment_id"] in {e["segment_id"] for e in r.json()["evidence"]}
        assert http.post(f"/v1/users/{user}/query", json={"question": "x"}).status_code \
            == 401
        assert http.delete(f"/v1/users/{user}", headers=ADMIN).status_code == 200
