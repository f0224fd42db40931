"""Who is asking, and over what: the client's address and scheme, with proxy headers believed
only from the proxies a deployment names (``WORLDMM_API_TRUSTED_PROXIES``).

``worldmm serve`` runs uvicorn with its own proxy handling off (it believes any loopback peer
by default), so this middleware is the one place that reads ``X-Forwarded-For`` and
``X-Forwarded-Proto``. The failed-login limit counts by the address found here, and the
browser's cookie is ``Secure`` unless the request came over plain http to a loopback address.
"""

from __future__ import annotations

from collections.abc import Sequence
from ipaddress import IPv4Network, IPv6Network, ip_address

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

Networks = Sequence[IPv4Network | IPv6Network]


def _is_in(host: str, networks: Networks) -> bool:
    try:
        addr = ip_address(host)
    except ValueError:
        return False
    return any(addr in net for net in networks)


def _header(scope: Scope, name: bytes) -> str | None:
    values = [v.decode("latin-1") for k, v in scope.get("headers", []) if k == name]
    return ",".join(values) if values else None


class TrustedProxies:
    """ASGI middleware: when the peer is a trusted proxy, the client is the nearest address
    of ``X-Forwarded-For`` that is not one, and the scheme the nearest ``X-Forwarded-Proto``;
    from anyone else both headers are ignored."""

    def __init__(self, app: ASGIApp, networks: Networks) -> None:
        self.app = app
        self.networks = tuple(networks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = scope.get("client")
        if scope["type"] == "http" and peer and _is_in(peer[0], self.networks):
            scope = dict(scope)
            forwarded = _header(scope, b"x-forwarded-for")
            if forwarded:
                hops = [h.strip() for h in forwarded.split(",") if h.strip()]
                # walk back from the nearest hop: the first one not a trusted proxy
                client = next((h for h in reversed(hops) if not _is_in(h, self.networks)), None)
                scope["client"] = (client or hops[0], 0)
            proto = _header(scope, b"x-forwarded-proto")
            if proto:
                nearest = proto.split(",")[-1].strip().lower()
                if nearest in ("http", "https"):
                    scope["scheme"] = nearest
        await self.app(scope, receive, send)


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def served_on_loopback(request: Request) -> bool:
    """Plain http to a loopback address of this machine (the development setup): the one case
    where the browser's cookie goes without ``Secure``, which the browser would not send back
    over http. Anything else is https, or should be."""
    server = request.scope.get("server")
    return request.url.scheme == "http" and bool(server) and _loopback(str(server[0]))
