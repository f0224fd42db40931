"""Ingest benchmark: how many glasses wearers one dataflow worker process keeps in real time.
The real flow runs in a child (:mod:`bench.ingest_worker`) with simulated models, so its CPU is
the pipeline's own. Levels of 1, 4, 16, ... users stream in real time, each with a fresh worker
and topics, until one falls behind (a 30 s window missing, or p95 close → queryable over 30 s).
JSON to ``--out``, a plot beside it; the method is docs/benchmarks/ingest.md."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from bench import harness
from bench.child import Child, child_env, children, cpu_s, proc_stat
from bench.harness import Echo, percentile
from bench.ingest_sim import AUDIO_CHUNK_S, AUDIO_RATE, Wearers, small_jpeg, ten_minute_start
from deploy.stack.process import wait_until
from worldmm.memory.windows import BASE_S, SCALES, align, window_end
from worldmm.settings import Settings

IDLE_SAMPLE_S = 4.0
FPS = 1  # frames a second each simulated wearer sends (the gateway's default)
# The level's figures the report repeats at its top, from the last level that kept up.
HEADLINE = ("cpu_ms_per_window", "db_server_cpu_ms_per_window", "close_to_queryable_",
            "broker_cpu_ms", "producer_cpu_ms", "face_blur_ms_per_frame",
            "wearers_per_core_blur_on", "face_frames_", "face_detect_cpu_ms_per_frame")  # fmt: skip
FLOW_SETTINGS = ("allowed_lateness_s", "stream_idle_s", "frames_per_window", "window_max_attempts")


class BenchConfig(harness.Options):
    users_max: int = Field(2048, description="Most simulated users tried (the last level).")
    users_start: int = Field(1, description="Users of the first level.")
    factor: int = Field(4, description="Users ×factor from one level to the next.")
    minutes: float = Field(1.0, description="Real-time stream per level (whole 30 s windows).")
    model_latency_s: float = Field(2.0, description="Simulated latency of every model call (s).")
    concurrency: int = Field(16, description="Windows in flight at first (in_flight_start).")
    concurrency_max: int | None = Field(
        None, description="The adaptive bound's ceiling (default: WORLDMM_LLM_CONCURRENCY_MAX)."
    )
    seed: int = Field(0, description="Frame generator seed.")
    blob_root: Path | None = Field(
        None, description="Parent of each level's blob dir (default: the temp dir)."
    )
    keep: bool = Field(False, description="Keep the simulated users' rows.")
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


def expected_windows(t0_ms: int, measured_ms: int) -> list[tuple[int, int]]:
    """(scale, start ms) of every window lying inside [t0, t0 + measured)."""
    end = t0_ms + measured_ms
    starts = {(s, align(t, s)) for t in range(t0_ms, end, BASE_S * 1000) for s in SCALES}
    return sorted(k for k in starts if k[1] >= t0_ms and window_end(k) <= end)


def _proc_cpu(pid: int) -> tuple[float, float]:
    """(all threads, librdkafka's ``rdk:*`` threads) CPU seconds of a live process; against the
    embedded broker its consumers spin (see the doc)."""
    kafka = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):  # a thread that ended
            if (task / "comm").read_text().startswith("rdk:"):
                kafka += cpu_s(proc_stat(task / "stat") or [])
    return cpu_s(proc_stat(pid) or []), kafka


def _other_cpu(base: Settings) -> dict[str, float | None]:
    """CPU seconds so far of the embedded broker (None: external) and of this process, which
    runs the producer (the gateway of every wearer)."""
    from deploy.stack.process import read_pid

    broker = read_pid(base.resolved_state_dir / "kafka" / "kafka.pid")
    stat = proc_stat(broker) if broker else None
    return {"broker": cpu_s(stat) if stat else None, "producer": cpu_s(proc_stat(os.getpid()))}


def _rates(before: dict, after: dict, seconds: float, n: int = 0) -> dict[str, float | None]:
    """CPU of each process between two readings: cores over ``seconds``, or ms per window."""
    per = (lambda d: round(1000 * d / n, 1)) if n else (lambda d: round(d / seconds, 3))
    return {k: per(after[k] - v) if v is not None and after[k] is not None else None
            for k, v in before.items()}  # fmt: skip


def _postmaster(conn) -> int | None:
    stat = proc_stat(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    return int(stat[1]) if stat else None


class DbServerCpu:
    """CPU of the PostgreSQL servers' processes (each postmaster's children: on Citus the
    coordinator's and every worker's) when they run on this machine, else None; a lower
    bound (a process that exits takes its CPU)."""

    def __init__(self, database_url: str) -> None:
        from psycopg.conninfo import make_conninfo

        from worldmm.store.db import Database
        from worldmm.store.distribute import is_citus

        self.db = lambda: Database(database_url, max_size=1)
        with self.db() as db, db.connection() as conn:
            masters = [_postmaster(conn)]
            nodes = (
                conn.execute(
                    "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0"
                    " AND noderole = 'primary'"
                ).fetchall()
                if is_citus(conn)
                else []
            )
        for host, port in nodes:
            url = make_conninfo(database_url, host=host, port=port)
            with Database(url, max_size=1) as db, db.connection() as conn:
                masters.append(_postmaster(conn))
        self.postmasters = [m for m in masters if m is not None] if None not in masters else []

    def statements_reset(self) -> bool:
        """Start the statement profile (pg_stat_statements, preloaded by the embedded stack);
        False where the server does not have it."""
        try:
            with self.db() as db, db.transaction() as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute("SELECT pg_stat_statements_reset()")
            return True
        except Exception:  # noqa: BLE001 - not preloaded, or no right to: no profile
            return False

    def statements(self, windows: int, top: int = 10) -> list[dict] | None:
        """The statements that took most server time since the reset, per 30 s window."""
        if not windows:
            return None
        with self.db() as db, db.connection() as conn:
            rows = conn.execute(
                "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 160), calls,"
                " total_exec_time FROM pg_stat_statements WHERE dbid = (SELECT oid FROM"
                " pg_database WHERE datname = current_database())"
                " ORDER BY total_exec_time DESC LIMIT %s",
                (top,),
            ).fetchall()
        return [{"query": q, "calls_per_window": round(c / windows, 2),
                 "ms_per_window": round(t / windows, 3)} for q, c, t in rows]  # fmt: skip

    def read(self) -> dict[int, float] | None:
        if not self.postmasters:
            return None
        return {pid: cpu_s(stat) for pm in self.postmasters for pid, stat in children(pm).items()}

    def since(self, before: dict[int, float] | None) -> float | None:
        now = self.read()
        if before is None or now is None:
            return None
        return sum(cpu - before.get(pid, 0.0) for pid, cpu in now.items())


class Worker:
    """``python -m bench.ingest_worker`` and the windows it reports as finished."""

    def __init__(self, settings: Settings, latency_s: float, workdir: Path) -> None:
        self.report = workdir / "windows.jsonl"
        cmd = [sys.executable, "-m", "bench.ingest_worker", "--latency-s", str(latency_s)]
        cmd += ["--report", str(self.report)]
        self.child = Child("ingest worker", cmd, workdir / "worker.log", child_env(settings))
        self.child.start()
        self._offset = 0
        self.finished: dict[tuple[str, int, int], dict] = {}

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

    def done(self, key: tuple[str, int, int], status: str = "complete") -> bool:
        return self.finished.get(key, {}).get("status") == status


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


def run_level(base: Settings, cfg: BenchConfig, users: int, run_id: str, echo: Echo) -> dict:
    """One level: a fresh worker, ``users`` wearers streaming in real time, then the windows'
    close → queryable latencies and what the worker and PostgreSQL spent per window."""
    from connectors.gateway import GlassesProducer
    from connectors.topics import create_topics
    from worldmm.store.db import Database

    tmp = Path(tempfile.mkdtemp(prefix=f"worldmm-bench-ingest-{users}-"))
    settings = base.model_copy(
        update={
            "topic_prefix": f"bench.ingest.{run_id}.{users}.",
            "topic_partitions": 1,
            "in_flight_start": cfg.concurrency,
            "in_flight_max": cfg.concurrency_max or base.in_flight_max,
            "blob_dir": Path(tempfile.mkdtemp(prefix="blobs-", dir=cfg.blob_root or tmp)),
            "state_dir": tmp / "state",
            "max_past_age_s": max(base.max_past_age_s, 3 * 3600.0),
            "ingest_create_users": True,  # simulated wearers nobody made through the API
        }
    )
    names = [f"bench-{run_id}-u{u:03d}" for u in range(users)]
    create_topics(settings.kafka_brokers, settings)
    level: dict[str, Any] = {"users": users, "loadavg_start": harness.loadavg()}
    started = time.monotonic()
    db_cpu = DbServerCpu(settings.database_url)
    worker = Worker(settings, cfg.model_latency_s, tmp)
    cpu = lambda: _proc_cpu(worker.child.pid)  # noqa: E731
    try:
        t0 = ten_minute_start()  # event time runs at wall speed from there
        t0_ms = int(t0.timestamp() * 1000)
        with GlassesProducer(settings) as producer:
            for name in names:
                producer.start_session(name, "s1", t0)
            producer.flush()
            with Database(settings.database_url, max_size=1) as db:

                def consuming() -> bool:  # the worker has recorded every user's session start
                    worker.child.check()
                    with db.connection() as conn:
                        query = "SELECT count(*) FROM sessions WHERE user_id = ANY(%s)"
                        return conn.execute(query, (names,)).fetchone()[0] == users

                wait_until(consuming, timeout_s=180, what="the worker to start", interval_s=0.25)
            level["worker_startup_s"] = round(time.monotonic() - started, 1)
            # The idle worker's own CPU rate (Kafka polling), to tell it apart from the work.
            idle0, other_idle0, idle_t0 = cpu(), _other_cpu(base), time.monotonic()
            time.sleep(IDLE_SAMPLE_S)
            idle1, idle_dt = cpu(), time.monotonic() - idle_t0
            level["idle_cpu_cores"] = round((idle1[0] - idle0[0]) / idle_dt, 3)
            level["idle_broker_cpu_cores"] = _rates(other_idle0, _other_cpu(base), idle_dt)[
                "broker"
            ]
            idle_pipeline = (idle1[0] - idle1[1]) - (idle0[0] - idle0[1])
            level["idle_cpu_cores_without_kafka_client"] = round(idle_pipeline / idle_dt, 3)
            measured_s = cfg.windows_per_user * BASE_S
            # Enough stream after the last measured window for the watermark to pass it.
            tail_s = int(settings.allowed_lateness_s) + AUDIO_CHUNK_S + 2
            cpu0, db0, wall0 = cpu(), db_cpu.read(), time.time()
            other0, profiled = _other_cpu(base), db_cpu.statements_reset()
            echo(
                f"  {users} users: worker up in {level['worker_startup_s']}s;"
                f" streaming {measured_s}s (+{tail_s}s tail)"
            )
            passed_at: dict[int, float] = {}  # second offset -> wall time the stream passed it

            def passed(k: int) -> None:
                passed_at[k] = time.time()
                if k % 5 == 0:
                    worker.read_reports()

            lag = Wearers(names, cfg.seed).stream(producer, t0, measured_s + tail_s, passed)
            producer.flush()

        keys = [(n, s, st) for n in names for s, st in expected_windows(t0_ms, measured_s * 1000)]
        base_keys = [k for k in keys if k[1] == BASE_S]

        def close_wall(scale: int, start_ms: int) -> float:
            return passed_at[(start_ms + scale * 1000 - t0_ms) // 1000]

        def spent() -> tuple:  # once every 30 s window is built (or the drain is over)
            return cpu(), db_cpu.since(db0), _other_cpu(base)

        deadline = max(close_wall(s, st) for _, s, st in keys) + cfg.realtime_s + cfg.drain_s
        at_base = None
        while time.time() < deadline:
            worker.read_reports()
            if at_base is None and all(k in worker.finished for k in base_keys):
                at_base = spent()
            if all(k in worker.finished for k in keys):
                break
            time.sleep(0.2)
        worker.read_reports()
        cpu1, db_s, other1 = at_base or spent()
        measured_wall = time.time() - wall0
    finally:
        worker.child.stop()

    def latencies(scale_keys: list) -> list[float]:
        done = [k for k in scale_keys if worker.done(k)]
        return [worker.finished[k]["at"] - close_wall(k[1], k[2]) for k in done]

    base_lat = latencies(base_keys)
    n, lat = len(base_lat), harness.summary(base_lat)
    cpu_total, cpu_kafka = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    all_done, p95 = n == len(base_keys), percentile(base_lat, 95)

    def per_window(seconds: float | None) -> float | None:
        return round(1000 * seconds / n, 1) if n and seconds is not None else None

    coarse = {}
    for scale in SCALES[1:]:
        if scale_keys := [k for k in keys if k[1] == scale]:
            figures = harness.summary(latencies(scale_keys))
            coarse[str(scale)] = {
                "expected": len(scale_keys),
                "complete": figures["n"],
                "close_to_queryable_p50_s": figures.get("p50"),
                "close_to_queryable_max_s": figures.get("max"),
            }
    faces = _faces(worker.finished.values())
    level |= {
        "windows_expected": len(base_keys),
        "windows_complete": n,
        "windows_failed": sum(1 for k in base_keys if worker.done(k, "failed")),
        **{f"close_to_queryable_{q}_s": lat.get(q) for q in ("p50", "p95", "max")},
        "coarse": coarse,
        "cpu_s": round(cpu_total - cpu_kafka, 3),  # the worker without its Kafka client threads
        "cpu_ms_per_window": per_window(cpu_total - cpu_kafka),
        "kafka_client_cpu_s": round(cpu_kafka, 3),  # librdkafka's threads of the worker
        "cpu_ms_per_window_with_kafka_client": per_window(cpu_total),
        "db_server_cpu_ms_per_window": per_window(db_s),
        **{f"{k}_cpu_ms_per_window": v for k, v in _rates(other0, other1, 0, n).items()},
        # one PUT per created object (containers, late captures); none is overwritten here
        "object_store_requests_per_wearer_hour": round(
            sum(1 for p in Path(settings.blob_dir).rglob("*") if p.is_file())
            * 3600
            / (users * measured_s)
        ),
        **faces,
        # wearers whose every frame one core searches as fast as they arrive (FPS each)
        "wearers_per_core_blur_on": round(1000 / (cpu_ms * FPS), 1)
        if (cpu_ms := faces["face_detect_cpu_ms_per_frame"])
        else None,
        "measured_wall_s": round(measured_wall, 1),
        "producer_lag_max_s": round(lag, 3),
        "loadavg_end": harness.loadavg(),
        "realtime": all_done and p95 is not None and p95 <= cfg.realtime_s,
        "every_window_in_time": all_done and bool(base_lat) and max(base_lat) <= cfg.realtime_s,
        "notes": [f"the producer fell {lag:.1f}s behind schedule (machine busy)"]
        if lag > 1.0
        else [],
    }
    if profiled:  # server time by statement: where PostgreSQL's ms per window go
        level["db_statements"] = db_cpu.statements(n)
    _clean_up(settings, names, cfg.keep)
    shutil.rmtree(tmp, ignore_errors=True)
    return level


def _faces(reports: Iterable[dict]) -> dict[str, Any]:
    """Detection + blur wall ms of one searched frame (None: blurring off), frames searched
    and veiled, the share searched, and the CPU of one search (decode, detect, blur, encode):
    what WORLDMM_FACE_BLUR_CORES limits. The reports carry the worker's running totals."""
    blur_s, blurred = max((r.get("blur", [0, 0]) for r in reports), default=[0, 0])
    detected, veiled, cpu_s = max((r.get("faces", [0, 0, 0]) for r in reports), default=[0, 0, 0])
    frames = detected + veiled
    return {
        "face_blur_ms_per_frame": round(1000 * blur_s / blurred, 1) if blurred else None,
        "face_frames_detected": int(detected),
        "face_frames_veiled": int(veiled),
        "face_frames_detected_share": round(detected / frames, 3) if frames else None,
        "face_detect_cpu_ms_per_frame": round(1000 * cpu_s / detected, 2) if detected else None,
    }


