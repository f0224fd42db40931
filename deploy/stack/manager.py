"""`worldmm up / status / down`: the embedded stack, or the configured production services.

A service whose URL is configured (``WORLDMM_KAFKA_BROKERS``, ``WORLDMM_DATABASE_URL``,
``WORLDMM_REDIS_URL``) is external: we never start or stop it, only probe it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path

from pydantic import BaseModel

from deploy.stack import citus, kafka, postgres, redis_server
from deploy.stack.process import StackError, pid_alive
from worldmm.redact import redact
from worldmm.settings import Settings

STATE_FILE = "stack.json"


class StackUrls(BaseModel):
    kafka_brokers: str
    database_url: str
    redis_url: str | None  # None: no graph cache (graphs are rebuilt from the database)
    started: list[str] = []  # from `up`: the servers it started (not found running)


def _dirs(settings: Settings) -> dict[str, Path]:
    state = settings.resolved_state_dir
    return {
        "kafka": state / "kafka",
        "redis": state / "redis",
        "postgres": settings.postgres_data_parent / "postgres",
        "citus": settings.postgres_data_parent / "citus",
    }


def _state_path(settings: Settings) -> Path:
    return settings.resolved_state_dir / STATE_FILE


def _read_state(settings: Settings) -> dict:
    try:
        return json.loads(_state_path(settings).read_text())
    except (OSError, ValueError):
        return {}


def _redis_disabled(settings: Settings) -> bool:
    return (settings.redis_url or "").lower() == "none"


def citus_workers(settings: Settings) -> int:
    """Workers of the embedded Citus cluster (0: single-node PostgreSQL): the shape `up` was
    last asked for, which `down` keeps so the next `up` starts the same database."""
    return int((_read_state(settings).get("database") or {}).get("citus_workers", 0))


def up(settings: Settings, *, citus_workers: int | None = None) -> StackUrls:
    """Start every embedded server that is not configured externally; harmless when running.
    ``citus_workers`` > 0 makes the database a Citus coordinator with that many workers
    (None: as the running stack has it, else single-node)."""
    dirs = _dirs(settings)
    settings.resolved_state_dir.mkdir(parents=True, exist_ok=True)
    fresh: dict[str, dict] = {}
    if not settings.kafka_brokers:
        fresh["kafka"] = kafka.start(dirs["kafka"])
    if not settings.database_url:
        fresh["postgres"] = _start_database(settings, dirs, citus_workers)
        fresh["database"] = {"citus_workers": int(fresh["postgres"].get("workers", 0))}
    if not settings.redis_url:
        fresh["redis"] = redis_server.start(dirs["redis"])
    _state_path(settings).write_text(json.dumps({**_read_state(settings), **fresh}, indent=2))
    started = [name for name, record in fresh.items() if record.get("started")]
    return resolve_urls(settings).model_copy(update={"started": started})


def _start_database(settings: Settings, dirs: dict[str, Path], workers: int | None) -> dict:
    last = citus_workers(settings)
    if workers is None:
        workers = last
    elif workers != last and _alive(settings, "postgres"):
        shape = f"a Citus cluster with {last} workers" if last else "single-node PostgreSQL"
        raise StackError(f"the embedded stack runs {shape}: run `worldmm down` first")
    if workers > 0:
        cluster = citus.start(dirs["citus"], workers)
        return {**cluster, "citus": {"workers": workers, "nodes": cluster.pop("nodes")}}
    record = postgres.start(dirs["postgres"])
    return {**record, "data_dir": str(dirs["postgres"] / "data")}


def _stop_database(dirs: dict[str, Path]) -> bool:
    stopped = postgres.stop(dirs["postgres"])
    return citus.stop(dirs["citus"]) or stopped


def down(settings: Settings, only: Collection[str] | None = None) -> dict[str, bool]:
    """Stop the servers `up` started (by their PID files), or only those named in ``only``
    (e.g. one `up` call's ``started``); external ones are untouched."""
    dirs = _dirs(settings)
    names = {"kafka", "postgres", "redis"} if only is None else set(only)
    before = _read_state(settings)
    servers = {  # stopped in this order
        "redis": (settings.redis_url, redis_server.stop),
        "postgres": (settings.database_url, lambda _: _stop_database(dirs)),
        "kafka": (settings.kafka_brokers, kafka.stop),
    }
    stopped = {
        name: name in names and _ours(before.get(name), configured) and stop(dirs[name])
        for name, (configured, stop) in servers.items()
    }
    # a record goes with its server; one left running (external) keeps it, so a later
    # `down` without the address configured still finds and stops it
    kept = {n for n in names if not stopped[n] and _alive(settings, n)}
    state = {k: v for k, v in before.items() if k not in names or k in kept}
    if state:
        _state_path(settings).write_text(json.dumps(state, indent=2))
    else:
        _state_path(settings).unlink(missing_ok=True)
    return {k: bool(v) for k, v in stopped.items()}


def _ours(record: dict | None, configured: str | None) -> bool:
    """Whether `down` stops this server: nothing is configured for it, or what is configured
    is the address this state dir's own server serves (its URLs exported from stack.json)."""
    if not configured:
        return True
    record = record or {}
    return configured in (record.get("url"), record.get("brokers"))


_ENV_NAMES = {"kafka": "KAFKA_BROKERS", "postgres": "DATABASE_URL", "redis": "REDIS_URL"}


_MARKERS = {"kafka": kafka.MARKER, "postgres": postgres.MARKER, "redis": redis_server.MARKER}


def _alive(settings: Settings, name: str) -> bool:
    record = _read_state(settings).get(name) or {}
    pid = record.get("pid")
    return isinstance(pid, int) and pid_alive(pid, _MARKERS[name])


def _embedded(settings: Settings, name: str, field: str) -> str:
    """The running embedded server's ``field``; a record whose process is gone (the machine
    restarted, the server was killed) counts as not running, so callers start it again."""
    record = _read_state(settings).get(name) or {}
    if field in record and _alive(settings, name):
        return str(record[field])
    raise StackError(
        f"no {name} configured and the embedded stack is not running "
        f"(state dir {settings.resolved_state_dir}): run `worldmm up` or set "
        f"WORLDMM_{_ENV_NAMES[name]}"
    )


def kafka_brokers(settings: Settings) -> str:
    """The configured brokers, else the embedded broker's address."""
    return settings.kafka_brokers or _embedded(settings, "kafka", "brokers")


def database_url(settings: Settings) -> str:
    """The configured database URL, else the embedded server's."""
    return settings.database_url or _embedded(settings, "postgres", "url")


def redis_url(settings: Settings) -> str | None:
    """The configured Redis URL, else the embedded server's; None when disabled ('none')."""
    if _redis_disabled(settings):
        return None
    return settings.redis_url or _embedded(settings, "redis", "url")


_FIELDS = {"kafka": "kafka_brokers", "postgres": "database_url", "redis": "redis_url"}


def with_stack_urls(settings: Settings, *names: str) -> Settings:
    """``settings`` with the named services' unset URLs filled from the running embedded
    stack (``kafka``, ``postgres``, ``redis``; all three by default). The services read
    URLs from settings only; the programs that start them (the CLI, the demo, tests and
    benchmarks) call this first. StackError names what is neither configured nor running;
    a disabled Redis ('none') stays disabled."""
    resolve = {"kafka": kafka_brokers, "postgres": database_url, "redis": redis_url}
    updates = {
        _FIELDS[name]: resolve[name](settings)
        for name in names or _FIELDS
        if not getattr(settings, _FIELDS[name])
        and not (name == "redis" and _redis_disabled(settings))
    }
    return settings.model_copy(update=updates) if updates else settings


def resolve_urls(settings: Settings) -> StackUrls:
    """Where every service is; a command needing only one should call that one's resolver."""
    return StackUrls(
        kafka_brokers=kafka_brokers(settings),
        database_url=database_url(settings),
        redis_url=redis_url(settings),
    )


def _probed(
    probe: Callable[[str], tuple[bool, str]],
    url: str | None,
    configured: str | None,
    reason: str,
    key: str = "url",
) -> dict:
    """One service's status: its ``url`` (under ``key``; a password shown as ``***``), a
    real request when it is known (else ``reason``), and whether it is embedded (no URL
    configured). Everything here is for printing, so nothing in it holds a secret."""
    ok, detail = probe(url) if url else (False, reason)
    shown = redact(url) if url else url
    return {key: shown, "ok": ok, "detail": redact(detail), "embedded": not configured}


def status(settings: Settings) -> dict[str, dict]:
    """Probe each service with a real protocol request (metadata, SELECT 1, PING)."""
    out: dict[str, dict] = {}
    try:
        urls = resolve_urls(settings)
    except StackError:
        reason = "not running: run `worldmm up`"
        state = _read_state(settings)
        urls = StackUrls(
            kafka_brokers=settings.kafka_brokers or state.get("kafka", {}).get("brokers", ""),
            database_url=settings.database_url or state.get("postgres", {}).get("url", ""),
            redis_url=settings.redis_url or state.get("redis", {}).get("url", ""),
        )
    else:
        reason = ""
    brokers = urls.kafka_brokers
    out["kafka"] = _probed(kafka.probe, brokers, settings.kafka_brokers, reason, "brokers")
    out["postgres"] = _probed(citus.probe, urls.database_url, settings.database_url, reason)
    if _redis_disabled(settings):
        out["redis"] = {
            "url": None,
            "ok": True,
            "detail": "disabled (graphs rebuilt from DB)",
            "embedded": False,
        }
    else:
        out["redis"] = _probed(redis_server.probe, urls.redis_url, settings.redis_url, reason)
    return out
