"""No command prints a password (#24 part 3): a password planted in the database and Redis
URLs (the embedded PostgreSQL and Redis ask for none, so they connect all the same) appears in no
command's output, in no error, and in none of the logs of a served API and a dataflow run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from deploy.stack.process import free_port
from tests.fixtures.processes import REPO, api_healthy, env_for, wait_for, worldmm

pytestmark = pytest.mark.integration

PW = "Pl4nted-pw-9c1e"


def _with_password(url: str, user: str = "") -> str:
    scheme, rest = url.split("://", 1)
    rest = rest.split("@", 1)[-1]  # any user in the URL is replaced by ``user``
    return f"{scheme}://{user}:{PW}@{rest}"


def _run(settings, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "apps.cli", *args],
        cwd=REPO,
        env={**env_for(settings), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_no_command_output_or_log_holds_a_planted_password(settings, tmp_path: Path) -> None:
    planted = settings.model_copy(
        update={
            "database_url": _with_password(settings.database_url, "postgres"),
            "redis_url": _with_password(settings.redis_url),
        }
    )
    shown: dict[str, str] = {}

    def check(name: str, done: subprocess.CompletedProcess, rc: int = 0) -> None:
        shown[name] = done.stdout + done.stderr
        assert done.returncode == rc, shown[name]

    check("up", _run(planted, "up"))
    assert "postgresql://postgres:***@127.0.0.1" in shown["up"]
    check("status", _run(planted, "status"))
    check("status --json", _run(planted, "status", "--json"))
    assert "redis://:***@127.0.0.1" in shown["status --json"]
    check("db migrate", _run(planted, "db", "migrate"))
    bad_url = {"WORLDMM_DATABASE_URL": f"postgresql://postgres:{PW}@127.0.0.1:1/none"}
    check("db migrate (down)", _run(planted, "db", "migrate", **bad_url), rc=1)
    invalid = {"WORLDMM_TOPIC_PARTITIONS": f"postgresql://u:{PW}@h/x"}
    check("invalid setting", _run(planted, "status", **invalid), rc=2)
    assert "WORLDMM_TOPIC_PARTITIONS" in shown["invalid setting"]

    # the logs of a run: the API serving a request, then the dataflow to the topics' end
    port = free_port()
    api = worldmm(["serve", "--port", str(port)], planted, tmp_path / "api.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: api_healthy(url), 180, "the API", poll_s=0.5)
        assert httpx.get(f"{url}/v1/users/nobody/segments").status_code == 401
    finally:
        api.terminate()
        api.wait(timeout=30)
    flow = worldmm(["dataflow", "--to-end", "--no-recovery"], planted, tmp_path / "flow.log")
    assert flow.wait(timeout=300) == 0, (tmp_path / "flow.log").read_text()[-3000:]
    for log in ("api.log", "flow.log"):
        shown[log] = (tmp_path / log).read_text()
        assert shown[log].strip(), f"{log} is empty: nothing was checked"

    leaked = [name for name, text in shown.items() if PW in text]
    assert leaked == [], {name: shown[name][-2000:] for name in leaked}
