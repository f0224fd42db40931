"""Ingest benchmark: how many glasses wearers one dataflow worker process keeps in real time.

    worldmm bench ingest --out docs/benchmarks/ingest.json   # = python -m bench.ingest ...

The JSON goes to ``--out`` and a plot of latency and CPU against users beside it (``.png``).
Method (docs/benchmarks/ingest.md): the real ingest flow runs in a child process
(:mod:`bench.ingest_worker`, one Bytewax worker) with every model call simulated
(:mod:`bench.ingest_sim`: it waits ``--model-latency-s``), so its CPU time is the pipeline's
own. Simulated users stream in real time (a small JPEG a second, a 5 s audio chunk every 5 s)
from a 10 minute boundary. A 30 s window *closes* when the stream passes its end and is
*queryable* when the worker reports its memory committed. Levels of 1, 4, 16, ... users run
one after another, each with a fresh worker and topics, until one falls behind: a level keeps
up when every 30 s window is built and the p95 of close → queryable is at most 30 s. CPU per
window = the worker's CPU time (from /proc) while streaming and draining ÷ windows built.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from bench import harness
from bench.child import Child, child_env, children, cpu_s, proc_stat
from bench.harness import Echo, percentile
from bench.ingest_profile import Sampler, breakdown, fold, top_frames
from bench.ingest_sim import AUDIO_CHUNK_S, AUDIO_RATE, Wearers, small_jpeg, ten_minute_start
from worldmm.memory.windows import BASE_S, SCALES, align, window_end
from worldmm.settings import Settings

IDLE_SAMPLE_S = 4.0
# Settings the worker gets as WORLDMM_* variables.
_WORKER_FIELDS = (
    "kafka_brokers", "database_url", "redis_url", "topic_prefix", "topic_partitions",
    "state_dir", "blob_dir", "llm_concurrency", "llm_concurrency_max", "allowed_lateness_s",
    "stream_idle_s", "dataflow_metrics_port",
    "frames_per_window", "max_past_age_s", "text_embed_dim", "visual_embed_dim",
)  # fmt: skip


class BenchConfig(harness.Options):
    users_max: int = Field(2048, description="Most simulated users tried (the last level).")
    users_start: int = Field(1, description="Users of the first level.")
    factor: int = Field(4, description="Users ×factor from one level to the next.")
    minutes: float = Field(1.0, description="Real-time stream per level (whole 30 s windows).")
    model_latency_s: float = Field(2.0, description="Simulated latency of every model call (s).")
    concurrency: int = Field(16, description="Windows in flight at first (llm_concurrency).")
    concurrency_max: int | None = Field(
        None, description="The adaptive bound's ceiling (default: WORLDMM_LLM_CONCURRENCY_MAX)."
    )
    seed: int = Field(0, description="Frame generator seed.")
    blob_root: Path | None = Field(
        None, description="Parent of each level's blob dir (default: the temp dir)."
    )
    keep: bool = Field(False, description="Keep the simulated users' rows.")
    profile: bool = Field(
        False, description="Sample the worker with py-spy: CPU by pipeline part (beside --out)."
    )
    realtime_s: float = 30.0  # a window must be queryable this long after it closes
    drain_s: float = 30.0  # wait past the threshold before calling a window missing

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


def _r(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(x, nd)


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


def _proc_cpu(pid: int) -> tuple[float, float]:
    """(all threads, librdkafka's threads) CPU seconds of a live process. librdkafka names
    its threads ``rdk:*``; against the embedded broker its consumers spin (see the doc)."""
    kafka = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended
            if (task / "comm").read_text().startswith("rdk:"):
                kafka += cpu_s(proc_stat(task / "stat") or [])
    return cpu_s(proc_stat(pid) or []), kafka


class DbServerCpu:
    """CPU of the PostgreSQL server's processes (postmaster children: backends, writers),
    when the server runs on this machine; None otherwise. A process that exits between two
    readings takes its CPU with it, so this is a lower bound."""

    def __init__(self, database_url: str) -> None:
        from worldmm.store.db import Database

        with Database(database_url, max_size=1) as db, db.connection() as conn:
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        stat = proc_stat(backend)
        self.postmaster = int(stat[1]) if stat else None

    def read(self) -> dict[int, float] | None:
        if self.postmaster is None:
            return None
        return {pid: cpu_s(stat) for pid, stat in children(self.postmaster).items()}

    @staticmethod
    def delta(a: dict[int, float] | None, b: dict[int, float] | None) -> float | None:
        if a is None or b is None:
            return None
        return sum(cpu - a.get(pid, 0.0) for pid, cpu in b.items())


class Worker:
    """``python -m bench.ingest_worker`` and the windows it reports as finished."""

    def __init__(self, settings: Settings, latency_s: float, workdir: Path) -> None:
        self.report = workdir / "windows.jsonl"
        cmd = [sys.executable, "-m", "bench.ingest_worker", "--latency-s", str(latency_s),
               "--report", str(self.report)]  # fmt: skip
        env = child_env(settings, _WORKER_FIELDS)
        self.child = Child("ingest worker", cmd, workdir / "worker.log", env).start()
        self._offset = 0
        self.finished: dict[tuple[str, int, int], dict] = {}

    def cpu_s(self) -> tuple[float, float]:
        """(whole process, librdkafka threads) CPU seconds so far."""
        return _proc_cpu(self.child.pid)

    def read_reports(self) -> None:
        """Take in the windows reported since the last call (first report of a window wins)."""
        self.child.check()
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
            worker.child.check()
            with db.connection() as conn:
                n = conn.execute(
                    "SELECT count(*) FROM sessions WHERE user_id = ANY(%s)", (users,)
                ).fetchone()[0]
            if n == len(users):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker recorded {n}/{len(users)} sessions in {timeout_s}s")
            time.sleep(0.25)


def _clean_up(settings: Settings, users: list[str], keep: bool) -> None:
    """The level's users (unless ``keep``), topics and blobs."""
    from confluent_kafka.admin import AdminClient

    from connectors.topics import topic_names
    from worldmm.store.db import Database
    from worldmm.store.purge import purge_user

    if not keep:
        with Database(settings.database_url, max_size=1) as db, db.transaction() as conn:
            for u in users:
                purge_user(conn, u)
    admin = AdminClient({"bootstrap.servers": settings.kafka_brokers})
    for fut in admin.delete_topics(list(topic_names(settings).values())).values():
        with contextlib.suppress(Exception):  # a leftover bench topic is harmless
            fut.result(timeout=30)
    shutil.rmtree(settings.blob_dir, ignore_errors=True)


def run_level(base: Settings, cfg: BenchConfig, users: int, run_id: str, echo: Echo):
    from connectors.gateway import GlassesProducer
    from connectors.topics import create_topics

    tmp = Path(tempfile.mkdtemp(prefix=f"worldmm-bench-ingest-{users}-"))
    settings = _level_settings(base, cfg, run_id, users, tmp)
    names = [f"bench-{run_id}-u{u:03d}" for u in range(users)]
    create_topics(settings.kafka_brokers, settings)
    load_start = harness.loadavg()
    started = time.monotonic()
    db_cpu = DbServerCpu(settings.database_url)
    worker = Worker(settings, cfg.model_latency_s, tmp)
    sampler: Sampler | None = None
    folded: list[str] | None = None
    try:
        t0 = ten_minute_start()  # event time runs at wall speed from there
        t0_ms = int(t0.timestamp() * 1000)
        wearers = Wearers(names, cfg.seed)
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
            measured_s = cfg.windows_per_user * BASE_S
            # Enough stream after the last measured window for the watermark to pass it.
            tail_s = int(settings.allowed_lateness_s) + AUDIO_CHUNK_S + 2
            cpu0, db0, wall0 = worker.cpu_s(), db_cpu.read(), time.time()
            sampler = Sampler(worker.child.pid, tmp / "profile.txt") if cfg.profile else None
            echo(f"  {users} users: worker up in {startup_s:.1f}s; streaming {measured_s}s"
                 f" (+{tail_s}s tail)")  # fmt: skip
            passed_at: dict[int, float] = {}  # second offset -> wall time the stream passed it
            lag = 0.0
            for k in range(measured_s + tail_s + 1):
                due = wall0 + k
                time.sleep(max(0.0, due - time.time()))
                passed_at[k] = time.time()
                lag = max(lag, passed_at[k] - due)
                wearers.send_second(producer, t0, k)
                if k % 5 == 0:
                    worker.read_reports()
            producer.flush()

        keys = [(n, s, st) for n in names for s, st in expected_windows(t0_ms, measured_s * 1000)]
        base_keys = [k for k in keys if k[1] == BASE_S]

        def close_wall(scale: int, start_ms: int) -> float:
            return passed_at[(start_ms + scale * 1000 - t0_ms) // 1000]

        deadline = max(close_wall(s, st) for _, s, st in keys) + cfg.realtime_s + cfg.drain_s
        cpu_end = db_end = None
        while time.time() < deadline:
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
        cpu_total, cpu_kafka = cpu_end[0] - cpu0[0], cpu_end[1] - cpu0[1]
        cpu = cpu_total - cpu_kafka
        db_s = DbServerCpu.delta(db0, db_end)
        measured_wall = time.time() - wall0
    finally:
        if sampler is not None and folded is None:
            sampler.stop()
        worker.child.stop()

    def latencies(scale_keys):
        done = [k for k in scale_keys if worker.finished.get(k, {}).get("status") == "complete"]
        return [worker.finished[k]["at"] - close_wall(k[1], k[2]) for k in done]

    base_lat = latencies(base_keys)
    lat = harness.summary(base_lat)
    failed = sum(1 for k in base_keys if worker.finished.get(k, {}).get("status") == "failed")
    coarse = {}
    for scale in SCALES[1:]:
        if ks := [k for k in keys if k[1] == scale]:
            figures = harness.summary(latencies(ks))
            coarse[str(scale)] = {
                "expected": len(ks), "complete": figures["n"],
                "close_to_queryable_p50_s": figures.get("p50"),
                "close_to_queryable_max_s": figures.get("max"),
            }  # fmt: skip
    p95 = percentile(base_lat, 95)
    all_done, n = len(base_lat) == len(base_keys), len(base_lat)
    result = LevelResult(
        users=users,
        windows_expected=len(base_keys),
        windows_complete=n,
        windows_failed=failed,
        close_to_queryable_p50_s=lat.get("p50"),
        close_to_queryable_p95_s=lat.get("p95"),
        close_to_queryable_max_s=lat.get("max"),
        coarse=coarse,
        cpu_s=round(cpu, 3),
        cpu_ms_per_window=_r(1000 * cpu / n, 1) if n else None,
        kafka_client_cpu_s=round(cpu_kafka, 3),
        cpu_ms_per_window_with_kafka_client=_r(1000 * cpu_total / n, 1) if n else None,
        idle_cpu_cores=round(idle_rate, 3),
        idle_cpu_cores_without_kafka_client=round(idle_pipeline, 3),
        db_server_cpu_ms_per_window=_r(1000 * db_s / n, 1) if n and db_s is not None else None,
        measured_wall_s=round(measured_wall, 1),
        producer_lag_max_s=round(lag, 3),
        loadavg_start=load_start,
        loadavg_end=harness.loadavg(),
        realtime=all_done and p95 is not None and p95 <= cfg.realtime_s,
        every_window_in_time=all_done and bool(base_lat) and max(base_lat) <= cfg.realtime_s,
        worker_startup_s=round(startup_s, 1),
    )
    if folded is not None:
        result.cpu_breakdown = breakdown(fold(folded), result.cpu_ms_per_window)
        result.profile_top_frames = top_frames(folded)
        if cfg.out:
            kept = cfg.out.resolve().parent / f"ingest-profile-{users}.txt"
            kept.write_text("\n".join(folded) + "\n")
            result.notes.append(f"py-spy samples (folded): {kept}")
    if lag > 1.0:
        result.notes.append(f"the producer fell {lag:.1f}s behind schedule (machine busy)")
    _clean_up(settings, names, cfg.keep)
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
    run, run_id = harness.Run(), uuid.uuid4().hex[:8]
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
    return run.stamp(
        {
            "benchmark": "ingest",
            "users_realtime_max": ok[-1].users if ok else 0,
            "users_realtime_max_every_window": max(strict) if strict else 0,
            "search_ended": "a level fell behind"
            if not levels[-1].realtime
            else "users_max reached",
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
                **cfg.model_dump(mode="json"),
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
            "levels": [asdict(lv) for lv in levels],
        }
    )


def plot(result: dict[str, Any], path: Path) -> None:
    """Close → queryable and CPU per window against users, one point per level."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = result["levels"]
    users = [lv["users"] for lv in levels]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for key in ("p50", "p95", "max"):
        ax1.plot(users, [lv[f"close_to_queryable_{key}_s"] for lv in levels], "o-", label=key)
    ax1.axhline(result["settings"]["realtime_s"], color="grey", ls="--", label="real-time limit")
    ax1.set(xscale="log", xlabel="simulated users (1 fps each)", ylabel="seconds",
            title="30 s window close → queryable")  # fmt: skip
    series = (("cpu_ms_per_window", "o-", "dataflow worker (pipeline)"),
              ("cpu_ms_per_window_with_kafka_client", "o--", "worker incl. Kafka client threads"),
              ("db_server_cpu_ms_per_window", "o-", "PostgreSQL server"))  # fmt: skip
    for key, style, label in series:
        if any(lv[key] is not None for lv in levels):
            ax2.plot(users, [lv[key] for lv in levels], style, label=label)
    if result.get("cpu_ms_per_window_marginal"):
        ax2.axhline(result["cpu_ms_per_window_marginal"], color="grey", ls=":",
                    label="pipeline, marginal (slope over levels)")  # fmt: skip
    ax2.set(xscale="log", yscale="log", xlabel="simulated users", ylabel="CPU ms per 30 s window",
            title="CPU per window (model time excluded)")  # fmt: skip
    for ax in (ax1, ax2):
        ax.set_xticks(users, [str(u) for u in users])
        ax.legend()
    s = result["settings"]
    fig.suptitle(f"ingest, one worker: model latency {s['model_latency_s']} s/call, "
                 f"concurrency {s['concurrency']}, {result['machine']['cpus']} CPUs")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@harness.main(BenchConfig)
def main(cfg: BenchConfig) -> dict[str, Any]:
    """Users one dataflow worker keeps in real time (1 fps each, simulated model latency),
    CPU ms per 30 s window without model time, and window close → queryable p50/p95."""
    from worldmm.settings import load_settings

    echo = harness.stamped_echo()
    need = ("kafka", "postgres", "redis")
    with harness.stack_or_start(load_settings(), echo, need=need) as settings:
        result = run_benchmark(settings, cfg, echo)
    harness.write_report(result, cfg.out)
    if cfg.out:
        plot(result, cfg.out.with_suffix(".png"))
    return result


if __name__ == "__main__":
    main()
