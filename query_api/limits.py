"""Limits on what one client may ask of the API: requests per minute per key, and failed
authentications per client address and per user id tried (the body size limit is
:mod:`worldmm.body_limit`, shared with the GPU worker).

Both rates are a GCRA kept in Redis, so every API process shares one budget. While Redis is
away each process keeps the same limit in its own memory: refusing every request would turn
a cache outage into an API outage, and keys and isolation are checked against PostgreSQL
either way.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import redis

log = logging.getLogger("query_api.limits")

WINDOW_S = 60.0
_KEY_PREFIX = "worldmm:ratelimit:"
_FAIL_PREFIX = "worldmm:authfail:"

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

# The failed-authentication buckets, all in one call. KEYS: the buckets; ARGV[1]: '1' spends
# one from each bucket that has room, '0' only looks; ARGV[2i], ARGV[2i+1]: ms between
# failures and burst window of KEYS[i]. Returns ms until every bucket has room (0: now).
_FAIL_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wait = 0
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i])
  local window = tonumber(ARGV[2 * i + 1])
  local tat = tonumber(redis.call('GET', key) or now)
  if tat < now then tat = now end
  local allow_at = tat + interval - window
  if allow_at > now then
    if allow_at - now > wait then wait = allow_at - now end
  elseif ARGV[1] == '1' then
    redis.call('SET', key, tat + interval, 'PX', math.ceil(window + interval))
  end
end
return wait
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

    def look(self, bucket: str, interval_ms: float, window_ms: float) -> tuple[bool, float]:
        """Whether ``take`` would be allowed now, spending nothing."""
        now = time.monotonic() * 1000
        with self._lock:
            ok, retry, _ = gcra(self._tat.get(bucket), now, interval_ms, window_ms)
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


def hash_identity(key_hash: str) -> str:
    """:func:`key_identity` of a key known only by its stored hash ('sha256:<hex>', the same
    digest): a browser session spends its key's budget without the key."""
    return key_hash.partition(":")[2][:32]


class AuthFailures:
    """Failed authentications per client address and per user id tried (0 = that limit
    off). :meth:`check` runs before any key is looked at, so while a budget is spent every
    attempt gets the same 429 whether its key is valid or not (no oracle, and no guessing
    on); :meth:`failed` spends one from each budget. Bucket names are hashes: Redis holds no
    address or user id."""

    def __init__(self, per_address: int, per_user: int, client: redis.Redis | None) -> None:
        self.per_address = per_address
        self.per_user = per_user
        self.local = LocalBuckets()
        self._script = client.register_script(_FAIL_LUA) if client is not None else None
        self._warned = False

    def check(self, address: str, user_id: str | None = None) -> Decision:
        return self._run(address, user_id, spend=False)

    def failed(self, address: str, user_id: str | None = None) -> None:
        self._run(address, user_id, spend=True)

    def _buckets(self, address: str, user_id: str | None) -> list[tuple[str, float]]:
        out = []
        if self.per_address > 0:
            out.append((_FAIL_PREFIX + key_identity("address:" + address), self.per_address))
        if self.per_user > 0 and user_id is not None:
            out.append((_FAIL_PREFIX + key_identity("user:" + user_id), self.per_user))
        return [(b, WINDOW_S * 1000 / n) for b, n in out]

    def _run(self, address: str, user_id: str | None, *, spend: bool) -> Decision:
        buckets = self._buckets(address, user_id)
        if not buckets:
            return Decision(True)
        window = WINDOW_S * 1000
        if self._script is not None:
            args: list[float | str] = ["1" if spend else "0"]
            for _, interval in buckets:
                args += [interval, window]
            try:
                wait_ms = float(self._script(keys=[b for b, _ in buckets], args=args))
                self._warned = False
                return _decision(wait_ms <= 0, wait_ms)
            except redis.RedisError as exc:
                if not self._warned:  # once per outage
                    log.warning(
                        "auth_failures.redis_unavailable fallback=per_process error=%s", exc
                    )
                    self._warned = True
        step = self.local.take if spend else self.local.look
        waits = [step(b, interval, window)[1] for b, interval in buckets]
        return _decision(max(waits) <= 0, max(waits))
