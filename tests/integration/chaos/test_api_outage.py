"""The API while its dependencies are away (#17): PostgreSQL unreachable → 503 with
Retry-After, then served again once it is back (the pool reconnects); Redis unreachable →
graphs come from PostgreSQL and questions are still answered.

PostgreSQL is cut off by a TCP relay in front of the real server: taking the relay down
closes every connection and refuses new ones, which is what clients see of a crashed server.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from fastapi.testclient import TestClient

from query_api.app import create_app
from tests.fixtures.api import auth
from worldmm.graph.cache import GraphCache, redis_client
from worldmm.store.db import Database

pytestmark = pytest.mark.integration


class Relay:
    """A loopback TCP relay to ``target`` that can be cut (every connection closed, the port
    refusing) and restored on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._server: socket.socket | None = None

    def up(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(16)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            # shutdown wakes the thread blocked in accept(); close alone would not (Linux)
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        with self._lock:
            for c in self._conns:
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                c.close()
            self._conns.clear()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return  # closed by down()
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def relayed(api_deps) -> Iterator[tuple[TestClient, Relay]]:
    url = urlsplit(api_deps.db.database_url)
    relay = Relay((url.hostname or "127.0.0.1", url.port or 5432))
    relay.up()
    netloc = f"{url.username}@127.0.0.1:{relay.port}" if url.username else f"127.0.0.1:{relay.port}"
    db = Database(urlunsplit(url._replace(netloc=netloc)), max_size=2, timeout_s=2.0)
    deps = dataclasses.replace(api_deps, db=db)
    try:
        with TestClient(create_app(deps.settings, deps=deps)) as c:
            yield c, relay
    finally:
        relay.down()
        db.close()


def test_database_down_is_503_with_retry_after_then_served_again(relayed, make_user):
    client, relay = relayed
    u = make_user()  # made through the session's own client, not the relay
    path = f"/v1/users/{u.user_id}/segments"
    assert client.get(path, headers=u.headers).status_code == 200
    relay.down()
    for _ in range(3):  # a broken pooled connection, then pool timeouts: all 503
        r = client.get(path, headers=u.headers)
        assert r.status_code == 503, r.text
        assert int(r.headers["retry-after"]) >= 1 and "database" in r.json()["detail"]
    relay.up()
    statuses = [client.get(path, headers=u.headers).status_code for _ in range(3)]
    assert statuses[-1] == 200, statuses  # the pool reconnected; no restart needed
    assert set(statuses) <= {200, 503}


def test_redis_down_questions_are_answered_from_the_database(api_deps, make_user):
    dead = redis_client("redis://127.0.0.1:1/0", timeout_s=0.2)  # as the service builds it
    deps = dataclasses.replace(api_deps, cache=GraphCache(dead), redis=dead)
    u = make_user()
    c = TestClient(create_app(deps.settings, deps=deps))
    r = c.post(
        f"/v1/users/{u.user_id}/memories",
        json={"text": "Alice gave me the red mug in the kitchen."},
        headers=auth(u.key),
    )
    assert r.status_code == 201, r.text
    r = c.post(
        f"/v1/users/{u.user_id}/query",
        json={"question": "Who gave me the red mug?"},
        headers=auth(u.key),
    )
    assert r.status_code == 200, r.text
    assert r.json()["rounds"], r.json()
    ready = c.get("/readyz")
    assert ready.status_code == 503 and ready.json()["checks"]["redis"] != "ok"
