"""Start, find and stop the embedded servers' processes, by PID and PID file only."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class StackError(RuntimeError):
    """An embedded server could not be started, reached or stopped."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def pid_alive(pid: int, expect_in_cmdline: str | None = None) -> bool:
    """True when ``pid`` runs and (if given) its command line contains the marker, so a
    recycled PID from a stale file is never mistaken for our server."""
    # /proc, not a signal: PostgreSQL runs as another OS user, and a zombie has exited
    alive = not _exited(pid)
    if not alive or expect_in_cmdline is None:
        return alive
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return expect_in_cmdline in cmdline


def _exited(pid: int) -> bool:
    """Gone, or a zombie (exited, waiting to be reaped); an exiting process's command line
    reads as empty before then, so that cannot tell."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def start_detached(
    cmd: Sequence[str], *, log_file: Path, pid_file: Path, cwd: Path | None = None
) -> int:
    """Start ``cmd`` in its own session (it outlives the CLI) and record its PID."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            list(cmd),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            start_new_session=True,
        )
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def wait_until(
    check: Callable[[], bool], *, timeout_s: float, what: str, interval_s: float = 0.1
) -> None:
    """Poll a readiness condition until it holds (a real condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval_s)
    raise StackError(f"timed out after {timeout_s:.0f}s waiting for {what}")


def stop_pid(pid: int, *, marker: str, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> bool:
    """Signal our process and wait for it to exit; escalate to SIGKILL after the timeout.
    Returns False when nothing of ours was running under that PID."""
    if not pid_alive(pid, marker):
        return False
    # Once it is known to be ours, wait on the PID alone: the marker leaves the command line
    # while the process is still exiting (and a server may exec something else to stop).
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    try:
        wait_until(lambda: _exited(pid), timeout_s=timeout_s, what=f"pid {pid}")
    except StackError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: _exited(pid), timeout_s=5, what=f"pid {pid} (killed)")
    _reap(pid)
    return True


def start_server(
    root: Path,
    name: str,
    marker: str,
    command: Callable[[int], Sequence[str]],
    ready: Callable[[int], bool],
    *,
    port: int | None,
    timeout_s: float,
) -> tuple[int, int, bool]:
    """(pid, port, started) of server ``name`` kept under ``root`` (its ``<name>.pid``,
    ``<name>.log`` and ``port`` files): the recorded one when it still runs, else
    ``command(port)`` started detached on ``port`` (or a free one) and waited for until
    ``ready(port)``."""
    root.mkdir(parents=True, exist_ok=True)
    pid_file, record = root / f"{name}.pid", root / "port"
    pid = read_pid(pid_file)
    if pid and pid_alive(pid, marker) and record.exists():
        return pid, int(record.read_text()), False
    port = port or free_port()
    pid = start_detached(command(port), log_file=root / f"{name}.log", pid_file=pid_file)
    record.write_text(str(port))
    wait_until(lambda: ready(port), timeout_s=timeout_s, what=f"{name} on port {port}")
    return pid, port, True


def stop_server(root: Path, name: str, marker: str, timeout_s: float = 20.0) -> bool:
    """Stop the server :func:`start_server` keeps under ``root``; False if none ran."""
    pid_file = root / f"{name}.pid"
    pid = read_pid(pid_file)
    stopped = bool(pid) and stop_pid(pid, marker=marker, timeout_s=timeout_s)
    pid_file.unlink(missing_ok=True)
    return stopped


def _reap(pid: int) -> None:
    # When the server is our own child (tests), collect it so it does not linger as a zombie.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
