"""Run an ASGI app with uvicorn in a background thread on a loopback port (tests, benchmarks)."""

from __future__ import annotations

import threading
import time

import uvicorn


class ThreadedServer:
    """``with ThreadedServer(app) as server: server.url`` — a real socket, port chosen by the OS
    unless given (a given port lets a test restart a server where clients expect it)."""

    def __init__(
        self, app, *, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 30.0
    ) -> None:
        self._config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        self._server = uvicorn.Server(self._config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._timeout = start_timeout_s
        self.host = host
        self.port = port

    def start(self) -> ThreadedServer:
        self._thread.start()
        deadline = time.monotonic() + self._timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=self._timeout)

    def __enter__(self) -> ThreadedServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
