"""The embedded stack: up → status → down leaves no process behind; restarts are harmless."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from deploy.stack import kafka, postgres, redis_server
from deploy.stack.process import pid_alive, read_pid

pytestmark = pytest.mark.integration


def _cli(state: Path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORLDMM_")}
    env.update({"WORLDMM_STATE_DIR": str(state), **(env_extra or {})})
    return subprocess.run(
        [sys.executable, "-m", "apps.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _server_pids(state: Path) -> dict[str, int | None]:
    return {
        "kafka": read_pid(state / "kafka" / "kafka.pid"),
        "redis": read_pid(state / "redis" / "redis.pid"),
        "postgres": postgres.postmaster_pid(state / "postgres" / "data"),
    }


def test_up_status_down_leaves_no_process():
    state = Path(tempfile.mkdtemp(prefix="worldmm-test-updown-"))
    state.chmod(0o755)
    try:
        first = _cli(state, "up")
        assert first.returncode == 0, first.stderr
        pids = _server_pids(state)
        assert all(pids.values()), pids
        markers = {"kafka": kafka.MARKER, "redis": redis_server.MARKER, "postgres": postgres.MARKER}
        assert all(pid_alive(pids[k], markers[k]) for k in pids)

        again = _cli(state, "up")  # a second `up` reuses the running servers
        assert again.returncode == 0, again.stderr
        assert _server_pids(state) == pids

        st = _cli(state, "status", "--json")
        assert st.returncode == 0, st.stdout + st.stderr
        report = json.loads(st.stdout)
        assert report["kafka"]["ok"] and report["kafka"]["brokers"].startswith("127.0.0.1:")
        assert report["postgres"]["ok"] and report["postgres"]["url"].startswith("postgresql://")
        assert report["redis"]["ok"] and report["redis"]["url"].startswith("redis://")

        down = _cli(state, "down")
        assert down.returncode == 0, down.stderr
        assert not any(pid_alive(pids[k], markers[k]) for k in pids)
        after = _cli(state, "status")
        assert after.returncode == 1
    finally:
        _cli(state, "down")


def test_down_stops_its_servers_when_their_urls_are_exported_and_keeps_others():
    """`down` with the stack's own URLs in the environment (exported from stack.json, as a
    shell that ran a benchmark has them) stops those servers; an external address
    configured instead leaves the embedded server running and its record kept, so a later
    plain `down` still stops it."""
    state = Path(tempfile.mkdtemp(prefix="worldmm-test-downenv-"))
    state.chmod(0o755)
    try:
        assert _cli(state, "up").returncode == 0
        pids = _server_pids(state)
        markers = {"kafka": kafka.MARKER, "redis": redis_server.MARKER, "postgres": postgres.MARKER}
        elsewhere = {"WORLDMM_REDIS_URL": "redis://127.0.0.1:1/0"}  # not this stack's
        partial = _cli(state, "down", env_extra=elsewhere)
        assert partial.returncode == 0, partial.stderr
        assert "redis     was not running" in partial.stdout
        assert pid_alive(pids["redis"], markers["redis"])  # external address: left alone
        assert not pid_alive(pids["kafka"], markers["kafka"])
        assert "redis" in json.loads((state / "stack.json").read_text())

        assert _cli(state, "up").returncode == 0
        pids = _server_pids(state)
        urls = json.loads((state / "stack.json").read_text())
        exported = {
            "WORLDMM_DATABASE_URL": urls["postgres"]["url"],
            "WORLDMM_REDIS_URL": urls["redis"]["url"],
            "WORLDMM_KAFKA_BROKERS": urls["kafka"]["brokers"],
        }
        down = _cli(state, "down", env_extra=exported)
        assert down.returncode == 0, down.stderr
        assert down.stdout.count("stopped") == 3, down.stdout
        assert not any(pid_alive(pids[k], markers[k]) for k in pids)
    finally:
        _cli(state, "down")


def test_stale_pid_file_is_replaced(tmp_path: Path):
    state = Path(tempfile.mkdtemp(prefix="worldmm-test-stale-"))
    state.chmod(0o755)
    root = state / "redis"
    root.mkdir(parents=True)
    # A PID that is certainly not a redis-server of ours: this test process itself.
    (root / "redis.pid").write_text(f"{os.getpid()}\n")
    (root / "port").write_text("1")
    try:
        info = redis_server.start(root)
        assert info["started"] and info["pid"] != os.getpid()
        assert redis_server.probe(info["url"])[0]
    finally:
        redis_server.stop(root)
    assert not pid_alive(info["pid"], redis_server.MARKER)


def test_status_fails_when_an_external_service_is_unreachable(stack):
    dead = _cli(
        stack.state_dir,
        "status",
        "--json",
        env_extra={
            "WORLDMM_KAFKA_BROKERS": stack.kafka_brokers,
            "WORLDMM_DATABASE_URL": stack.database_url,
            "WORLDMM_REDIS_URL": "redis://127.0.0.1:1/0",
        },
    )
    assert dead.returncode == 1
    report = json.loads(dead.stdout)
    assert report["kafka"]["ok"] and report["postgres"]["ok"] and not report["redis"]["ok"]


def test_invalid_setting_names_the_variable(tmp_path: Path):
    res = _cli(tmp_path, "status", env_extra={"WORLDMM_TOPIC_PARTITIONS": "zero"})
    assert res.returncode == 2
    assert "WORLDMM_TOPIC_PARTITIONS" in res.stderr


def test_embedded_postgres_gets_shared_buffers_sized_to_the_machine(stack):
    import psycopg

    assert postgres.shared_buffers_mb(1 << 30) == postgres.SHARED_BUFFERS_MIN_MB
    assert postgres.shared_buffers_mb(8 << 30) == 1024
    assert postgres.shared_buffers_mb(256 << 30) == postgres.SHARED_BUFFERS_MAX_MB
    with psycopg.connect(stack.database_url) as conn:
        (pages,) = conn.execute(
            "SELECT setting::bigint FROM pg_settings WHERE name = 'shared_buffers'"
        ).fetchone()
    assert pages * 8 // 1024 == postgres.shared_buffers_mb()
