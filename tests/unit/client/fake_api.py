"""A fake query API on a real loopback socket: answers a scripted list of (status, headers,
body) replies in order and records each request (method, path, query, headers, body)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Script:
    replies: list[tuple[int, dict[str, str], Any]]
    seen: list[Seen] = field(default_factory=list)


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            script.seen.append(
                Seen(
                    self.command,
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    json.loads(raw) if raw else None,
                )
            )
            status, headers, body = script.replies.pop(0)
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            ctype = "image/jpeg" if isinstance(body, bytes) else "application/json"
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, *args: object) -> None:  # keep test output clean
            return

    return Handler


@contextmanager
def fake_api(replies: list[tuple[int, dict[str, str], Any]]) -> Iterator[tuple[str, Script]]:
    script = Script(list(replies))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
