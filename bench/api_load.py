"""API load benchmark: N concurrent clients against ``worldmm serve`` processes for a bounded
time; client ``c`` sends route ``c mod 4`` (ask, segments, semantic, visual) back to back,
alternating between the processes, over a synthetic memory loaded with the query benchmark's
loader (or a kept ``--user U --reuse``). Figures: docs/benchmarks/query.md.

    worldmm bench api-load --out api.json --clients 8 --duration 30   # = python -m bench.api_load
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from pydantic import Field

from bench import harness
from bench.child import Child, child_env, http_ok
from bench.harness import Echo, words
from bench.query import MemoryOptions
from deploy.stack.process import free_port, wait_until
from worldmm.settings import Settings

ROUTES = ("ask", "segments", "semantic", "visual")
QUESTIONS = words(
    "Where did I leave the red cup?, Who did I meet in the kitchen this morning?,"
    " What was I reading on the sofa?, When did I last drive to work?, What did Kate hand me?,"
    " Which shop did I visit after lunch?"
)


class ApiLoadOptions(MemoryOptions):
    clients: int = Field(8, ge=1, description="Concurrent clients.")
    duration: float = Field(30.0, gt=0, description="Measured seconds.")
    warmup: float = Field(10.0, description="Seconds before measuring.")
    processes: int = Field(2, ge=1, description="worldmm serve processes.")
    days: float = Field(1.0, description="Days of synthetic memory (whole hours).")
    timeout: float = Field(30.0, description="Per-request timeout (s).")


@dataclass
class Tally:
    """Latencies (ms) and error counts of one route."""

    ms: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def summary(self, seconds: float) -> dict[str, Any]:
        return {
            "requests": len(self.ms) + sum(self.errors.values()),
            "ok": len(self.ms),
            "errors": sum(self.errors.values()),
            "errors_by_kind": dict(sorted(self.errors.items())),
            "throughput_per_s": round(len(self.ms) / seconds, 2) if seconds > 0 else 0.0,
            **harness.summary(self.ms, qs=(50, 95, 99), digits=1, suffix="_ms"),
        }


def request_for(route: str, user: str, i: int, hours: int, start: Any) -> tuple[str, str, Any]:
    """(method, path, JSON body or query params) of the ``i``-th request of a route."""
    base = f"/v1/users/{user}"
    question = QUESTIONS[i % len(QUESTIONS)]
    if route == "ask":
        return "POST", f"{base}/query", {"question": question}
    if route == "segments":
        hour = start + timedelta(hours=(i * 7919) % max(1, hours))
        end = hour + timedelta(hours=1)
        params = {"start": hour.isoformat(), "end": end.isoformat(), "limit": 50}
        return "GET", f"{base}/segments", params
    if route == "semantic":
        return "GET", f"{base}/semantic", {}
    if route == "visual":
        return "POST", f"{base}/search", {"memory_type": "visual", "query": question}
    raise ValueError(f"unknown route {route!r}")


async def drive(
    urls: Sequence[str], key: str, user: str, opts: ApiLoadOptions, hours: int, start: datetime
) -> tuple[dict[str, Tally], float]:
    """Run the clients; returns the tallies of the measured window and its length."""
    tallies = {r: Tally() for r in ROUTES}
    headers = {"Authorization": f"Bearer {key}"}
    t_measure = time.perf_counter() + opts.warmup
    t_end = t_measure + opts.duration

    async def one(c: int) -> None:
        pools = [httpx.AsyncClient(base_url=u, headers=headers, timeout=opts.timeout) for u in urls]
        route = ROUTES[c % len(ROUTES)]  # one route per client: a slow one starves no other
        i = c
        try:
            while time.perf_counter() < t_end:
                method, path, payload = request_for(route, user, i, hours, start)
                sent = {"params" if method == "GET" else "json": payload}
                t = time.perf_counter()
                try:
                    status = (await pools[i % len(pools)].request(method, path, **sent)).status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                if t >= t_measure and status in range(200, 300):
                    tallies[route].ms.append(1000 * (time.perf_counter() - t))
                elif t >= t_measure:
                    tallies[route].errors[str(status)] += 1
                i += 1
        finally:
            for p in pools:
                await p.aclose()

    await asyncio.gather(*(one(c) for c in range(opts.clients)))
    return tallies, max(0.0, min(time.perf_counter(), t_end) - t_measure)


def start_servers(settings: Settings, n: int, admin_key: str, log_dir: Path) -> list[Child]:
    """``n`` ``worldmm serve`` processes, each on its own loopback port, ready."""
    env = child_env(
        settings,
        ("database_url", "redis_url"),
        WORLDMM_ADMIN_API_KEY=admin_key,
        WORLDMM_API_RATE_LIMIT="0",
        WORLDMM_LOG_LEVEL="WARNING",
    )
    servers = []
    for i in range(n):
        port = str(free_port())
        cmd = [sys.executable, "-m", "apps.cli", "serve", "--host", "127.0.0.1", "--port", port]
        url, log = f"http://127.0.0.1:{port}", log_dir / f"serve-{i}.log"
        servers.append(Child(url, cmd, log, env).start())
    for s in servers:
        ready = lambda s=s: s.check() or http_ok(f"{s.name}/readyz")  # noqa: E731
        wait_until(ready, timeout_s=180, what=f"worldmm serve at {s.name}")
    return servers


def run(opts: ApiLoadOptions, settings: Settings, echo: Echo) -> dict[str, Any]:
    from bench.bulk_load import check_users, load_memories
    from bench.query_synth import START, SynthConfig, SyntheticMemory, hours_of
    from worldmm.store.db import Database
    from worldmm.store.purge import purge_user

    assert settings.database_url and opts.out
    run = harness.Run()
    cfg = SynthConfig(hours=hours_of(opts.days), seed=opts.seed)
    user = opts.user or f"bench-api-{uuid.uuid4().hex[:8]}"
    result: dict[str, Any] = {
        "benchmark": "api-load",
        "user_id": user,
        "config": {
            **opts.model_dump(mode="json", include={"clients", "processes", "days"}),
            "duration_s": opts.duration,
            "warmup_s": opts.warmup,
            "routes": list(ROUTES),
            "route_per_client": True,  # client c sends ROUTES[c % 4] only
            "llm_provider": settings.llm_provider,
            "rate_limit": "off (WORLDMM_API_RATE_LIMIT=0)",
        },
    }
    db = Database(settings.database_url, max_size=2)
    loaded = False
    servers: list[Child] = []
    try:
        with db.connection() as conn:
            check_users(conn, user, reuse=opts.reuse)
            if not opts.reuse:
                echo(f"loading {cfg.hours} h of synthetic memory for {user}")
                loaded = True
                load_memories(conn, [(SyntheticMemory(cfg), user)])
        admin_key = secrets.token_urlsafe(24)
        log_dir = opts.out.parent / f"{opts.out.stem}-logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        echo(f"starting {opts.processes} worldmm serve processes (logs in {log_dir})")
        servers = start_servers(settings, opts.processes, admin_key, log_dir)
        echo(f"{opts.clients} clients for {opts.warmup} s warm-up + {opts.duration} s")
        urls = [s.name for s in servers]
        tallies, seconds = asyncio.run(drive(urls, admin_key, user, opts, cfg.hours, START))
        routes = {r: t.summary(seconds) for r, t in tallies.items()}
        ok = sum(len(t.ms) for t in tallies.values())
        result["measured_s"] = round(seconds, 2)
        result["routes"] = routes
        result["total"] = {
            "requests": sum(s["requests"] for s in routes.values()),
            "errors": sum(s["errors"] for s in routes.values()),
            "throughput_per_s": round(ok / seconds, 2) if seconds else 0.0,
        }
        for route, s in routes.items():
            echo(
                f"  {route}: {s['ok']} ok, {s['errors']} errors, {s['throughput_per_s']}/s,"
                f" p50 {s.get('p50_ms')} p95 {s.get('p95_ms')} p99 {s.get('p99_ms')} ms"
            )
    finally:
        for server in servers:
            server.stop(timeout_s=20)
        if loaded and not opts.keep:
            with db.transaction() as conn:
                purge_user(conn, user)
        db.close()
    return run.stamp(result)


@harness.main(ApiLoadOptions)
def main(opts: ApiLoadOptions) -> dict[str, Any]:
    """Throughput, p50/p95/p99 and errors per route (ask, segments, semantic, visual) with N
    concurrent clients against `worldmm serve` processes on loopback."""
    return harness.report_on_stack(opts.out, lambda settings, echo: run(opts, settings, echo))


if __name__ == "__main__":
    main()
