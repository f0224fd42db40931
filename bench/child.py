"""The benchmarks' child processes (the dataflow worker, ``worldmm serve``, the encoder): each
in its own session, its output in a log file. Only processes started here are signalled, by
PID (their own process group); ``/proc`` readings of their CPU."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

from bench.harness import REPO, words
from worldmm.settings import Settings

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_stat(path: Path | int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` (or of a ``stat`` file) after the command name: [1] is
    the parent PID; None when the process is gone."""
    try:
        text = Path(f"/proc/{path}/stat" if isinstance(path, int) else path).read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def cpu_s(stat: list[str]) -> float:
    """User + system CPU seconds of a ``proc_stat``."""
    return (int(stat[11]) + int(stat[12])) / _CLK_TCK


def children(parent: int) -> dict[int, list[str]]:
    """Every process whose parent is ``parent``, with its ``proc_stat``."""
    stats = {
        int(p.name): proc_stat(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()
    }
    return {pid: stat for pid, stat in stats.items() if stat and int(stat[1]) == parent}


def http_ok(url: str) -> bool:
    """``url`` answers 200 within two seconds."""
    import httpx

    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


# Settings the benchmarks' child processes get as WORLDMM_* variables.
SERVICE_FIELDS = words(
    "kafka_brokers, database_url, redis_url, topic_prefix, topic_partitions, state_dir,"
    " blob_dir, in_flight_start, in_flight_max, allowed_lateness_s, stream_idle_s,"
    " session_end_grace_s, dataflow_metrics_port, frames_per_window, max_past_age_s,"
    " text_embed_dim, visual_embed_dim, gpu_worker_url, ocr_frames, gpu_timeout_s,"
    " gpu_max_retries, gpu_breaker_reset_s, llm_provider, embed_backend,"
    " api_rate_limit, admin_api_key, ingest_create_users"
)


def child_env(
    settings: Settings, fields: Iterable[str] = SERVICE_FIELDS, **extra: str
) -> dict[str, str]:
    """This process's environment with ``WORLDMM_<FIELD>`` set from ``settings`` for each of
    ``fields`` (removed when None), models offline and output unbuffered."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    env.update(extra)
    for name in fields:
        value = getattr(settings, name)
        value = value.get_secret_value() if hasattr(value, "get_secret_value") else value
        if value is None:
            env.pop(f"WORLDMM_{name.upper()}", None)
        else:
            env[f"WORLDMM_{name.upper()}"] = str(value)
    return env


class Child:
    """A process in its own session writing to ``log``; restartable with the same command."""

    def __init__(self, name: str, cmd: list[str], log: Path, env: dict[str, str] | None = None):
        self.name, self.cmd, self.log, self.env = name, cmd, log, env
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> Child:
        detached = {"cwd": REPO, "stdin": subprocess.DEVNULL, "start_new_session": True}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, **detached
            )
        self.starts += 1
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """Raise, with the end of its log, when it has exited (a crash is a finding)."""
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")

    def kill(self) -> None:
        if self.alive():
            os.killpg(self.pid, signal.SIGKILL)  # our child's own process group
            self.proc.wait(timeout=20)

    def stop(self) -> None:
        """SIGINT (a clean exit), then SIGKILL to its group after 15 s."""
        if self.alive():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15.0)
            except subprocess.TimeoutExpired:
                self.kill()

    def tail(self, n: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""
