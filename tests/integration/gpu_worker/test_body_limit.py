"""The encoder service refuses a request body over its limit with 413 before reading it
whole: on its declared length, or as a chunked body streams in (issue #42)."""

from __future__ import annotations

import base64
import socket

import httpx

from gpu_worker.app import WorkerConfig, create_app
from gpu_worker.threaded import ThreadedServer
from tests.fixtures.images import noise, to_jpeg

LIMIT = 64 * 1024


def _status_of(sock: socket.socket) -> int:
    head = sock.recv(4096).split(b"\r\n", 1)[0]  # b"HTTP/1.1 413 Request Entity Too Large"
    return int(head.split()[1])


def test_a_body_over_the_limit_is_refused_before_it_is_read(tiny_backend):
    app = create_app(tiny_backend, WorkerConfig(max_body_bytes=LIMIT))
    with ThreadedServer(app) as server:
        # 10 GB declared, nothing sent: the answer comes without waiting for the body
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(
                b"POST /encode-video HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 10000000000\r\n\r\n"
            )
            assert _status_of(sock) == 413

        # chunked, no length: refused once the limit is passed, the rest never sent
        with socket.create_connection((server.host, server.port), timeout=10) as sock:
            sock.sendall(
                b"POST /encode-video HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"x" * 16384
            for _ in range(LIMIT // len(chunk) + 1):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            assert _status_of(sock) == 413

        # a clip within the limit still encodes
        frames = [base64.b64encode(to_jpeg(noise(i))).decode() for i in range(2)]
        r = httpx.post(f"{server.url}/encode-video", json={"frames": frames}, timeout=30)
        assert r.status_code == 200, r.text


def test_the_default_limit_fits_the_largest_clip_the_frame_limits_allow():
    config = WorkerConfig()
    assert config.body_limit >= config.max_frames * config.max_frame_bytes * 4 // 3
    assert WorkerConfig(max_body_bytes=4096).body_limit == 4096
