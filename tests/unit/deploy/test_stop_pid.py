"""Stopping one of our servers waits until its process has really exited, not until its
command line stops naming it: an exiting process shows an empty command line before it is
gone, and the demo's check then found the broker still running."""

from __future__ import annotations

import subprocess
import sys

from deploy.stack.process import pid_alive, stop_pid

MARKER = "worldmm-stop-pid-test"

# On SIGTERM it becomes another program (no marker in its command line) that runs on for a
# moment: the same view a waiter gets of a server that is still shutting down.
_CHILD = (
    "import os, signal, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: os.execvp('sleep', ['sleep', '0.5']))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def test_stop_waits_for_the_process_not_its_command_line() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, MARKER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert pid_alive(proc.pid, MARKER)
        assert stop_pid(proc.pid, marker=MARKER, timeout_s=10)
        assert proc.poll() is not None, "stop_pid returned while the process still ran"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_process_that_is_not_ours_is_left_alone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert not stop_pid(proc.pid, marker=MARKER, timeout_s=1)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
