"""A failing step names itself, starts nothing more and exits non-zero (no servers needed:
the configured services do not answer)."""

from __future__ import annotations

import io

from rich.console import Console

from apps.demo.run import DemoOptions, run_demo
from deploy.stack.process import free_port
from worldmm.settings import load_settings


def test_unreachable_database_fails_step_one(tmp_path) -> None:
    port = free_port()  # nothing listens there
    settings = load_settings(
        state_dir=tmp_path / "state",
        kafka_brokers=f"127.0.0.1:{port}",
        database_url=f"postgresql://postgres@127.0.0.1:{port}/worldmm?connect_timeout=2",
        redis_url="none",
    )
    out = io.StringIO()
    result = run_demo(settings, DemoOptions(minutes=1), Console(file=out, width=200))
    text = out.getvalue()
    assert result.exit_code == 1
    assert result.failed_step == "[1/6] Start the embedded stack, migrate, create topics"
    assert "FAILED at [1/6]" in text and "[2/6]" not in text
    assert "[6/6] Stop what the demo started" in text
    assert result.started_pids == {}  # every service was external: nothing was started
    assert result.answers == []
