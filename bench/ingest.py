"""Ingest benchmark: how many glasses wearers one dataflow worker process keeps in real time.

    worldmm bench ingest --out docs/benchmarks/ingest.json
    python -m bench.ingest --out ingest.json --users-max 32 --minutes 1 --model-latency-s 2

The JSON goes to ``--out`` and a plot of latency and CPU against users beside it (``.png``).

Method (docs/benchmarks/ingest.md):

* The real ingest flow runs in a child process (:mod:`bench.ingest_worker`, one Bytewax
  worker): Kafka in, blob store, windows, construction and PostgreSQL writes. Every model
  call (caption, NER, triples, merges, semantic, consolidation, entity confirmation, ASR,
  clip encoding) is simulated (:mod:`bench.ingest_sim`): it waits
  ``--model-latency-s`` and returns cheap deterministic output, and text embeddings are a
  hash. The child's CPU time is therefore the pipeline's own, model time excluded.
* Simulated users stream in real time: one small JPEG per second each and a 5 s chunk of
  8 kHz audio every 5 s, through the gateway's producer. Event time runs at wall speed from
  a 10 minute boundary, so 3 min and 10 min windows close on their own within long runs.
* A 30 s window *closes* when the stream passes its end (the wall time its first later frame
  is produced); it is *queryable* when its segment, entities and triples are committed (the
  worker reports each finished window with that wall time). Close → queryable includes the
  flow's allowed lateness (the watermark waits for it) and the chained model calls.
* Levels of 1, 2, 4, ... users run one after another, each with a fresh worker and topics,
  until one falls behind: a level keeps up when every 30 s window is built and the p95 of
  close → queryable is at most 30 s. CPU per window = the child's CPU time (user + system,
  from /proc) while streaming and draining ÷ 30 s windows built.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import wave
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.ingest_profile import Sampler, breakdown, fold, top_frames
from bench.ingest_sim import small_jpeg
from bench.report import Echo, stamped_echo, write_report
from worldmm.memory.windows import BASE_S, SCALES, align, window_end
from worldmm.settings import Settings

REPO = Path(__file__).resolve().parents[1]

AUDIO_CHUNK_S = 5
AUDIO_RATE = 8000
FRAMES_PER_USER = 4  # distinct JPEGs cycled per user
IDLE_SAMPLE_S = 4.0
_CLK_TCK = os.sysconf("SC_CLK_TCK")
# Settings the worker gets as WORLDMM_* variables (others keep their defaults).
_WORKER_FIELDS = (
    "kafka_brokers", "database_url", "redis_url", "topic_prefix", "topic_partitions",
    "state_dir", "blob_dir", "llm_concurrency", "llm_concurrency_max", "allowed_lateness_s",
    "stream_idle_s", "dataflow_metrics_port",
    "frames_per_window", "max_past_age_s", "text_embed_dim", "visual_embed_dim",
)  # fmt: skip


@dataclass(frozen=True)
class BenchConfig:
    users_start: int = 1
    users_max: int = 2048
    factor: int = 4  # each level has this many times the users of the one before
    minutes: float = 1.0  # measured stream per level (whole 30 s windows)
    model_latency_s: float = 2.0
    concurrency: int = 16  # windows in flight at first (settings.llm_concurrency)
    concurrency_max: int | None = None  # the adaptive bound's ceiling (None: the setting's)
    seed: int = 0
    realtime_s: float = 30.0  # a window must be queryable this long after it closes
    drain_s: float = 30.0  # wait past the threshold before calling a window missing
    keep: bool = False  # keep the bench users' rows (default: purged after each level)
    profile: bool = False  # sample the worker with py-spy: CPU by part of the pipeline
    profile_dir: str | None = None  # where the raw samples are kept (beside --out)
    blob_root: str | None = None  # parent of each level's blob dir (None: the temp dir)

    @property
    def windows_per_user(self) -> int:
        return max(1, int(self.minutes * 60 // BASE_S))


def user_levels(start: int, most: int, factor: int = 2) -> list[int]:
    """start, start·factor, ... up to ``most``; ``most`` itself is the last."""
    if factor < 2:
        raise ValueError(f"factor must be ≥ 2, got {factor}")
    out, n = [], max(1, start)
    while n < most:
        out.append(n)
        n *= factor
    return [*out, most] if most >= max(1, start) else out


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else None


def _r(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


def silent_wav(seconds: int = AUDIO_CHUNK_S, rate: int = AUDIO_RATE) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x00\x00" * seconds * rate)
    return buf.getvalue()


def expected_windows(t0_ms: int, measured_ms: int) -> list[tuple[int, int]]:
    """(scale, start ms) of every window lying inside [t0, t0 + measured)."""
    end = t0_ms + measured_ms
    out: set[tuple[int, int]] = set()
    for t in range(t0_ms, end, BASE_S * 1000):
        for scale in SCALES:
            start = align(t, scale)
            if start >= t0_ms and window_end((scale, start)) <= end:
                out.add((scale, start))
    return sorted(out)


# --- the worker process -------------------------------------------------------------------


def _proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _proc_cpu(pid: int) -> tuple[float, float]:
    """(all threads, librdkafka's threads) CPU seconds of a live process. librdkafka names
    its threads ``rdk:*``; against the embedded broker its consumers spin (see the doc)."""
    kafka = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        if name.startswith("rdk:"):
            fields = text.rsplit(")", 1)[1].split()
            kafka += (int(fields[11]) + int(fields[12])) / _CLK_TCK
    return _proc_cpu_s(pid), kafka


def _proc_stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


class DbServerCpu:
    """CPU of the PostgreSQL server's processes (postmaster children: backends, writers),
    when the server runs on this machine; None otherwise. A process that exits between two
    readings takes its CPU with it, so this is a lower bound."""

    def __init__(self, database_url: str) -> None:
        from worldmm.store.db import Database

        with Database(database_url, max_size=1) as db, db.connection() as conn:
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        stat = _proc_stat(backend)
        self.postmaster = int(stat[1]) if stat else None

    def read(self) -> dict[int, float] | None:
        if self.postmaster is None:
            return None
        out = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                stat = _proc_stat(int(entry.name))
                if stat and int(stat[1]) == self.postmaster:
                    out[int(entry.name)] = (int(stat[11]) + int(stat[12])) / _CLK_TCK
        return out

    @staticmethod
    def delta(a: dict[int, float] | None, b: dict[int, float] | None) -> float | None:
        if a is None or b is None:
            return None
        return sum(cpu - a.get(pid, 0.0) for pid, cpu in b.items())


def _worker_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORLDMM_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONUNBUFFERED="1")
    for name in _WORKER_FIELDS:
        value = getattr(settings, name)
        if value is not None:
            env[f"WORLDMM_{name.upper()}"] = str(value)
    return env


class Worker:
    """``python -m bench.ingest_worker`` in its own process group; stopped by its pid."""

    def __init__(self, settings: Settings, latency_s: float, workdir: Path) -> None:
        self.report = workdir / "windows.jsonl"
        self.log_path = workdir / "worker.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.ingest_worker", "--latency-s", str(latency_s),
             "--report", str(self.report)],
            cwd=REPO, env=_worker_env(settings), stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        self._offset = 0
        self.finished: dict[tuple[str, int, int], dict] = {}

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"ingest worker exited with {self.proc.returncode}:\n{tail}")

    def cpu_s(self) -> tuple[float, float]:
        """(whole process, librdkafka threads) CPU seconds so far."""
        return _proc_cpu(self.proc.pid)

    def read_reports(self) -> None:
        """Take in the windows reported since the last call (first report of a window wins)."""
        if not self.report.exists():
            return
        with self.report.open("rb") as f:
            f.seek(self._offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.splitlines():
            rec = json.loads(line)
            self.finished.setdefault((rec["user"], rec["scale"], rec["start_ms"]), rec)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # our child's own group
                self.proc.wait(timeout=10)
        self._log.close()


# --- one level ------------------------------------------------------------------------------


@dataclass
class LevelResult:
    users: int
    windows_expected: int
    windows_complete: int
    windows_failed: int
    close_to_queryable_p50_s: float | None
    close_to_queryable_p95_s: float | None
    close_to_queryable_max_s: float | None
    coarse: dict[str, Any]
    cpu_s: float  # the worker without its Kafka client threads
    cpu_ms_per_window: float | None
    kafka_client_cpu_s: float  # librdkafka's threads of the worker
    cpu_ms_per_window_with_kafka_client: float | None
    idle_cpu_cores: float  # whole worker, before streaming (Kafka client polling)
    idle_cpu_cores_without_kafka_client: float
    db_server_cpu_ms_per_window: float | None
    measured_wall_s: float
    producer_lag_max_s: float
    loadavg_start: list[float]
    loadavg_end: list[float]
    realtime: bool
    every_window_in_time: bool
    worker_startup_s: float
    notes: list[str] = field(default_factory=list)
    cpu_breakdown: dict[str, Any] | None = None  # --profile: ms per window by part
    profile_top_frames: list[tuple[str, int]] | None = None


def _level_settings(base: Settings, cfg: BenchConfig, run_id: str, users: int, tmp: Path):
    return base.model_copy(
        update={
            "topic_prefix": f"bench.ingest.{run_id}.{users}.",
            "topic_partitions": 1,
            "llm_concurrency": cfg.concurrency,
            "llm_concurrency_max": cfg.concurrency_max or base.llm_concurrency_max,
            "blob_dir": Path(tempfile.mkdtemp(prefix="blobs-", dir=cfg.blob_root or tmp)),
            "state_dir": tmp / "state",
            "max_past_age_s": max(base.max_past_age_s, 3 * 3600.0),
        }
    )


def _wait_sessions(settings: Settings, users: list[str], worker: Worker, timeout_s: float):
    """The worker is consuming once it has recorded every user's session start."""
    from worldmm.store.db import Database

    deadline = time.monotonic() + timeout_s
    with Database(settings.database_url, max_size=1) as db:
        while True:
            worker.check_alive()
            with db.connection() as conn:
                n = conn.execute(
                    "SELECT count(*) FROM sessions WHERE user_id = ANY(%s)", (users,)
                ).fetchone()[0]
            if n == len(users):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker recorded {n}/{len(users)} sessions in {timeout_s}s")
            time.sleep(0.25)


def _purge(settings: Settings, users: list[str]) -> None:
    from worldmm.store.db import Database
    from worldmm.store.purge import purge_user

    with Database(settings.database_url, max_size=1) as db, db.transaction() as conn:
        for u in users:
            purge_user(conn, u)


def _delete_topics(settings: Settings) -> None:
    from confluent_kafka.admin import AdminClient

    from connectors.topics import topic_names

    admin = AdminClient({"bootstrap.servers": settings.kafka_brokers})
    for fut in admin.delete_topics(list(topic_names(settings).values())).values():
        with contextlib.suppress(Exception):  # a leftover bench topic is harmless
            fut.result(timeout=30)


def run_level(base: Settings, cfg: BenchConfig, users: int, run_id: str, echo: Echo):
    from connectors.gateway import GlassesProducer
    from connectors.topics import create_topics

    tmp = Path(tempfile.mkdtemp(prefix=f"worldmm-bench-ingest-{users}-"))
    settings = _level_settings(base, cfg, run_id, users, tmp)
    names = [f"bench-{run_id}-u{u:03d}" for u in range(users)]
    create_topics(settings.kafka_brokers, settings)
    load_start = list(os.getloadavg())
    started = time.monotonic()
    db_cpu = DbServerCpu(settings.database_url)
    worker = Worker(settings, cfg.model_latency_s, tmp)
    sampler: Sampler | None = None
    folded: list[str] | None = None
    try:
        # Event time: from the last 10 min boundary, running at wall speed from now.
        now = datetime.now(UTC)
        t0 = now.replace(minute=now.minute - now.minute % 10, second=0, microsecond=0)
        t0_ms = int(t0.timestamp() * 1000)
        jpegs = [
            [small_jpeg(cfg.seed * 100_003 + u * 7 + i) for i in range(FRAMES_PER_USER)]
            for u in range(users)
        ]
        wav = silent_wav()
        with GlassesProducer(settings) as producer:
            for name in names:
                producer.start_session(name, "s1", t0)
            producer.flush()
            _wait_sessions(settings, names, worker, timeout_s=180)
            startup_s = time.monotonic() - started
            # The idle worker's own CPU rate (Kafka polling), to tell it apart from the work.
            idle_c0, idle_t0 = worker.cpu_s(), time.monotonic()
            time.sleep(IDLE_SAMPLE_S)
            idle_c1, idle_dt = worker.cpu_s(), time.monotonic() - idle_t0
            idle_rate = (idle_c1[0] - idle_c0[0]) / idle_dt
            idle_pipeline = (idle_c1[0] - idle_c1[1] - idle_c0[0] + idle_c0[1]) / idle_dt
            windows = cfg.windows_per_user
            measured_s = windows * BASE_S
            # Enough stream after the last measured window for the watermark to pass it.
            tail_s = int(settings.allowed_lateness_s) + AUDIO_CHUNK_S + 2
            cpu0, db0, wall0 = worker.cpu_s(), db_cpu.read(), time.time()
            sampler = Sampler(worker.proc.pid, tmp / "profile.txt") if cfg.profile else None
            echo(f"  {users} users: worker up in {startup_s:.1f}s; streaming {measured_s}s"
                 f" (+{tail_s}s tail)")  # fmt: skip
            passed_at: dict[int, float] = {}  # second offset -> wall time the stream passed it
            lag = 0.0
            for k in range(measured_s + tail_s + 1):
                due = wall0 + k
                time.sleep(max(0.0, due - time.time()))
                passed_at[k] = time.time()
                lag = max(lag, passed_at[k] - due)
                ts = t0 + timedelta(seconds=k)
                for u, name in enumerate(names):
                    producer.send_frame(name, "s1", ts, jpegs[u][k % FRAMES_PER_USER], seq=k)
                    if k >= AUDIO_CHUNK_S and k % AUDIO_CHUNK_S == 0:
                        chunk_ts = ts - timedelta(seconds=AUDIO_CHUNK_S)
                        producer.send_audio(name, "s1", chunk_ts, wav)
                producer.producer.poll(0)
                if k % 5 == 0:
                    worker.check_alive()
                    worker.read_reports()
            producer.flush()

        wanted = expected_windows(t0_ms, measured_s * 1000)
        keys = [(n, s, st) for n in names for s, st in wanted]
        base_keys = [k for k in keys if k[1] == BASE_S]

        def close_wall(scale: int, start_ms: int) -> float:
            return passed_at[(start_ms + scale * 1000 - t0_ms) // 1000]

        last_close = max(close_wall(s, st) for _, s, st in keys)
        deadline = last_close + cfg.realtime_s + cfg.drain_s
        cpu_end = db_end = None
        while time.time() < deadline:
            worker.check_alive()
            worker.read_reports()
            if cpu_end is None and all(k in worker.finished for k in base_keys):
                cpu_end, db_end = worker.cpu_s(), db_cpu.read()
                folded = sampler.stop() if sampler else None
            if all(k in worker.finished for k in keys):
                break
            time.sleep(0.2)
        worker.read_reports()
        if cpu_end is None:
            cpu_end, db_end = worker.cpu_s(), db_cpu.read()
            folded = sampler.stop() if sampler else None
        cpu_total = cpu_end[0] - cpu0[0]
        cpu_kafka = cpu_end[1] - cpu0[1]
        cpu = cpu_total - cpu_kafka
        db_s = DbServerCpu.delta(db0, db_end)
        measured_wall = time.time() - wall0
    finally:
        if sampler is not None and folded is None:
            sampler.stop()
        worker.stop()
    load_end = list(os.getloadavg())

    def latencies(scale_keys):
        done = [k for k in scale_keys if worker.finished.get(k, {}).get("status") == "complete"]
        return [worker.finished[k]["at"] - close_wall(k[1], k[2]) for k in done]

    base_lat = latencies(base_keys)
    failed = sum(1 for k in base_keys if worker.finished.get(k, {}).get("status") == "failed")
    coarse = {}
    for scale in SCALES[1:]:
        ks = [k for k in keys if k[1] == scale]
        if ks:
            lat = latencies(ks)
            coarse[str(scale)] = {
                "expected": len(ks), "complete": len(lat),
                "close_to_queryable_p50_s": _r(percentile(lat, 50)),
                "close_to_queryable_max_s": _r(max(lat) if lat else None),
            }  # fmt: skip
    p95 = percentile(base_lat, 95)
    all_done = len(base_lat) == len(base_keys)
    result = LevelResult(
        users=users,
        windows_expected=len(base_keys),
        windows_complete=len(base_lat),
        windows_failed=failed,
        close_to_queryable_p50_s=_r(percentile(base_lat, 50)),
        close_to_queryable_p95_s=_r(p95),
        close_to_queryable_max_s=_r(max(base_lat) if base_lat else None),
        coarse=coarse,
        cpu_s=round(cpu, 3),
        cpu_ms_per_window=_r(1000 * cpu / len(base_lat), 1) if base_lat else None,
        kafka_client_cpu_s=round(cpu_kafka, 3),
        cpu_ms_per_window_with_kafka_client=(
            _r(1000 * cpu_total / len(base_lat), 1) if base_lat else None
        ),
        idle_cpu_cores=round(idle_rate, 3),
        idle_cpu_cores_without_kafka_client=round(idle_pipeline, 3),
        db_server_cpu_ms_per_window=(
            _r(1000 * db_s / len(base_lat), 1) if base_lat and db_s is not None else None
        ),
        measured_wall_s=round(measured_wall, 1),
        producer_lag_max_s=round(lag, 3),
        loadavg_start=[round(x, 2) for x in load_start],
        loadavg_end=[round(x, 2) for x in load_end],
        realtime=all_done and p95 is not None and p95 <= cfg.realtime_s,
        every_window_in_time=all_done and bool(base_lat) and max(base_lat) <= cfg.realtime_s,
        worker_startup_s=round(startup_s, 1),
    )
    if folded is not None:
        result.cpu_breakdown = breakdown(fold(folded), result.cpu_ms_per_window)
        result.profile_top_frames = top_frames(folded)
        if cfg.profile_dir:
            kept = Path(cfg.profile_dir) / f"ingest-profile-{users}.txt"
            kept.write_text("\n".join(folded) + "\n")
            result.notes.append(f"py-spy samples (folded): {kept}")
    if lag > 1.0:
        result.notes.append(f"the producer fell {lag:.1f}s behind schedule (machine busy)")
    if not cfg.keep:
        _purge(settings, names)
    _delete_topics(settings)
    shutil.rmtree(settings.blob_dir, ignore_errors=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return result


# --- the search -----------------------------------------------------------------------------


def _fit_marginal(levels: list[LevelResult]) -> float | None:
    """Slope of CPU seconds over windows built (ms per window, fixed costs removed)."""
    pts = [(lv.windows_complete, lv.cpu_s) for lv in levels if lv.windows_complete]
    if len({w for w, _ in pts}) < 2:
        return None
    x, y = np.asarray(pts, dtype=float).T
    return float(1000 * np.polyfit(x, y, 1)[0])


def run_benchmark(settings: Settings, cfg: BenchConfig, echo: Echo) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    load_start = list(os.getloadavg())
    levels: list[LevelResult] = []
    for users in user_levels(cfg.users_start, cfg.users_max, cfg.factor):
        lv = run_level(settings, cfg, users, run_id, echo)
        levels.append(lv)
        echo(
            f"  {users} users: {lv.windows_complete}/{lv.windows_expected} windows,"
            f" close→queryable p50 {lv.close_to_queryable_p50_s}s"
            f" p95 {lv.close_to_queryable_p95_s}s max {lv.close_to_queryable_max_s}s,"
            f" {lv.cpu_ms_per_window} CPU ms/window, realtime={lv.realtime}"
        )
        if not lv.realtime:
            break
    ok = [lv for lv in levels if lv.realtime]
    head = ok[-1] if ok else levels[0]
    strict = [lv.users for lv in levels if lv.every_window_in_time]
    return {
        "benchmark": "ingest",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "users_realtime_max": ok[-1].users if ok else 0,
        "users_realtime_max_every_window": max(strict) if strict else 0,
        "search_ended": "a level fell behind" if not levels[-1].realtime else "users_max reached",
        "headline_level_users": head.users,
        "cpu_ms_per_window": head.cpu_ms_per_window,
        "cpu_ms_per_window_with_kafka_client": head.cpu_ms_per_window_with_kafka_client,
        "cpu_ms_per_window_marginal": _r(_fit_marginal(levels), 1),
        "worker_idle_cpu_cores": head.idle_cpu_cores,
        "db_server_cpu_ms_per_window": head.db_server_cpu_ms_per_window,
        "close_to_queryable_p50_s": head.close_to_queryable_p50_s,
        "close_to_queryable_p95_s": head.close_to_queryable_p95_s,
        "close_to_queryable_max_s": head.close_to_queryable_max_s,
        "cpu_breakdown": head.cpu_breakdown,
        "settings": {
            **asdict(cfg),
            "windows_per_user": cfg.windows_per_user,
            "fps": 1,
            "frame_jpeg_bytes": len(small_jpeg(cfg.seed)),
            "audio": f"{AUDIO_CHUNK_S} s chunks, {AUDIO_RATE} Hz PCM16 WAV (silent)",
            "allowed_lateness_s": settings.allowed_lateness_s,
            "stream_idle_s": settings.stream_idle_s,
            "frames_per_window": settings.frames_per_window,
            "window_max_attempts": settings.window_max_attempts,
            "model": "simulated: every call waits model_latency_s (bench/ingest_sim.py)",
            "text_embedder": "sim-hash: deterministic hash vectors, not MiniLM",
            "workers": "one Bytewax worker in one process (bench/ingest_worker.py)",
            "criterion": f"every 30 s window built and p95 close→queryable ≤ {cfg.realtime_s}s",
        },
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        },
        "levels": [asdict(lv) for lv in levels],
    }


def plot(result: dict[str, Any], path: Path) -> None:
    """Close → queryable and CPU per window against users, one point per level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = result["levels"]
    users = [lv["users"] for lv in levels]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (("p50", "p50"), ("p95", "p95"), ("max", "max")):
        ax1.plot(users, [lv[f"close_to_queryable_{key}_s"] for lv in levels], "o-", label=label)
    ax1.axhline(result["settings"]["realtime_s"], color="grey", ls="--", label="real-time limit")
    ax1.set(xscale="log", xlabel="simulated users (1 fps each)", ylabel="seconds",
            title="30 s window close → queryable")  # fmt: skip
    ax1.set_xticks(users, [str(u) for u in users])
    ax1.legend()
    ax2.plot(users, [lv["cpu_ms_per_window"] for lv in levels], "o-",
             label="dataflow worker (pipeline)")  # fmt: skip
    ax2.plot(users, [lv["cpu_ms_per_window_with_kafka_client"] for lv in levels], "o--",
             label="worker incl. Kafka client threads")  # fmt: skip
    if result.get("cpu_ms_per_window_marginal"):
        ax2.axhline(result["cpu_ms_per_window_marginal"], color="grey", ls=":",
                    label="pipeline, marginal (slope over levels)")  # fmt: skip
    db = [lv["db_server_cpu_ms_per_window"] for lv in levels]
    if any(v is not None for v in db):
        ax2.plot(users, db, "o-", label="PostgreSQL server")
    ax2.set(xscale="log", yscale="log", xlabel="simulated users", ylabel="CPU ms per 30 s window",
            title="CPU per window (model time excluded)")  # fmt: skip
    ax2.set_xticks(users, [str(u) for u in users])
    ax2.legend()
    s = result["settings"]
    fig.suptitle(f"ingest, one worker: model latency {s['model_latency_s']} s/call, "
                 f"concurrency {s['concurrency']}, {result['machine']['cpus']} CPUs")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    d = BenchConfig()
    p = argparse.ArgumentParser(prog="python -m bench.ingest", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="where to write the JSON result")
    p.add_argument("--users-start", type=int, default=d.users_start, help="first level")
    p.add_argument("--users-max", type=int, default=d.users_max, help="last level tried")
    p.add_argument("--factor", type=int, default=d.factor, help="users ×factor per level")
    p.add_argument("--minutes", type=float, default=d.minutes, help="stream per level")
    p.add_argument("--model-latency-s", type=float, default=d.model_latency_s,
                   help="simulated latency of every model call")  # fmt: skip
    p.add_argument("--concurrency", type=int, default=d.concurrency,
                   help="windows in flight at first (WORLDMM_LLM_CONCURRENCY)")  # fmt: skip
    p.add_argument("--concurrency-max", type=int, default=None,
                   help="ceiling of the adaptive bound (WORLDMM_LLM_CONCURRENCY_MAX)")  # fmt: skip
    p.add_argument("--seed", type=int, default=d.seed, help="frame generator seed")
    p.add_argument("--blob-root", default=None,
                   help="parent of each level's blob dir (default: temp dir)")  # fmt: skip
    p.add_argument("--keep", action="store_true", help="keep the bench users' rows")
    p.add_argument("--profile", action="store_true",
                   help="sample the worker with py-spy: CPU by pipeline part")  # fmt: skip
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from bench.query import resolve_settings
    from worldmm import stack
    from worldmm.settings import load_settings

    args = parse_args(argv)
    t0 = time.perf_counter()
    echo = stamped_echo(t0)
    base = load_settings()
    cfg = BenchConfig(
        users_start=args.users_start,
        users_max=args.users_max,
        factor=args.factor,
        minutes=args.minutes,
        model_latency_s=args.model_latency_s,
        concurrency=args.concurrency,
        concurrency_max=args.concurrency_max,
        blob_root=args.blob_root,
        seed=args.seed,
        keep=args.keep,
        profile=args.profile,
        profile_dir=str(args.out.resolve().parent) if args.profile else None,
    )
    settings, started = resolve_settings(base, echo)
    if not settings.kafka_brokers:
        settings = settings.model_copy(update={"kafka_brokers": stack.kafka_brokers(settings)})
    try:
        result = run_benchmark(settings, cfg, echo)
    finally:
        if started:
            stack.down(base)
    write_report(result, "bench.ingest", argv, t0, args.out)
    plot(result, args.out.with_suffix(".png"))
    return result


if __name__ == "__main__":
    main()
