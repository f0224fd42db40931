"""The demo's child processes: the ingest dataflow and the query API.

Both run in their own Python interpreter (the core library never imports Bytewax or
FastAPI), configured through ``WORLDMM_*`` variables built from the demo's settings, with
their output in a log file. They are stopped by the PID the demo recorded, nothing broader.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from deploy.stack.process import read_pid, stop_pid
from worldmm.settings import ENV_PREFIX, Settings

# The children are the same commands a user runs: the dataflow reads the topics to their
# current end, finishes every window that end closes and exits 0; the API serves until stopped.
_DATAFLOW_ARGS = ["dataflow", "--to-end", "--no-recovery"]
_API_ARGS = ["serve", "--host", "{host}", "--port", "{port}"]

API_PID_FILE = "demo-api.pid"
# what a kept API's command line holds (`python -m apps.cli serve ...`): a recycled PID
# from a stale file is never signalled
_API_MARKER = "apps.cli serve"


class ChildFailed(RuntimeError):
    """A child process exited early or did not become ready; the message names its log."""


def settings_env(settings: Settings) -> dict[str, str]:
    """The process environment plus one ``WORLDMM_*`` variable per setting, so a child
    loads exactly these settings (paths made absolute: a child may resolve them alone)."""
    env = dict(os.environ)
    for name, value in settings.model_dump().items():
        var = f"{ENV_PREFIX}{name.upper()}"
        if value is None:
            env.pop(var, None)
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        elif isinstance(value, Path):
            value = value.absolute()
        env[var] = str(value)
    # Models come from wheels; a hub lookup must fail fast, never hang on the network.
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    return env


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    log_file: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``; reaps the process."""
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout_s)


def _spawn(name: str, args: list[str], settings: Settings, *, detached: bool) -> Child:
    log_dir = settings.resolved_state_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_file = log_dir / f"demo-{name}.log"
    with open(log_file, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "apps.cli", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=settings_env(settings),
            # A kept API must outlive the CLI (and its terminal's Ctrl-C).
            start_new_session=detached,
        )
    return Child(name, proc, log_file)


def start_dataflow(settings: Settings) -> Child:
    return _spawn("dataflow", _DATAFLOW_ARGS, settings, detached=False)


def pick_port(host: str, preferred: int) -> int:
    """``preferred`` when it is free on ``host``, else any free port."""
    for port in (preferred, 0):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise ChildFailed(f"no free port on {host}")


def start_api(settings: Settings, host: str, port: int, *, detached: bool) -> Child:
    args = [a.format(host=host, port=port) for a in _API_ARGS]
    child = _spawn("api", args, settings, detached=detached)
    (settings.resolved_state_dir / API_PID_FILE).write_text(f"{child.pid}\n")
    return child


def wait_ready(child: Child, probe: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    """Poll ``probe`` until it holds; fail early when the child exits, or at the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not child.running():
            raise ChildFailed(
                f"{what} exited with code {child.proc.returncode} (log {child.log_file}):\n"
                f"{child.log_tail()}"
            )
        if probe():
            return
        time.sleep(0.25)
    raise ChildFailed(f"{what} not ready after {timeout_s:.0f}s (log {child.log_file})")


def stop_kept_api(settings: Settings, timeout_s: float = 15.0) -> int | None:
    """Stop the API an earlier ``demo --keep`` left running (by its PID file); its PID."""
    pid_file = settings.resolved_state_dir / API_PID_FILE
    pid = read_pid(pid_file)
    pid_file.unlink(missing_ok=True)
    if pid is None or not stop_pid(pid, marker=_API_MARKER, timeout_s=timeout_s):
        return None
    return pid
