"""The API on a real socket (shared helper with the browser tests) and MCP clients of the
SDK's own: one over stdio (the server as a subprocess), one over streamable HTTP."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.integration.served_api import Served, serve_api


@pytest.fixture(scope="module")
def served(stack, tmp_path_factory) -> Iterator[Served]:
    with serve_api(stack, tmp_path_factory.mktemp("mcp-api")) as api:
        yield api


def mcp_command(api_url: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "apps.cli", "mcp", "--api", api_url, *extra]


def key_env(key: str) -> dict[str, str]:
    return {"WORLDMM_API_KEY": key, "PYTHONPATH": os.getcwd()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_mcp_server(api_url: str, key: str) -> Iterator[str]:
    """`worldmm mcp --http PORT` as a child process; yields its /mcp URL once it listens."""
    port = _free_port()
    proc = subprocess.Popen(
        mcp_command(api_url, "--http", str(port)),
        env={**os.environ, **key_env(key)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # ready when the port accepts connections
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "worldmm mcp --http did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()
