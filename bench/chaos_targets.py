"""The servers the chaos benchmark kills: its own embedded stack (Kafka broker, PostgreSQL,
Redis), the encoder service, the dataflow worker and one query API process.

Each target is SIGKILLed (PostgreSQL: the postmaster and every backend at once, as a machine
crash would) and started again on the same port and data dir. Only processes started here
are signalled, by PID.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from worldmm.settings import Settings
from worldmm.stack import kafka, postgres, redis_server
from worldmm.stack.process import free_port, pid_alive, read_pid, wait_until

REPO = Path(__file__).resolve().parents[1]
TARGETS = ("worker", "kafka", "postgres", "redis", "encoder")
# Settings the child processes get as WORLDMM_* variables.
_CHILD_FIELDS = (
    "kafka_brokers", "database_url", "redis_url", "topic_prefix", "topic_partitions",
    "state_dir", "blob_dir", "llm_concurrency", "allowed_lateness_s", "stream_idle_s",
    "session_end_grace_s", "frames_per_window", "max_past_age_s", "gpu_worker_url",
    "gpu_ocr_frames", "gpu_timeout_s", "gpu_max_retries", "gpu_breaker_reset_s",
    "llm_provider", "embed_backend", "offline_ocr_frames", "api_rate_limit",
)  # fmt: skip


def child_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORLDMM_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    for name in _CHILD_FIELDS:
        value = getattr(settings, name, None)
        if value is not None:
            env[f"WORLDMM_{name.upper()}"] = str(value)
    key = settings.admin_api_key
    if key is not None:
        env["WORLDMM_ADMIN_API_KEY"] = getattr(key, "get_secret_value", lambda: key)()
    return env


def _http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _kill_wait(pids: Sequence[int], marker: str | None) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        wait_until(lambda p=pid: not pid_alive(p, marker), timeout_s=20, what=f"pid {pid} gone")
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def _children(parent: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent:
            out.append(int(entry.name))
    return out


class Child:
    """A Python child process in its own session, restartable with the same command."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.cmd, self.env, self.log_path = name, cmd, env, log
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> None:
        log = self.log_path.open("ab")
        try:
            self.proc = subprocess.Popen(
                self.cmd, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        finally:
            log.close()
        self.starts += 1

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # our child's own process group
            self.proc.wait(timeout=20)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""


class ChaosStack:
    """Everything the chaos run starts, on fixed ports, under ``root``."""

    def __init__(self, root: Path, base: Settings, latency_s: float, run_id: str) -> None:
        self.root = root
        self.base = base
        self.latency_s = latency_s
        self.run_id = run_id
        self.dirs = {n: root / n for n in ("kafka", "redis", "postgres")}
        self.ports: dict[str, int] = {}
        self.settings: Settings | None = None
        self.worker: Child | None = None
        self.encoder: Child | None = None
        self.api: Child | None = None

    # -- start and stop everything ---------------------------------------------------------

    def start(self, prepare: Callable[[Settings], None]) -> Settings:
        k = kafka.start(self.dirs["kafka"])
        p = postgres.start(self.dirs["postgres"])
        r = redis_server.start(self.dirs["redis"])
        self.ports.update(kafka=k["port"], postgres=p["port"], redis=r["port"])
        self.ports.update(encoder=free_port(), api=free_port())
        self.settings = self.base.model_copy(
            update={
                "kafka_brokers": k["brokers"],
                "database_url": p["url"],
                "redis_url": r["url"],
                "gpu_worker_url": f"http://127.0.0.1:{self.ports['encoder']}",
                "state_dir": self.root / "state",
                "blob_dir": self.root / "blobs",
                "topic_prefix": f"chaos.{self.run_id}.",
            }
        )
        prepare(self.settings)  # migrations, topics
        env = child_env(self.settings)
        py = sys.executable
        self.encoder = Child(
            "encoder",
            [py, "-m", "apps.cli", "gpu-worker", "--backend", "offline",
             "--port", str(self.ports["encoder"])],
            env, self.root / "encoder.log",
        )  # fmt: skip
        self.worker = Child(
            "worker",
            [py, "-m", "bench.chaos_worker", "--latency-s", str(self.latency_s),
             "--report", str(self.report_path), "--recovery-dir", str(self.root / "recovery"),
             "--epoch-s", "1"],
            env, self.root / "worker.log",
        )  # fmt: skip
        self.api = Child(
            "api",
            [py, "-m", "apps.cli", "serve", "--port", str(self.ports["api"])],
            env, self.root / "api.log",
        )  # fmt: skip
        for child in (self.encoder, self.api, self.worker):
            child.start()
        wait_until(lambda: self.probe("encoder"), timeout_s=120, what="encoder service")
        wait_until(lambda: _http_ok(f"{self.api_url}/healthz"), timeout_s=180, what="query API")
        return self.settings

    @property
    def report_path(self) -> Path:
        return self.root / "windows.jsonl"

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['api']}"

    def stop(self) -> None:
        for child in (self.worker, self.api, self.encoder):
            if child is not None:
                child.stop()
        redis_server.stop(self.dirs["redis"])
        postgres.stop(self.dirs["postgres"])
        kafka.stop(self.dirs["kafka"])

    # -- faults ----------------------------------------------------------------------------

    def kill(self, target: str) -> None:
        if target == "worker":
            assert self.worker is not None
            self.worker.kill()
        elif target == "encoder":
            assert self.encoder is not None
            self.encoder.kill()
        elif target == "kafka":
            pid = read_pid(self.dirs["kafka"] / "kafka.pid")
            _kill_wait([pid] if pid else [], kafka.MARKER)
        elif target == "redis":
            pid = read_pid(self.dirs["redis"] / "redis.pid")
            _kill_wait([pid] if pid else [], redis_server.MARKER)
        elif target == "postgres":
            pm = postgres.postmaster_pid(self.dirs["postgres"] / "data")
            if pm:  # the postmaster and all its backends at once, as a crash would
                _kill_wait([pm, *_children(pm)], None)
        else:
            raise ValueError(f"unknown target {target!r}")

    def restart(self, target: str) -> None:
        if target == "worker":
            assert self.worker is not None
            self.worker.start()
        elif target == "encoder":
            assert self.encoder is not None
            self.encoder.start()
        elif target == "kafka":
            kafka.start(self.dirs["kafka"], port=self.ports["kafka"])
        elif target == "redis":
            redis_server.start(self.dirs["redis"], port=self.ports["redis"])
        elif target == "postgres":
            postgres.start(self.dirs["postgres"], port=self.ports["postgres"])
        else:
            raise ValueError(f"unknown target {target!r}")

    def probe(self, target: str) -> bool:
        """The target answers its real protocol (the worker: its process runs)."""
        s = self.settings
        assert s is not None
        if target == "worker":
            return self.worker is not None and self.worker.alive()
        if target == "encoder":
            return _http_ok(f"{s.gpu_worker_url}/healthz")
        if target == "kafka":
            return kafka.probe(s.kafka_brokers or "", 1.0)[0]
        if target == "redis":
            return redis_server.probe(s.redis_url or "")[0]
        if target == "postgres":
            return postgres.probe(s.database_url or "")[0]
        raise ValueError(f"unknown target {target!r}")

    def check_children(self) -> None:
        """Raise when a child we did not kill has died (a crash is a finding, not noise)."""
        for child in (self.worker, self.encoder, self.api):
            if child is not None and child.proc is not None and child.proc.poll() is not None:
                raise RuntimeError(
                    f"{child.name} exited with {child.proc.returncode}:\n{child.tail()}"
                )


def wait_recovered(probe: Callable[[], bool], timeout_s: float) -> float | None:
    """Seconds until ``probe()`` holds, or None after ``timeout_s``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if probe():
            return time.monotonic() - t0
        time.sleep(0.1)
    return None
