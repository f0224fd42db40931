"""Proxy headers are believed only from the proxies a deployment trusts: the client's address
(for the failed-login limit) and the scheme (for the browser's Secure cookie); the cookie goes
without Secure only on plain http to a loopback address."""

from __future__ import annotations

from ipaddress import ip_network

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from query_api.proxies import TrustedProxies, client_address, served_on_loopback


def _seen(request: Request) -> JSONResponse:
    return JSONResponse(
        {
            "client": client_address(request),
            "scheme": request.url.scheme,
            "loopback": served_on_loopback(request),
        }
    )


def _client(trusted: str, peer: str) -> TestClient:
    app = TrustedProxies(
        Starlette(routes=[Route("/", _seen)]), [ip_network(n) for n in trusted.split(",") if n]
    )
    return TestClient(app, client=(peer, 5000), base_url="http://127.0.0.1:8080")


FORWARDED = {"X-Forwarded-For": "203.0.113.9, 10.0.0.7", "X-Forwarded-Proto": "https"}


def test_headers_of_an_untrusted_peer_are_ignored():
    got = _client("", "127.0.0.1").get("/", headers=FORWARDED).json()
    assert got == {"client": "127.0.0.1", "scheme": "http", "loopback": True}
    got = _client("10.0.0.0/8", "198.51.100.4").get("/", headers=FORWARDED).json()
    assert got["client"] == "198.51.100.4" and got["scheme"] == "http"


def test_a_trusted_proxy_gives_the_nearest_untrusted_hop_and_its_scheme():
    got = _client("10.0.0.0/8", "10.0.0.5").get("/", headers=FORWARDED).json()
    # 10.0.0.7 is a trusted hop too: the client is the one before it
    assert got == {"client": "203.0.113.9", "scheme": "https", "loopback": False}
    spoofed = {"X-Forwarded-For": "1.2.3.4, 203.0.113.9", "X-Forwarded-Proto": "http, https"}
    got = _client("10.0.0.0/8", "10.0.0.5").get("/", headers=spoofed).json()
    assert got["client"] == "203.0.113.9"  # what the client itself wrote is not believed
    assert got["scheme"] == "https"  # the nearest proxy's word


@pytest.mark.parametrize(
    ("server", "scheme", "loopback"),
    [
        (("127.0.0.1", 8080), "http", True),
        (("::1", 8080), "http", True),
        (("localhost", 8080), "http", True),
        (("127.0.0.1", 8080), "https", False),
        (("10.1.2.3", 8080), "http", False),
        (("0.0.0.0", 8080), "http", False),
        (None, "http", False),
    ],
)
def test_served_on_loopback_needs_plain_http_to_a_loopback_address(server, scheme, loopback):
    scope = {"type": "http", "scheme": scheme, "server": server, "path": "/", "headers": []}
    assert served_on_loopback(Request(scope)) is loopback