def _fit_marginal(levels: list[dict]) -> float | None:
    """Slope of CPU seconds over windows built (ms per window, fixed costs removed)."""
    pts = [(lv["windows_complete"], lv["cpu_s"]) for lv in levels if lv["windows_complete"]]
    if len({w for w, _ in pts}) < 2:
        return None
    x, y = np.asarray(pts, dtype=float).T
    return round(float(1000 * np.polyfit(x, y, 1)[0]), 1)


def run_benchmark(settings: Settings, cfg: BenchConfig, echo: Echo) -> dict[str, Any]:
    run, run_id = harness.Run(), uuid.uuid4().hex[:8]
    levels: list[dict] = []
    for users in user_levels(cfg.users_start, cfg.users_max, cfg.factor):
        lv = run_level(settings, cfg, users, run_id, echo)
        levels.append(lv)
        latency = "/".join(str(lv[f"close_to_queryable_{q}_s"]) for q in ("p50", "p95", "max"))
        echo(
            f"  {users} users: {lv['windows_complete']}/{lv['windows_expected']} windows,"
            f" close→queryable p50/p95/max {latency} s,"
            f" {lv['cpu_ms_per_window']} CPU ms/window, realtime={lv['realtime']}"
        )
        if not lv["realtime"]:
            break
    ok = [lv["users"] for lv in levels if lv["realtime"]]
    strict = [lv["users"] for lv in levels if lv["every_window_in_time"]]
    head = next((lv for lv in reversed(levels) if lv["realtime"]), levels[0])
    return run.stamp(
        {
            "benchmark": "ingest",
            "users_realtime_max": max(ok, default=0),
            "users_realtime_max_every_window": max(strict, default=0),
            "search_ended": "users_max reached"
            if levels[-1]["realtime"]
            else "a level fell behind",
            "headline_level_users": head["users"],
            **{k: v for k, v in head.items() if k.startswith(HEADLINE)},
            "cpu_ms_per_window_marginal": _fit_marginal(levels),
            "worker_idle_cpu_cores": head["idle_cpu_cores"],
            "broker_idle_cpu_cores": head.get("idle_broker_cpu_cores"),
            "object_store_requests_per_wearer_hour": head["object_store_requests_per_wearer_hour"],
            "settings": {
                **cfg.model_dump(mode="json"),
                "windows_per_user": cfg.windows_per_user,
                "fps": FPS,
                "frame_jpeg_bytes": len(small_jpeg(cfg.seed)),
                "frame_px": "96x72 (blur cost grows with frame size: docs/privacy.md)",
                "audio": f"{AUDIO_CHUNK_S} s chunks, {AUDIO_RATE} Hz PCM16 WAV (silent)",
                **{k: getattr(settings, k) for k in FLOW_SETTINGS},
                "model": "simulated: every call waits model_latency_s (bench/ingest_sim.py)",
                "text_embedder": "sim-hash: deterministic hash vectors, not MiniLM",
                "workers": "one Bytewax worker in one process (bench/ingest_worker.py)",
                "criterion": f"every 30 s window built and p95 close→queryable ≤ {cfg.realtime_s}s",
            },
            "levels": levels,
        }
    )


