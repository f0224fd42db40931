"""The servers the chaos benchmark kills: its own embedded Kafka broker, PostgreSQL and Redis,
the encoder service, the dataflow worker and a query API process. Each is SIGKILLed
(PostgreSQL: the postmaster and every backend at once, as a machine crash would) and started
again on the same port and data dir. Only processes started here are signalled, by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from bench.child import Child, child_env, children, http_ok
from deploy.stack import StackError, kafka, postgres, redis_server
from deploy.stack.process import free_port, pid_alive, read_pid, wait_until
from worldmm.settings import Settings

TARGETS = ("worker", "kafka", "postgres", "redis", "encoder")
SERVERS = {"kafka": kafka, "postgres": postgres, "redis": redis_server}


def _kill_wait(pids: Sequence[int], marker: str | None) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        wait_until(lambda p=pid: not pid_alive(p, marker), timeout_s=20, what=f"pid {pid} gone")
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


class ChaosStack:
    """Everything the chaos run starts, on fixed ports, under ``root``."""

    def __init__(self, root: Path, base: Settings, latency_s: float, run_id: str) -> None:
        self.root, self.base, self.latency_s, self.run_id = root, base, latency_s, run_id
        self.dirs = {name: root / name for name in SERVERS}
        self.ports: dict[str, int] = {}
        self.settings: Settings | None = None
        self.children: dict[str, Child] = {}  # worker, encoder, api, api2

    @property
    def worker(self) -> Child:
        return self.children["worker"]

    def start(self) -> Settings:
        """The servers, the database migrated and the topics made, then the child processes."""
        from connectors.topics import create_topics
        from worldmm.store.migrate import apply_migrations

        records = {name: server.start(self.dirs[name]) for name, server in SERVERS.items()}
        self.ports = {name: r["port"] for name, r in records.items()}
        self.ports.update(encoder=free_port(), api=free_port(), api2=free_port())
        self.settings = s = self.base.model_copy(
            update={
                "kafka_brokers": records["kafka"]["brokers"],
                "database_url": records["postgres"]["url"],
                "redis_url": records["redis"]["url"],
                "gpu_worker_url": f"http://127.0.0.1:{self.ports['encoder']}",
                "state_dir": self.root / "state",
                "blob_dir": self.root / "blobs",
                "topic_prefix": f"chaos.{self.run_id}.",
            }
        )
        apply_migrations(s.database_url or "", s)
        create_topics(s.kafka_brokers or "", s)
        worker = ["bench.ingest_worker", "--latency-s", str(self.latency_s), "--real-encoder"]
        worker += ["--report", str(self.root / "windows.jsonl")]
        commands = {
            "encoder": ["apps.cli", "gpu-worker", "--backend", "offline"],
            "api": ["apps.cli", "serve"],
            "api2": ["apps.cli", "serve"],  # a second process
            "worker": [*worker, "--recovery-dir", str(self.root / "recovery")],
        }
        for name, args in commands.items():
            port = ["--port", str(self.ports[name])] if name in self.ports else []
            cmd = [sys.executable, "-m", *args, *port]
            self.children[name] = Child(name, cmd, self.root / f"{name}.log", child_env(s)).start()
        wait_until(lambda: self.probe("encoder"), timeout_s=120, what="encoder service")
        for url in self.api_urls:
            wait_until(lambda u=url: http_ok(f"{u}/healthz"), timeout_s=180, what="query API")
        return s

    @property
    def api_url(self) -> str:
        return self.api_urls[0]

    @property
    def api_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{self.ports[name]}" for name in ("api", "api2")]

    def stop(self) -> None:
        for name in ("worker", "api", "api2", "encoder"):
            if name in self.children:
                self.children[name].stop()
        for name in ("redis", "postgres", "kafka"):
            SERVERS[name].stop(self.dirs[name])

    def kill(self, target: str) -> None:
        if target in self.children:
            self.children[target].kill()
        elif target == "postgres":
            pm = postgres.postmaster_pid(self.dirs["postgres"] / "data")
            if pm:  # the postmaster and all its backends at once, as a crash would
                _kill_wait([pm, *children(pm)], None)
        elif target in SERVERS:
            pid = read_pid(self.dirs[target] / f"{target}.pid")
            _kill_wait([pid] if pid else [], SERVERS[target].MARKER)
        else:
            raise ValueError(f"unknown target {target!r}")

    def restart(self, target: str) -> None:
        if target in self.children:
            self.children[target].start()
        elif target in SERVERS:
            SERVERS[target].start(self.dirs[target], port=self.ports[target])
        else:
            raise ValueError(f"unknown target {target!r}")

    def probe(self, target: str) -> bool:
        """The target answers its real protocol (the worker: its process runs)."""
        s = self.settings
        assert s is not None
        probes = {
            "worker": lambda: self.worker.alive(),
            "encoder": lambda: http_ok(f"{s.gpu_worker_url}/healthz"),
            "kafka": lambda: kafka.probe(s.kafka_brokers or "", 1.0)[0],
            "redis": lambda: redis_server.probe(s.redis_url or "")[0],
            "postgres": lambda: postgres.probe(s.database_url or "")[0],
        }
        if target not in probes:
            raise ValueError(f"unknown target {target!r}")
        return probes[target]()

    def wait_answering(self, target: str, timeout_s: float) -> bool:
        """Whether the target answers again within ``timeout_s``."""
        try:
            wait_until(lambda: self.probe(target), timeout_s=timeout_s, what=target)
        except StackError:
            return False
        return True

    def check_children(self) -> None:
        """Raise when a child we did not kill has died (a crash is a finding, not noise)."""
        for child in self.children.values():
            child.check()
