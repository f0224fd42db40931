"""The embedded stack's state file: a server recorded there whose process is gone (the
machine restarted, the server was killed) is not running, so resolvers say so and callers
start it again instead of handing out a dead address."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.stack import StackError, manager
from worldmm.settings import load_settings


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _settings(state: Path):
    return load_settings(state_dir=state, database_url=None, redis_url=None, kafka_brokers=None)


def test_a_recorded_server_whose_process_is_gone_is_not_running(tmp_path: Path) -> None:
    url = "postgresql://postgres@127.0.0.1:1/worldmm"
    record = {"postgres": {"pid": _dead_pid(), "port": 1, "url": url, "started": True}}
    (tmp_path / manager.STATE_FILE).write_text(json.dumps(record))
    with pytest.raises(StackError, match="worldmm up"):
        manager.database_url(_settings(tmp_path))


def test_a_recorded_pid_of_another_program_is_not_our_server(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "60"])  # alive, but no PostgreSQL server (a reused PID)
    try:
        url = "postgresql://postgres@127.0.0.1:1/worldmm"
        record = {"postgres": {"pid": other.pid, "port": 1, "url": url, "started": True}}
        (tmp_path / manager.STATE_FILE).write_text(json.dumps(record))
        with pytest.raises(StackError, match="not running"):
            manager.database_url(_settings(tmp_path))
    finally:
        other.kill()
        other.wait()