def plot(result: dict[str, Any], path: Path) -> None:
    """Close → queryable and CPU per window against users, one point per level."""
    plt = harness.pyplot()
    levels, s = result["levels"], result["settings"]
    users = [lv["users"] for lv in levels]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for key in ("p50", "p95", "max"):
        ax1.plot(users, [lv[f"close_to_queryable_{key}_s"] for lv in levels], "o-", label=key)
    ax1.axhline(s["realtime_s"], color="grey", ls="--", label="real-time limit")
    ax1.set(xlabel=f"simulated users ({FPS} fps each)", ylabel="seconds")
    ax1.set_title("30 s window close → queryable")
    series = {
        "cpu_ms_per_window": "dataflow worker (pipeline)",
        "cpu_ms_per_window_with_kafka_client": "worker incl. Kafka client threads",
        "db_server_cpu_ms_per_window": "PostgreSQL server",
    }
    for key, label in series.items():
        if any(lv[key] is not None for lv in levels):
            ax2.plot(users, [lv[key] for lv in levels], "o-", label=label)
    if result.get("cpu_ms_per_window_marginal"):
        label = "pipeline, marginal (slope over levels)"
        ax2.axhline(result["cpu_ms_per_window_marginal"], color="grey", ls=":", label=label)
    ax2.set(yscale="log", xlabel="simulated users", ylabel="CPU ms per 30 s window")
    ax2.set_title("CPU per window (model time excluded)")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_xticks(users, [str(u) for u in users])
        ax.legend()
    title = f"ingest, one worker: model latency {s['model_latency_s']} s/call"
    fig.suptitle(f"{title}, concurrency {s['concurrency']}, {result['machine']['cpus']} CPUs")
    harness.save_figure(fig, path)


@harness.main(BenchConfig)
def main(cfg: BenchConfig) -> dict[str, Any]:
    """Users one dataflow worker keeps in real time (1 fps each, simulated model latency),
    CPU ms per 30 s window without model time, and window close → queryable p50/p95."""
    need = ("kafka", "postgres", "redis")
    result = harness.report_on_stack(
        cfg.out, lambda settings, echo: run_benchmark(settings, cfg, echo), need=need
    )
    if cfg.out:
        plot(result, cfg.out.with_suffix(".png"))
    return result


if __name__ == "__main__":
    main()
