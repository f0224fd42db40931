"""The embedded PostgreSQL comes back after a crash whose postmaster is left a zombie.

In a container whose init does not reap, a killed postmaster stays a zombie: ``kill(pid, 0)``
still finds it, so PostgreSQL refuses to start over its lock files ("Is another postmaster
using socket file"). The test makes itself the subreaper of the server it starts, so the
killed postmaster is its unreaped child, exactly as under such an init.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import tempfile
from pathlib import Path

import pytest

from deploy.stack import postgres
from deploy.stack.process import wait_until

pytestmark = pytest.mark.integration

PR_SET_CHILD_SUBREAPER = 36


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return "gone"


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                found.append(int(entry.name))
    return found


def test_a_crashed_server_left_a_zombie_starts_again() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    root = Path(tempfile.mkdtemp(prefix="worldmm-pg-crash-"))
    root.chmod(0o755)
    postmaster = None
    try:
        first = postgres.start(root)
        postmaster = first["pid"]
        # pg_ctl has exited: the postmaster is now our (the subreaper's) child
        assert postmaster in _children(os.getpid())
        backends = _children(postmaster)
        os.kill(postmaster, signal.SIGKILL)  # a crash: the postmaster and its backends at once
        for pid in backends:
            with contextlib.suppress(ProcessLookupError):  # a short-lived worker gone already
                os.kill(pid, signal.SIGKILL)
        wait_until(lambda: _state(postmaster) == "Z", timeout_s=10, what="a zombie postmaster")

        again = postgres.start(root, first["port"])

        assert again["started"] and again["pid"] != postmaster
        assert _state(postmaster) == "Z"  # still unreaped: the restart did not need it gone
        assert postgres.probe(again["url"]) == (True, "SELECT 1")
    finally:
        postgres.stop(root)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        for pid in _children(os.getpid()):  # the zombies this test adopted
            if _state(pid) == "Z":
                os.waitpid(pid, 0)
