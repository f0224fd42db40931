"""Limits on what one client may ask of the API: requests per minute per key, body size.

The rate is a GCRA kept in Redis, so every API process shares one budget per key. While Redis
is away each process keeps the same limit in its own memory: refusing every request would
turn a cache outage into an API outage, and keys and isolation are checked against
PostgreSQL either way. A body is refused (413) by its length, never buffered whole first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import redis
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("query_api.limits")

WINDOW_S = 60.0
_KEY_PREFIX = "worldmm:ratelimit:"

# KEYS[1]: the bucket; ARGV[1]: ms between requests, ARGV[2]: burst window in ms.
# Returns {allowed (1/0), ms until the next request would be allowed}.
_GCRA_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local allow_at = new_tat - window
if allow_at > now then
  return {0, allow_at - now}
end
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil(window + interval))
return {1, 0}
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after_s: int = 0  # whole seconds, at least 1 when refused


def gcra(tat_ms: float | None, now_ms: float, interval_ms: float, window_ms: float):
    """One GCRA step: (allowed, retry in ms, new theoretical arrival time). Pure; the Redis
    script above is the same arithmetic."""
    tat = max(tat_ms if tat_ms is not None else now_ms, now_ms)
    new_tat = tat + interval_ms
    allow_at = new_tat - window_ms
    if allow_at > now_ms:
        return False, allow_at - now_ms, tat
    return True, 0.0, new_tat


class LocalBuckets:
    """The per-process fallback: the same GCRA in a bounded dict."""

    def __init__(self, max_keys: int = 100_000) -> None:
        self._tat: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()
        self._max = max_keys

    def take(self, bucket: str, interval_ms: float, window_ms: float) -> tuple[bool, float]:
        now = time.monotonic() * 1000
        with self._lock:
            ok, retry, tat = gcra(self._tat.get(bucket), now, interval_ms, window_ms)
            self._tat[bucket] = tat
            self._tat.move_to_end(bucket)
            while len(self._tat) > self._max:
                self._tat.popitem(last=False)
        return ok, retry


class RateLimiter:
    """``per_minute`` requests per key (0 = off), in Redis when it answers."""

    def __init__(self, per_minute: int, client: redis.Redis | None) -> None:
        self.per_minute = per_minute
        self.client = client
        self.local = LocalBuckets()
        self._script = client.register_script(_GCRA_LUA) if client is not None else None
        self._warned = False

    @property
    def enabled(self) -> bool:
        return self.per_minute > 0

    def check(self, identity: str) -> Decision:
        """Take one request from ``identity``'s budget (a key hash, never the key)."""
        if not self.enabled:
            return Decision(True)
        interval = WINDOW_S * 1000 / self.per_minute
        window = WINDOW_S * 1000
        bucket = _KEY_PREFIX + identity
        if self._script is not None:
            try:
                allowed, retry_ms = self._script(keys=[bucket], args=[interval, window])
                self._warned = False
                return _decision(bool(allowed), float(retry_ms))
            except redis.RedisError as exc:
                if not self._warned:  # once per outage
                    log.warning("rate_limit.redis_unavailable fallback=per_process error=%s", exc)
                    self._warned = True
        ok, retry = self.local.take(bucket, interval, window)
        return _decision(ok, retry)


def _decision(allowed: bool, retry_ms: float) -> Decision:
    return Decision(allowed, 0 if allowed else max(1, math.ceil(retry_ms / 1000)))


def key_identity(key: str) -> str:
    """What the limiter stores for a key: a short hash (Redis never sees a usable key)."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class BodySizeLimit:
    """ASGI middleware: 413 for bodies over ``max_bytes``, decided on Content-Length or while
    the body streams in, before the app has read it whole."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0
        started = refused = False

        async def counting_receive() -> Message:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # answer now and tell the app the client left: whatever the app makes
                    # of a cut-off body is dropped by tracking_send
                    refused = True
                    if not started:
                        await self._refuse(send)
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counting_receive, tracking_send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps({"detail": f"request body larger than {self.max_bytes} bytes"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
