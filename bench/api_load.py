"""API load benchmark: N concurrent clients against the real REST API for a bounded time.

Starts ``worldmm serve`` as separate processes (2 by default) on loopback ports, over the
configured stack or the embedded one, then lets ``--clients`` asyncio clients send requests
for ``--duration`` seconds; client ``c`` sends route ``c mod 4`` back to back (so each route
has its own share of the clients and a slow one holds up no other), alternating between the
processes:

- ``ask``: ``POST /v1/users/{u}/query`` (the retrieval agent; the offline stand-in models of
  ``WORLDMM_LLM_PROVIDER=offline`` answer, MiniLM embeds the question);
- ``segments``: ``GET /v1/users/{u}/segments`` over one hour of the memory;
- ``semantic``: ``GET /v1/users/{u}/semantic``;
- ``visual``: ``POST /v1/users/{u}/search`` with ``memory_type=visual``.

The memory is a synthetic one loaded with the query benchmark's bulk loader (``--days``,
purged afterwards), or an existing user of the same shape (``--user U --reuse``, e.g. one
kept by ``worldmm bench query --keep``). Requests use the admin key; the rate limit is off in
the servers (``WORLDMM_API_RATE_LIMIT=0``), since it is what is measured against. A warm-up
(``--warmup`` seconds, not counted) lets each process load its graphs first.

Reports per route: requests, throughput, p50/p95/p99 latency, and errors (any non-2xx or
transport failure, by status). The client runs on the same machine as the servers.

    python -m bench.api_load --out api.json --clients 8 --duration 30
    worldmm bench api-load --out api.json
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.report import Echo, stamped_echo, write_report
from worldmm.settings import Settings

ROUTES = ("ask", "segments", "semantic", "visual")
QUESTIONS = (
    "Where did I leave the red cup?",
    "Who did I meet in the kitchen this morning?",
    "What was I reading on the sofa?",
    "When did I last drive to work?",
    "What did Kate hand me?",
    "Which shop did I visit after lunch?",
)


@dataclass
class Tally:
    """Latencies (ms) and error counts of one route."""

    ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1

    def summary(self, seconds: float) -> dict[str, Any]:
        a = np.asarray(self.ms, dtype=np.float64)
        out: dict[str, Any] = {
            "requests": int(a.size) + sum(self.errors.values()),
            "ok": int(a.size),
            "errors": sum(self.errors.values()),
            "errors_by_kind": dict(sorted(self.errors.items())),
            "throughput_per_s": round(a.size / seconds, 2) if seconds > 0 else 0.0,
        }
        if a.size:
            for p in (50, 95, 99):
                out[f"p{p}_ms"] = round(float(np.percentile(a, p)), 1)
            out["max_ms"] = round(float(a.max()), 1)
        return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


async def _send(client: httpx.AsyncClient, method: str, path: str, payload: Any) -> int:
    if method == "GET":
        resp = await client.get(path, params=payload)
    else:
        resp = await client.post(path, json=payload)
    return resp.status_code


async def drive(
    urls: Sequence[str],
    key: str,
    user: str,
    clients: int,
    duration_s: float,
    warmup_s: float,
    hours: int,
    start: Any,
    timeout_s: float,
) -> tuple[dict[str, Tally], float]:
    """Run the clients; returns the tallies of the measured window and its length."""
    tallies = {r: Tally() for r in ROUTES}
    headers = {"Authorization": f"Bearer {key}"}
    t_start = time.perf_counter()
    t_measure = t_start + warmup_s
    t_end = t_measure + duration_s

    async def one(c: int) -> None:
        pools = [httpx.AsyncClient(base_url=u, headers=headers, timeout=timeout_s) for u in urls]
        try:
            i = c
            route = ROUTES[c % len(ROUTES)]  # one route per client: a slow one starves no other
            while time.perf_counter() < t_end:
                method, path, payload = request_for(route, user, i, hours, start)
                client = pools[i % len(pools)]
                t = time.perf_counter()
                counted = t >= t_measure
                try:
                    status = await _send(client, method, path, payload)
                except httpx.HTTPError as exc:
                    if counted:
                        tallies[route].error(type(exc).__name__)
                else:
                    if counted:
                        if 200 <= status < 300:
                            tallies[route].ms.append(1000 * (time.perf_counter() - t))
                        else:
                            tallies[route].error(str(status))
                i += 1
        finally:
            for p in pools:
                await p.aclose()

    await asyncio.gather(*(one(c) for c in range(clients)))
    return tallies, max(0.0, min(time.perf_counter(), t_end) - t_measure)


def start_servers(settings: Settings, n: int, admin_key: str, log_dir: Path) -> list[Any]:
    """``n`` ``worldmm serve`` processes, each on its own loopback port."""
    procs = []
    for i in range(n):
        port = free_port()
        env = dict(os.environ)
        env.update(
            {
                "WORLDMM_DATABASE_URL": settings.database_url or "",
                "WORLDMM_REDIS_URL": settings.redis_url or "",
                "WORLDMM_ADMIN_API_KEY": admin_key,
                "WORLDMM_API_RATE_LIMIT": "0",
                "WORLDMM_LOG_LEVEL": "WARNING",
            }
        )
        log = open(log_dir / f"serve-{i}.log", "wb")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "apps.cli",
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append((proc, f"http://127.0.0.1:{port}", log))
    return procs


def wait_ready(procs: Sequence[Any], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    for proc, url, _ in procs:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"worldmm serve at {url} exited with {proc.returncode}")
            try:
                if httpx.get(f"{url}/readyz", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"worldmm serve at {url} not ready in {timeout_s} s")
            time.sleep(0.5)


def stop_servers(procs: Sequence[Any]) -> None:
    for proc, _, _log in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc, _, log in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def run(args: argparse.Namespace, settings: Settings, echo: Echo) -> dict[str, Any]:
    from bench.bulk_load import load_memory
    from bench.query_synth import START, SynthConfig, SyntheticMemory, hours_of
    from worldmm.store.db import Database
    from worldmm.store.purge import purge_user
    from worldmm.store.users import user_exists

    assert settings.database_url
    cfg = SynthConfig(hours=hours_of(args.days), seed=args.seed)
    user = args.user or f"bench-api-{uuid.uuid4().hex[:8]}"
    db = Database(settings.database_url, max_size=2)
    loaded = False
    result: dict[str, Any] = {
        "benchmark": "api-load",
        "user_id": user,
        "config": {
            "clients": args.clients,
            "processes": args.processes,
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "days": args.days,
            "routes": list(ROUTES),
            "route_per_client": True,  # client c sends ROUTES[c % 4] only
            "llm_provider": settings.llm_provider,
            "rate_limit": "off (WORLDMM_API_RATE_LIMIT=0)",
        },
        "cpu_count": os.cpu_count(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }
    procs: list[Any] = []
    try:
        with db.connection() as conn:
            exists = user_exists(conn, user)
        if args.reuse and not exists:
            raise ValueError(f"--reuse: user {user!r} does not exist")
        if not args.reuse:
            if exists:
                raise ValueError(f"user {user!r} already exists; pick another --user")
            echo(f"loading {cfg.hours} h of synthetic memory for {user}")
            loaded = True
            with db.connection() as conn:
                load_memory(conn, SyntheticMemory(cfg), user)
        admin_key = secrets.token_urlsafe(24)
        log_dir = args.out.parent / f"{args.out.stem}-logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        echo(f"starting {args.processes} worldmm serve processes (logs in {log_dir})")
        procs = start_servers(settings, args.processes, admin_key, log_dir)
        wait_ready(procs)
        urls = [url for _, url, _ in procs]
        echo(f"{args.clients} clients for {args.warmup} s warm-up + {args.duration} s")
        tallies, seconds = asyncio.run(
            drive(
                urls,
                admin_key,
                user,
                args.clients,
                args.duration,
                args.warmup,
                cfg.hours,
                START,
                args.timeout,
            )
        )
        result["measured_s"] = round(seconds, 2)
        result["routes"] = {r: t.summary(seconds) for r, t in tallies.items()}
        total = sum(t.summary(seconds)["requests"] for t in tallies.values())
        result["total"] = {
            "requests": total,
            "errors": sum(t.summary(seconds)["errors"] for t in tallies.values()),
            "throughput_per_s": round(sum(len(t.ms) for t in tallies.values()) / seconds, 2)
            if seconds
            else 0.0,
        }
        for route, s in result["routes"].items():
            echo(
                f"  {route}: {s['ok']} ok, {s['errors']} errors, {s['throughput_per_s']}/s,"
                f" p50 {s.get('p50_ms')} p95 {s.get('p95_ms')} p99 {s.get('p99_ms')} ms"
            )
        result["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        stop_servers(procs)
        if loaded and not args.keep:
            with db.transaction() as conn:
                purge_user(conn, user)
        db.close()
    return result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.api_load", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    p.add_argument("--clients", type=int, default=8, help="concurrent clients")
    p.add_argument("--duration", type=float, default=30.0, help="measured seconds")
    p.add_argument("--warmup", type=float, default=10.0, help="seconds before measuring")
    p.add_argument("--processes", type=int, default=2, help="worldmm serve processes")
    p.add_argument("--days", type=float, default=1.0, help="days of synthetic memory")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=30.0, help="per-request timeout (s)")
    p.add_argument("--user", default=None, help="user id (default: a fresh one)")
    p.add_argument("--reuse", action="store_true", help="use the existing --user as it is")
    p.add_argument("--keep", action="store_true", help="keep a user this run loaded")
    args = p.parse_args(argv)
    if args.clients < 1 or args.processes < 1 or args.duration <= 0:
        p.error("--clients and --processes must be >= 1 and --duration > 0")
    if args.reuse and not args.user:
        p.error("--reuse needs --user")
    return args


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from bench.query import resolve_settings
    from worldmm import stack
    from worldmm.settings import load_settings

    args = parse_args(argv)
    t0 = time.perf_counter()
    echo = stamped_echo(t0)
    base = load_settings()
    settings, started = resolve_settings(base, echo)
    try:
        result = run(args, settings, echo)
    finally:
        if started:
            stack.down(base)
    write_report(result, "bench.api_load", argv, t0, args.out)
    return result


if __name__ == "__main__":
    main()
